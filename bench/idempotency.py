"""idempotency (issue 28): what idempotent delivery costs. A backlog drained at c=50 into the instant sink without an
idempotency_key (`plain`) and with one and an [idempotency] table on bench/dynamodb_standin.mjs at a DynamoDB round
trip of 0 and 10 ms, and again at a 10 ms SQS round trip; interleaved, so each case pairs with `plain` run by run.
Every key is new (the cost of delivering, not of duplicates); each run's table is made before the daemon starts."""

from __future__ import annotations

from typing import Any

from figures import cell, drain_text, paired, spreads
from harness import Idempotent, unique
from processes import proc_cpu_seconds
from scenario import Block, Check, Row, Scenario, check, interleave

CONCURRENCY = 50
# name -> (SQS round trip ms, DynamoDB round trip ms; None: no idempotency_key)
CASES: dict[str, tuple[float, float | None]] = {
    "plain": (0, None), "dynamodb0": (0, 0), "dynamodb10": (0, 10),
    "plain_sqs10": (10, None), "dynamodb10_sqs10": (10, 10)}
STARTUP_ACTIONS = ("DescribeTable", "CreateTable", "DescribeTimeToLive", "UpdateTimeToLive")
KEYS = ("msgs_per_s", "cpu_us_per_msg", "cpu_share_of_one_core", "dynamodb_requests_per_msg",
        "dynamodb_startup_requests", "claims_per_transaction", "completions_per_batch_write",
        "dynamodb_mean_added_ms", "dynamodb_cpu_us_per_msg", "sqs_requests_per_msg", "left_in_queue",
        "warnings")
TARGET_RATE_RATIO = 0.70  # issue 28: at a 10 ms DynamoDB round trip, at least 70 % of the rate without a key
TARGET_REQUESTS_PER_MSG = 2.0


def warnings(bench: Any) -> int:
    """WARNING lines in the log of the last worker started."""
    return sum(" WARNING " in line for line in bench.workers[-1].log_text().splitlines())


def dynamodb_figures(stats: dict[str, Any], table: str, delivered: int) -> dict[str, Any]:
    """Requests per delivered message by the stand-in's count of one table, and the sizes of its batches."""
    requests, items = stats["requests"].get(table, {}), stats["items"].get(table, {})
    per_message = sum(n for action, n in requests.items() if action not in STARTUP_ACTIONS)
    claims, completions = requests.get("TransactWriteItems", 0), requests.get("BatchWriteItem", 0)
    return {"dynamodb_requests_per_msg": per_message / max(1, delivered),
            "dynamodb_startup_requests": sum(requests.get(action, 0) for action in STARTUP_ACTIONS),
            "claims_per_transaction": items.get("TransactWriteItems", 0) / claims if claims else None,
            "completions_per_batch_write": items.get("BatchWriteItem", 0) / completions if completions else None,
            "dynamodb_mean_added_ms": stats["mean_added_ms"], "dynamodb_by_action": requests}


def case_run(bench: Any, case: str, label: str, messages: int) -> dict[str, Any]:
    """One drain of `messages` in one case; the backlog figures with the DynamoDB ones."""
    sqs_ms, dynamodb_ms = CASES[case]
    bench.fauxqs.set_delay(sqs_ms)
    if dynamodb_ms is None:
        result = bench.backlog_run("daemon", label, concurrency=CONCURRENCY, messages=messages, delay_ms=0)
        return {**result, "warnings": warnings(bench), "dynamodb_requests_per_msg": 0.0, "dynamodb_startup_requests": 0}
    bench.dynamodb.set_delay(dynamodb_ms)
    idempotent = Idempotent(bench.dynamodb.url, unique("bench-idempotency"))
    # made before the start, as a deployment's table is after its first start: with a new table a fresh daemon's
    # first receives may claim before its table exists, and `hold` hides them for a second or more
    bench.dynamodb.create(idempotent.table)
    before = proc_cpu_seconds(bench.dynamodb.pid)
    result = bench.backlog_run("daemon", label, concurrency=CONCURRENCY, messages=messages, delay_ms=0,
                               idempotent=idempotent)
    after = proc_cpu_seconds(bench.dynamodb.pid)
    result.update(warnings=warnings(bench), **dynamodb_figures(bench.dynamodb.stats(f"?table={idempotent.table}"),
                                                               idempotent.table, result["messages"]))
    result["dynamodb_cpu_us_per_msg"] = (after - before) / messages * 1e6 if before is not None and after else None
    bench.dynamodb.forget(idempotent.table)
    return result


