"""The tracing scenario of bench/run.py: what [tracing] costs (issue 29, item 3).

* tracing  a backlog of 20,000 drained at concurrency 50 from fauxqs into the instant sink by the daemon, five ways,
           interleaved run by run: without [tracing] (`off`); with `[tracing] exporter = "otlp"` and every
           span sampled (`all`, OTEL_TRACES_SAMPLER=always_on) exporting to bench/otlp_sink.mjs, which answers
           at once; with a 1 % ratio sampler (`ratio1`, traceidratio 0.01: the bench's messages carry no
           parent context, so parent-based or not is the same); every span sampled and the collector down
           (`down`: the endpoint a closed port); and every span sampled to a collector that holds each answer
           a second (`slow`), in a shuffled order each run (seeded by the run's number). Ratios are paired:
           run i of a case over run i of `off` (and for `down` and `slow`, the rate over run i of `all` too).
           The CPU per message is the daemon's own, from its first delivery to its last (as in every backlog
           scenario) and from its first delivery to its exit (`to exit`: the last spans' export at the stop
           included). Spans are
           counted by the collector (decoded just enough to count them); with every span sampled, the spans
           not received are the delivered messages less the spans the collector took. The span buffer is
           set by SPAN_BUFFER below (OTEL_BSP_*). The warm-up drains run with PYTHONPROFILEIMPORTTIME, and
           the `off` one's log is searched for an opentelemetry module: without [tracing] none is imported.
"""

from __future__ import annotations

import os
import random
import re
from typing import Any

from harness import Traced, free_port, log, paired, spread

CONCURRENCY = 50
# each drain's messages (--quick: the throughput scenario's), about 5 s of CPU: over the throughput scenario's
# 5,000 (1.2 s) the machine's speed from one second to the next spread the pairs' ratios twice as far, wider
# than the distance from the 1 % case to its 1.1x line
MESSAGES = 20_000
# the span buffer of every traced case: export every 200 ms (the SDK's default is 5 s) or at 512 spans, with
# room for 8,192 (the default 2,048 is 0.2-0.7 s of this drain's spans)
SPAN_BUFFER = (("OTEL_BSP_SCHEDULE_DELAY", "200"), ("OTEL_BSP_MAX_QUEUE_SIZE", "8192"),
               ("OTEL_BSP_MAX_EXPORT_BATCH_SIZE", "512"))
SLOW_COLLECTOR_MS = 1000
# name -> (sampler, its argument, collector: "up" | "down" | "slow"); None: no [tracing]
CASES: dict[str, tuple[str, str | None, str] | None] = {
    "off": None, "all": ("always_on", None, "up"), "ratio1": ("traceidratio", "0.01", "up"),
    "down": ("always_on", None, "down"), "slow": ("always_on", None, "slow")}
KEYS = ("msgs_per_s", "cpu_us_per_msg", "cpu_us_per_msg_to_exit", "cpu_share_of_one_core", "spans_received",
        "spans_not_received", "export_requests", "export_bytes_per_span", "span_warnings", "left_in_queue")
TARGET_CPU = {"all": 1.5, "ratio1": 1.1}  # issue 29: CPU per message over tracing off, at most


def traced(bench: Any, case: str) -> Traced | None:
    shape = CASES[case]
    if shape is None:
        return None
    sampler, argument, collector = shape
    endpoint = f"http://127.0.0.1:{free_port()}" if collector == "down" else bench.otlp.url
    return Traced(endpoint, sampler, argument, SPAN_BUFFER)


def case_run(bench: Any, case: str, label: str, messages: int, import_trace: bool = False) -> dict[str, Any]:
    """One drain of `messages` in one case, with the collector's counts."""
    collector = CASES[case][2] if CASES[case] else None
    if collector is not None:
        bench.otlp.reset()
        bench.otlp.set_delay(SLOW_COLLECTOR_MS if collector == "slow" else 0)
    if import_trace:
        os.environ["PYTHONPROFILEIMPORTTIME"] = "1"  # worker_env copies it into the daemon's environment
    try:
        result = bench.backlog_run("daemon", label, concurrency=CONCURRENCY, messages=messages, delay_ms=0,
                                   traced=traced(bench, case))
    finally:
        os.environ.pop("PYTHONPROFILEIMPORTTIME", None)
    worker = bench.workers[-1]
    text = worker.log_text()
    lines = text.splitlines()
    result["warnings"] = sum(" WARNING " in line for line in lines)
    result["span_warnings"] = sum("spans dropped" in line for line in lines)
    result["cpu_us_per_msg_to_exit"] = cpu_to_exit(worker, result["messages"])
    if import_trace:
        result["opentelemetry_modules"] = len(set(re.findall(r"\|\s*(opentelemetry[\w.]*)\s*$", text, re.M)))
    if collector is None:
        return result
    stats = bench.otlp.stats()
    result.update(spans_received=stats["spans"], export_requests=stats["requests"],
                  export_bytes_per_span=stats["bytes"] / stats["spans"] if stats["spans"] else None,
                  undecoded_exports=stats["bad"])
    if collector != "down" and CASES[case][0] == "always_on":
        result["spans_not_received"] = result["messages"] - stats["spans"]
    return result


def cpu_to_exit(worker: Any, messages: int) -> float | None:
    """CPU per message from the first delivery to the exit (wait4's rusage), the stop's own work included."""
    first = next((s for s in worker.samples if s.cpu is not None and s.count > 0), None)
    if first is None or worker.rusage is None:
        return None
    total = worker.rusage.ru_utime + worker.rusage.ru_stime
    return (total - first.cpu) / max(1, messages - first.count) * 1e6


