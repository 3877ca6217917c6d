"""The drain kind: each case of a row drains its own backlog, case after case in every round (the rows' warm-up
first), so that run i of one case pairs with run i of another; then the row's block of spreads and ratios.

With run.py --vs, every case also runs with the other checkout's daemon, beside it in each round."""

from __future__ import annotations

import copy
import os
import random
import re
from typing import Any

import harness
from figures import drain_text, interleave, middle_rate, paired, ratios, spreads
from harness import free_port, unique
from processes import proc_cpu_seconds
from session import Bench
from shapes import Case, Row, place

# every traced case's span buffer: export every 200 ms (the SDK's default is 5 s) or at 512 spans, room for 8,192
SPAN_BUFFER = {"OTEL_BSP_SCHEDULE_DELAY": "200", "OTEL_BSP_MAX_QUEUE_SIZE": "8192",
               "OTEL_BSP_MAX_EXPORT_BATCH_SIZE": "512"}
SLOW_COLLECTOR_MS = 1000

def traced(bench: Bench, case: Case) -> dict[str, str] | None:
    """The OTEL_* variables of a traced case, the collector reset (and slowed or pointed nowhere, as the case says)."""
    if case.tracing is None:
        return None
    sampler, argument, collector = case.tracing
    bench.otlp.call("POST", "reset")
    bench.otlp.set_delay(SLOW_COLLECTOR_MS if collector == "slow" else 0)
    endpoint = f"http://127.0.0.1:{free_port()}" if collector == "down" else bench.otlp.url
    variables = {"OTEL_EXPORTER_OTLP_ENDPOINT": endpoint, "OTEL_TRACES_SAMPLER": sampler, **SPAN_BUFFER}
    return variables | ({"OTEL_TRACES_SAMPLER_ARG": argument} if argument else {})

def dynamodb_figures(bench: Bench, table: str, delivered: int, cpu_before: float) -> dict[str, Any]:
    """DynamoDB requests per delivered message by the stand-in's count of one table, its batches' sizes, its CPU."""
    stats = bench.dynamodb.stats(f"?table={table}")
    requests, items = stats["requests"].get(table, {}), stats["items"].get(table, {})
    startup = ("DescribeTable", "CreateTable", "DescribeTimeToLive", "UpdateTimeToLive")
    claims, completions = requests.get("TransactWriteItems", 0), requests.get("BatchWriteItem", 0)
    return {"dynamodb_requests_per_msg": sum(n for a, n in requests.items() if a not in startup) / max(1, delivered),
            "dynamodb_startup_requests": sum(requests.get(action, 0) for action in startup),
            "claims_per_transaction": items.get("TransactWriteItems", 0) / claims if claims else None,
            "completions_per_batch_write": items.get("BatchWriteItem", 0) / completions if completions else None,
            "dynamodb_mean_added_ms": stats["mean_added_ms"], "dynamodb_by_action": requests,
            "dynamodb_standin_cpu_us_per_msg": ((proc_cpu_seconds(bench.dynamodb.pid) or 0) - cpu_before) / max(
                1, delivered) * 1e6}

def otlp_figures(bench: Bench, case: Case, delivered: int) -> dict[str, Any]:
    stats = bench.otlp.stats()
    out = {"spans_received": stats["spans"], "export_requests": stats["requests"],
           "export_bytes_per_span": stats["bytes"] / stats["spans"] if stats["spans"] else None}
    if case.tracing and case.tracing[2] != "down" and case.tracing[0] == "always_on":
        out["spans_not_received"] = delivered - stats["spans"]
    return out

def cpu_to_exit(worker: Any, messages: int) -> float | None:
    """CPU per message from the first delivery to the exit (wait4's rusage), the stop's own work included."""
    first = next((s for s in worker.samples if s.cpu is not None and s.count > 0), None)
    if first is None or worker.rusage is None:
        return None
    return (worker.rusage.ru_utime + worker.rusage.ru_stime - first.cpu) / max(1, messages - first.count) * 1e6

