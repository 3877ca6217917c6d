"""The idempotency scenario of bench/run.py: what idempotent delivery costs (issue 28, item 3).

* idempotency  a backlog drained at concurrency 50 from fauxqs into the instant sink by the daemon, without
               an idempotency_key (`plain`) and with `idempotency_key = "message_id"` and an [idempotency]
               table on bench/dynamodb_standin.mjs, at a DynamoDB round trip of 0 and of 10 ms; SQS answers at
               once. The same again with a 10 ms SQS round trip too (`sqs10`: both services at 10 ms, as a
               deployment in one region sees them). Cases are interleaved run by run, so the ratios to `plain`
               are paired: run i of a case against run i without a key at the same SQS round trip. Every key is
               new, so every claim succeeds: the cost measured is the cost of delivering, not of duplicates.
               Each run has a table of its own, made before the daemon starts (as in a deployment after the
               first start). DynamoDB requests per delivered message are the stand-in's count of the run's
               table, the start-up calls (DescribeTable, DescribeTimeToLive, UpdateTimeToLive) counted apart.
"""

from __future__ import annotations

from typing import Any

from harness import Idempotent, log, paired, proc_cpu_seconds, spread, unique

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
    idempotent, before = None, None
    if dynamodb_ms is not None:
        bench.dynamodb.set_delay(dynamodb_ms)
        idempotent = Idempotent(bench.dynamodb.url, unique("bench-idempotency"))
        # made before the start, as a deployment's table is after its first start: with a new table a fresh
        # daemon's first receives may claim before its table exists, and `hold` hides them for a second or more
        bench.dynamodb.create(idempotent.table)
        before = proc_cpu_seconds(bench.dynamodb.pid)
    result = bench.backlog_run("daemon", label, concurrency=CONCURRENCY, messages=messages, delay_ms=0,
                               idempotent=idempotent)
    result["warnings"] = sum(" WARNING " in line for line in bench.workers[-1].log_text().splitlines())
    if idempotent is None:
        result.update(dynamodb_requests_per_msg=0.0, dynamodb_startup_requests=0)
        return result
    after = proc_cpu_seconds(bench.dynamodb.pid)
    result.update(dynamodb_figures(bench.dynamodb.stats(idempotent.table), idempotent.table, result["messages"]))
    result["dynamodb_cpu_us_per_msg"] = (after - before) / messages * 1e6 if before is not None and after else None
    bench.dynamodb.forget(idempotent.table)
    return result


def idempotency(bench: Any) -> dict[str, Any]:
    s = bench.settings
    messages = s.throughput_messages
    runs: dict[str, list[dict[str, Any]]] = {case: [] for case in CASES}
    try:
        if not s.quick:  # as in throughput: the first drains after fauxqs and the sink start run slower
            for case in ("plain", "dynamodb0"):
                case_run(bench, case, f"idem-{case}-warmup", messages // 2)
        for index in range(s.runs):
            for case in CASES:
                result = case_run(bench, case, f"idem-{case}-{index}", messages)
                log(f"  idempotency {case} run {index + 1}: {result['msgs_per_s']:.0f} msg/s, "
                    f"{result['cpu_us_per_msg']:.0f} us CPU/msg ({result['cpu_share_of_one_core']:.0%} of a core), "
                    f"{result['dynamodb_requests_per_msg']:.3f} DynamoDB requests/msg "
                    f"{result.get('dynamodb_by_action', {})}, {result['sqs_requests_per_msg']:.3f} SQS requests/msg, "
                    f"{result['left_in_queue']} left in the queue, {result['warnings']} WARNING lines")
                runs[case].append(result)
    finally:
        bench.fauxqs.set_delay(bench.fauxqs.default_delay_ms)
    out: dict[str, Any] = {"concurrency": CONCURRENCY, "messages": messages, "cases": {
        case: {"sqs_ms": sqs_ms, "dynamodb_ms": dynamodb_ms} for case, (sqs_ms, dynamodb_ms) in CASES.items()}}
    for case, results in runs.items():
        plain = runs["plain_sqs10" if CASES[case][0] else "plain"]
        out[case] = {key: spread([r.get(key) for r in results]) for key in KEYS}
        out[case]["rate_over_plain"] = paired(results, plain, "msgs_per_s")
        out[case]["cpu_over_plain"] = paired(results, plain, "cpu_us_per_msg")
        out[case]["by_action_last_run"] = results[-1].get("dynamodb_by_action", {})
    return out


RUNNERS = {"idempotency": idempotency}


def table_rows(scenario: dict[str, Any], cell: Any, ratio_text: Any) -> list[tuple[str, str, str, str]]:
    """Rows for run.py's table: each case in the workerless column, its paired ratio to `plain` in the last."""
    if "idempotency" not in scenario:
        return []
    block = scenario["idempotency"]
    rows = [(f"idempotency c={block['concurrency']}, {block['messages']} messages", "", "", "vs no key")]
    for case, shape in block["cases"].items():
        figures = block[case]
        where = (f"SQS {shape['sqs_ms']:g} ms, " + ("no key" if shape["dynamodb_ms"] is None
                                                     else f"DynamoDB {shape['dynamodb_ms']:g} ms"))
        rows += [(f"  {where}: msgs/s", cell(figures["msgs_per_s"], 0), "", cell(figures["rate_over_plain"], 2)),
                 (f"  {where}: CPU us/msg", cell(figures["cpu_us_per_msg"], 0), "", cell(figures["cpu_over_plain"], 2)),
                 (f"  {where}: DynamoDB requests/msg", cell(figures["dynamodb_requests_per_msg"], 3), "", "")]
    return rows


def target_checks(scenario: dict[str, Any]) -> list[tuple[str, Any, str, bool | None]]:
    if "idempotency" not in scenario:
        return []
    block = scenario["idempotency"]
    rate = block["dynamodb10"]["rate_over_plain"]["median"]
    worst = max((block[case]["dynamodb_requests_per_msg"]["max"] or 0) for case, (_, ms) in CASES.items()
                if ms is not None)
    return [("idempotency: msgs/s at a 10 ms DynamoDB round trip / without a key, c=50 (paired runs)", rate,
             f">= {TARGET_RATE_RATIO:.2f}", None if rate is None else rate >= TARGET_RATE_RATIO),
            ("idempotency: DynamoDB requests per delivered message (worst run)", worst,
             f"<= {TARGET_REQUESTS_PER_MSG:g}", worst <= TARGET_REQUESTS_PER_MSG)]