def tracing(bench: Any) -> dict[str, Any]:
    s = bench.settings
    messages = s.throughput_messages if s.quick else MESSAGES
    runs: dict[str, list[dict[str, Any]]] = {case: [] for case in CASES}
    imports: dict[str, int | None] = {}
    try:
        for case in ("off", "all"):  # unmeasured: node's JIT, fresh queues; and what each imports
            warm = case_run(bench, case, f"tracing-{case}-warmup", messages // 2, import_trace=True)
            imports[case] = warm.get("opentelemetry_modules")
        log(f"  tracing: opentelemetry modules imported: {imports}")
        for index in range(s.runs):
            # a new order each run (seeded: the same in every bench run): in one fixed order, or one turned a
            # place each run, every case always followed the same one (`off` followed `slow`, `ratio1` followed
            # `all`), and what a drain leaves the machine to do (or not do) after it fell on the same case
            order = list(CASES)
            random.Random(index).shuffle(order)
            for case in order:
                result = case_run(bench, case, f"tracing-{case}-{index}", messages)
                log(f"  tracing {case} run {index + 1}: {result['msgs_per_s']:.0f} msg/s, "
                    f"{result['cpu_us_per_msg']:.0f} us CPU/msg ({result['cpu_us_per_msg_to_exit'] or 0:.0f} to exit, "
                    f"{result['cpu_share_of_one_core']:.0%} of a core), spans received "
                    f"{result.get('spans_received')}, not received {result.get('spans_not_received')}, "
                    f"{result.get('export_requests')} exports, {result['left_in_queue']} left in the queue, "
                    f"{result['warnings']} WARNING lines ({result['span_warnings']} on spans)")
                runs[case].append(result)
    finally:
        if bench._otlp is not None:
            bench.otlp.set_delay(0)
    out: dict[str, Any] = {
        "concurrency": CONCURRENCY, "messages": messages, "span_buffer": dict(SPAN_BUFFER),
        "slow_collector_ms": SLOW_COLLECTOR_MS, "opentelemetry_modules_imported": imports,
        "cases": {case: None if shape is None else {"sampler": shape[0], "sampler_arg": shape[1],
                                                    "collector": shape[2]} for case, shape in CASES.items()}}
    for case, results in runs.items():
        out[case] = {key: spread([r.get(key) for r in results]) for key in KEYS}
        for key in ("msgs_per_s", "cpu_us_per_msg", "cpu_us_per_msg_to_exit"):
            out[case][f"{key}_over_off"] = paired(results, runs["off"], key)
        # a collector down or slow against one that answers at once, every span sampled in both
        out[case]["msgs_per_s_over_all"] = paired(results, runs["all"], "msgs_per_s")
    return out


RUNNERS = {"tracing": tracing}


def describe(case: str, shape: dict[str, Any] | None) -> str:
    if shape is None:
        return "tracing off"
    sampled = "1 % sampled" if shape["sampler"] == "traceidratio" else "all sampled"
    return {"up": f"{sampled}", "down": f"{sampled}, collector down",
            "slow": f"{sampled}, collector slow"}[shape["collector"]]


def table_rows(scenario: dict[str, Any], cell: Any, ratio_text: Any) -> list[tuple[str, str, str, str]]:
    """Rows for run.py's table: each case in the workerless column, its paired ratio to `off` in the last."""
    if "tracing" not in scenario:
        return []
    block = scenario["tracing"]
    rows = [(f"tracing c={block['concurrency']}, {block['messages']} messages", "", "", "vs off")]
    for case, shape in block["cases"].items():
        figures, where = block[case], describe(case, shape)
        rows += [(f"  {where}: msgs/s", cell(figures["msgs_per_s"], 0), "", cell(figures["msgs_per_s_over_off"], 2)),
                 (f"  {where}: CPU us/msg", cell(figures["cpu_us_per_msg"], 0), "",
                  cell(figures["cpu_us_per_msg_over_off"], 2)),
                 (f"  {where}: CPU us/msg to exit", cell(figures["cpu_us_per_msg_to_exit"], 0), "",
                  cell(figures["cpu_us_per_msg_to_exit_over_off"], 2))]
        if shape is not None and shape["collector"] != "up":
            rows.append((f"  {where}: msgs/s over all sampled, collector up", "", "",
                         cell(figures["msgs_per_s_over_all"], 2)))
        if shape is not None and shape["collector"] != "down":
            rows.append((f"  {where}: spans received", cell(figures["spans_received"], 0), "", ""))
    return rows


def target_checks(scenario: dict[str, Any]) -> list[tuple[str, Any, str, bool | None]]:
    if "tracing" not in scenario:
        return []
    block = scenario["tracing"]
    checks: list[tuple[str, Any, str, bool | None]] = []
    for case, limit in TARGET_CPU.items():
        ratio = block[case]["cpu_us_per_msg_to_exit_over_off"]["median"]
        checks.append((f"tracing: CPU per message, {describe(case, block['cases'][case])} / off, c=50 (paired runs)",
                       ratio, f"<= {limit:g}", None if ratio is None else ratio <= limit))
    imported = block["opentelemetry_modules_imported"].get("off")
    checks.append(("tracing: opentelemetry modules imported without [tracing]", imported, "== 0",
                   None if imported is None else imported == 0))
    return checks