def one_drain(bench: Bench, case: Case, label: str, messages: int, import_trace: bool = False) -> dict[str, Any]:
    """One drain of the case, with what its configuration adds: an idle tree first, DynamoDB, spans, steady rate."""
    sqs_ms = case.sqs_ms if case.sqs_ms is not None else bench.fauxqs.default_delay_ms
    bench.fauxqs.set_delay(sqs_ms)  # also resets its measure of the delay actually added
    idle = bench.idle_tree_mb(case, f"{label}-idle") if case.idle_first else None
    table = unique("bench-idempotency") if case.dynamodb_ms is not None else None
    if table is not None:
        bench.dynamodb.set_delay(case.dynamodb_ms)
        bench.dynamodb.call("POST", f"create?table={table}")  # there before the start, as after a first start
    standin_cpu = (proc_cpu_seconds(bench.dynamodb.pid) or 0.0) if table is not None else 0.0
    if import_trace:
        os.environ["PYTHONPROFILEIMPORTTIME"] = "1"  # worker_env copies it into the daemon's environment
    try:
        result = bench.drain(case, label, messages, table=table, traced=traced(bench, case))
    finally:
        os.environ.pop("PYTHONPROFILEIMPORTTIME", None)
    worker, delivered = result.pop("worker"), result["messages"]
    text = worker.log_text()
    result.update(sqs_mean_added_ms=bench.fauxqs.stats()["mean_added_ms"] or 0.0, loadavg=list(os.getloadavg()),
                  warnings=text.count(" WARNING "), cpu_us_per_msg_to_exit=cpu_to_exit(worker, delivered),
                  idle_tree_rss_mb=idle, span_warnings=text.count("spans dropped"))
    if idle and result["peak_tree_rss_mb"]:
        result["tree_peak_over_idle"] = result["peak_tree_rss_mb"] / idle
    if import_trace:
        result["opentelemetry_modules"] = len(set(re.findall(r"\|\s*(opentelemetry[\w.]*)\s*$", text, re.M)))
    if table is not None:
        result.update(dynamodb_figures(bench, table, delivered, standin_cpu))
        bench.dynamodb.call("POST", f"forget?table={table}")
    if case.tracing is not None:
        result.update(otlp_figures(bench, case, delivered))
    if case.ideal():
        times = sorted(t for t, _ in bench.sink.events())
        held = result["sink_mean_held_ms"] or case.app_ms
        result.update(steady_msgs_per_s=middle_rate(times), fraction_of_ideal=result["msgs_per_s"] / case.ideal(),
                      fraction_of_ideal_at_measured_hold=result["msgs_per_s"] / case.ideal() * held / case.app_ms,
                      ms_to_first_wave=times[min(len(times), case.concurrency) - 1] - times[0])
        result["steady_fraction_of_ideal"] = (result["steady_msgs_per_s"] or 0) / case.ideal()
    result["messages_per_post"] = delivered / result["sink_posts"] if result["sink_posts"] else None
    return result

def run(bench: Bench, row: Row) -> dict[str, Any]:
    """Every case of the row in turns, `bench.settings.runs` rounds; the block."""
    s, bins = bench.settings, {"": harness.DAEMON_BIN, **({"@vs": bench.vs} if bench.vs else {})}
    cases = {name + side: case for name, case in row.cases.items() for side in bins
             if side == "" or case.worker == "daemon"}
    messages = {name: s.latency_messages if s.latency_messages and row.name == "latency"
                else bench.messages(case) for name, case in cases.items()}

    def one(name: str, index: int, label: str = "", **options: Any) -> dict[str, Any]:
        harness.use_daemon_bin(bins["@vs" if name.endswith("@vs") else ""])
        try:
            return one_drain(bench, cases[name], label or f"{row.name}-{re.sub('[/@]', '-', name)}-{index}",
                             options.pop("messages", messages[name]), **options)
        finally:
            harness.use_daemon_bin(bins[""])

    imports = {}  # a traced row's warm-ups run under -X importtime: without [tracing] no opentelemetry import
    traces = any(case.tracing for case in cases.values())
    warmups = [name for name in cases if name.partition("@")[0] in row.warmup] if traces or not s.quick else []
    for name in warmups:  # the first drains after the services start (node's JIT, fresh queues) run slower
        warm = one(name, 0, f"{row.name}-{re.sub('[/@]', '-', name)}-warmup", messages=min(5000, messages[name] // 2),
                   import_trace=traces)
        imports[name] = warm.get("opentelemetry_modules")
    order = (lambda i: random.Random(i).sample(list(cases), len(cases))) if row.params.get("shuffle") else None
    runs = interleave(s.runs, cases, one, lambda name, i, r: f"{row.name} {name} run {i + 1}: {drain_text(r)}", order)
    return {**shape(row, runs), **({"opentelemetry_modules_imported": imports} if traces else {})}

def shape(row: Row, runs: dict[str, list[dict[str, Any]]]) -> dict[str, Any]:
    """Each case's spreads where its name says, the sides' ratios, the paired ratios, the row's constants."""
    block: dict[str, Any] = copy.deepcopy(row.params.get("block", {}))
    for name, results in runs.items():
        place(block, name.replace("@vs", "") if "@vs" not in name else f"vs_checkout/{name[:-3]}",
              {**keyed(results, row.keys), "by_action_last_run": results[-1]["sqs_by_action"]})
        if name.endswith("@vs"):
            for key in ("msgs_per_s", "cpu_us_per_msg"):
                place(block, f"this_over_vs_checkout/{name[:-3].replace('/', '_')}/{key}",
                      paired(runs[name[:-3]], results, key))
    if row.ratio:
        add_ratios(block, list(row.cases))
    for where, over, under, key in row.paired:
        place(block, where, paired(runs[over], runs[under], key))
    return block

def keyed(results: list[dict[str, Any]], keys: tuple[str, ...]) -> dict[str, Any]:
    """The spreads of `keys`; "out=source" keeps a figure under the name its row has always had."""
    return {out: spreads(results, [src or out])[src or out] for out, _, src in (k.partition("=") for k in keys)}

def add_ratios(block: dict[str, Any], names: list[str]) -> None:
    """A group of two sides ("g/a", "g/b") gets ratio_a_to_b: the ratio of their medians, key by key."""
    groups: dict[str, list[str]] = {}
    for name in dict.fromkeys(names):
        group, _, side = name.rpartition("/")
        groups.setdefault(group, []).append(side)
    for group, sides in groups.items():
        inner = block[group] if group else block
        if len(sides) == 2 and all(side in inner for side in sides):
            inner[f"ratio_{sides[0]}_to_{sides[1]}"] = ratios(inner[sides[0]], inner[sides[1]])