def idempotency(bench: Any) -> Block:
    s = bench.settings
    messages = s.throughput_messages
    try:
        if not s.quick:  # as in throughput: the first drains after fauxqs and the sink start run slower
            for case in ("plain", "dynamodb0"):
                case_run(bench, case, f"idem-{case}-warmup", messages // 2)
        runs = interleave(s.runs, CASES, lambda case, i: case_run(bench, case, f"idem-{case}-{i}", messages),
                          lambda case, i, r: (f"idempotency {case} run {i + 1}: {drain_text(r)}, "
                                              f"{r['dynamodb_requests_per_msg']:.3f} DynamoDB requests/msg "
                                              f"{r.get('dynamodb_by_action', {})}, {r['warnings']} WARNING lines"))
    finally:
        bench.fauxqs.set_delay(bench.fauxqs.default_delay_ms)
    out: Block = {"concurrency": CONCURRENCY, "messages": messages, "cases": {
        case: {"sqs_ms": sqs_ms, "dynamodb_ms": dynamodb_ms} for case, (sqs_ms, dynamodb_ms) in CASES.items()}}
    for case, results in runs.items():
        plain = runs["plain_sqs10" if CASES[case][0] else "plain"]
        out[case] = {**spreads(results, KEYS), "rate_over_plain": paired(results, plain, "msgs_per_s"),
                     "cpu_over_plain": paired(results, plain, "cpu_us_per_msg"),
                     "by_action_last_run": results[-1].get("dynamodb_by_action", {})}
    return out


def rows(block: Block) -> list[Row]:
    """Each case in the workerless column, its paired ratio to `plain` in the last."""
    out = [(f"idempotency c={block['concurrency']}, {block['messages']} messages", "", "", "vs no key")]
    for case, shape in block["cases"].items():
        figures = block[case]
        where = (f"SQS {shape['sqs_ms']:g} ms, " + ("no key" if shape["dynamodb_ms"] is None
                                                     else f"DynamoDB {shape['dynamodb_ms']:g} ms"))
        out += [(f"  {where}: msgs/s", cell(figures["msgs_per_s"], 0), "", cell(figures["rate_over_plain"], 2)),
                (f"  {where}: CPU us/msg", cell(figures["cpu_us_per_msg"], 0), "", cell(figures["cpu_over_plain"], 2)),
                (f"  {where}: DynamoDB requests/msg", cell(figures["dynamodb_requests_per_msg"], 3), "", "")]
    return out


def checks(block: Block) -> list[Check]:
    worst = max((block[case]["dynamodb_requests_per_msg"]["max"] or 0) for case, (_, ms) in CASES.items()
                if ms is not None)
    return [check("idempotency: msgs/s at a 10 ms DynamoDB round trip / without a key, c=50 (paired runs)",
                  block["dynamodb10"]["rate_over_plain"]["median"], f">= {TARGET_RATE_RATIO:.2f}",
                  lambda v: v >= TARGET_RATE_RATIO),
            check("idempotency: DynamoDB requests per delivered message (worst run)", worst,
                  f"<= {TARGET_REQUESTS_PER_MSG:g}", lambda v: v <= TARGET_REQUESTS_PER_MSG)]


SCENARIOS = (Scenario("idempotency", idempotency, rows, checks),)
