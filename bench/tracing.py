"""tracing (issue 29): what [tracing] costs. A backlog drained at c=50 into the instant sink five ways, in a shuffled
order each run (seeded by the run's number): without [tracing] (`off`), every span sampled to bench/otlp_sink.mjs
(`all`), a 1 % ratio sampler (`ratio1`), every span sampled with the collector down (`down`) and slow (`slow`: each
answer held a second). Ratios pair run i of a case with run i of `off` (and, for the rate, of `all`). The warm-up
drains run with PYTHONPROFILEIMPORTTIME: without [tracing] no opentelemetry module may be imported."""

from __future__ import annotations

import os
import random
import re
from typing import Any

from figures import cell, drain_text, paired, spreads
from harness import Traced, free_port, log
from idempotency import warnings
from scenario import Block, Check, Row, Scenario, check, interleave

CONCURRENCY = 50
# each drain's messages (--quick: the throughput scenario's), about 5 s of CPU: over 5,000 (1.2 s) the machine's
# speed from one second to the next spread the pairs' ratios twice as far
MESSAGES = 20_000
# every traced case's span buffer: export every 200 ms (the SDK's default is 5 s) or at 512 spans, room for 8,192
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


def case_run(bench: Any, case: str, label: str, messages: int, import_trace: bool = False) -> dict[str, Any]:
    """One drain of `messages` in one case, with the collector's counts."""
    shape = CASES[case]
    traced = None
    if shape is not None:
        sampler, argument, collector = shape
        bench.otlp.reset()
        bench.otlp.set_delay(SLOW_COLLECTOR_MS if collector == "slow" else 0)
        endpoint = f"http://127.0.0.1:{free_port()}" if collector == "down" else bench.otlp.url
        traced = Traced(endpoint, sampler, argument, SPAN_BUFFER)
    if import_trace:
        os.environ["PYTHONPROFILEIMPORTTIME"] = "1"  # worker_env copies it into the daemon's environment
    try:
        result = bench.backlog_run("daemon", label, concurrency=CONCURRENCY, messages=messages, delay_ms=0,
                                   traced=traced)
    finally:
        os.environ.pop("PYTHONPROFILEIMPORTTIME", None)
    worker = bench.workers[-1]
    text = worker.log_text()
    result.update(warnings=warnings(bench), span_warnings=sum("spans dropped" in line for line in text.splitlines()),
                  cpu_us_per_msg_to_exit=cpu_to_exit(worker, result["messages"]))
    if import_trace:
        result["opentelemetry_modules"] = len(set(re.findall(r"\|\s*(opentelemetry[\w.]*)\s*$", text, re.M)))
    if shape is None:
        return result
    stats = bench.otlp.stats()
    result.update(spans_received=stats["spans"], export_requests=stats["requests"],
                  export_bytes_per_span=stats["bytes"] / stats["spans"] if stats["spans"] else None,
                  undecoded_exports=stats["bad"])
    if shape[2] != "down" and shape[0] == "always_on":
        result["spans_not_received"] = result["messages"] - stats["spans"]
    return result


def cpu_to_exit(worker: Any, messages: int) -> float | None:
    """CPU per message from the first delivery to the exit (wait4's rusage), the stop's own work included."""
    first = next((s for s in worker.samples if s.cpu is not None and s.count > 0), None)
    if first is None or worker.rusage is None:
        return None
    return (worker.rusage.ru_utime + worker.rusage.ru_stime - first.cpu) / max(1, messages - first.count) * 1e6


def shuffled(index: int) -> list[str]:
    """A new order each run (the same in every bench run): in a fixed order every case followed the same one, and
    what a drain leaves the machine to do after it fell on the same case."""
    order = list(CASES)
    random.Random(index).shuffle(order)
    return order


def tracing(bench: Any) -> Block:
    s = bench.settings
    messages = s.throughput_messages if s.quick else MESSAGES
    try:
        imports = {case: case_run(bench, case, f"tracing-{case}-warmup", messages // 2, import_trace=True)
                   .get("opentelemetry_modules") for case in ("off", "all")}
        log(f"  tracing: opentelemetry modules imported: {imports}")
        runs = interleave(s.runs, CASES, lambda case, i: case_run(bench, case, f"tracing-{case}-{i}", messages),
                          lambda case, i, r: (
            f"tracing {case} run {i + 1}: {drain_text(r)}, {r['cpu_us_per_msg_to_exit'] or 0:.0f} us/msg to exit, "
            f"spans received {r.get('spans_received')}, not received {r.get('spans_not_received')}, "
            f"{r.get('export_requests')} exports, {r['warnings']} WARNING lines ({r['span_warnings']} on spans)"),
                          order=shuffled)
    finally:
        if "otlp" in bench.on_demand:
            bench.otlp.set_delay(0)
    out: Block = {
        "concurrency": CONCURRENCY, "messages": messages, "span_buffer": dict(SPAN_BUFFER),
        "slow_collector_ms": SLOW_COLLECTOR_MS, "opentelemetry_modules_imported": imports,
        "cases": {case: None if shape is None else {"sampler": shape[0], "sampler_arg": shape[1],
                                                    "collector": shape[2]} for case, shape in CASES.items()}}
    for case, results in runs.items():
        out[case] = {**spreads(results, KEYS), **{f"{key}_over_off": paired(results, runs["off"], key) for key in
                                                  ("msgs_per_s", "cpu_us_per_msg", "cpu_us_per_msg_to_exit")},
                     "msgs_per_s_over_all": paired(results, runs["all"], "msgs_per_s")}
    return out


def describe(shape: dict[str, Any] | None) -> str:
    if shape is None:
        return "tracing off"
    sampled = "1 % sampled" if shape["sampler"] == "traceidratio" else "all sampled"
    return sampled + {"up": "", "down": ", collector down", "slow": ", collector slow"}[shape["collector"]]


def rows(block: Block) -> list[Row]:
    """Each case in the workerless column, its paired ratio to `off` in the last."""
    out = [(f"tracing c={block['concurrency']}, {block['messages']} messages", "", "", "vs off")]
    for case, shape in block["cases"].items():
        figures, where = block[case], describe(shape)
        out += [(f"  {where}: {text}", cell(figures[key], 0), "", cell(figures[f"{key}_over_off"], 2))
                for key, text in (("msgs_per_s", "msgs/s"), ("cpu_us_per_msg", "CPU us/msg"),
                                  ("cpu_us_per_msg_to_exit", "CPU us/msg to exit"))]
        if shape is not None and shape["collector"] != "up":
            out.append((f"  {where}: msgs/s over all sampled, collector up", "", "",
                        cell(figures["msgs_per_s_over_all"], 2)))
        if shape is not None and shape["collector"] != "down":
            out.append((f"  {where}: spans received", cell(figures["spans_received"], 0), "", ""))
    return out


def checks(block: Block) -> list[Check]:
    imported = block["opentelemetry_modules_imported"].get("off")
    return [check(f"tracing: CPU per message, {describe(block['cases'][case])} / off, c=50 (paired runs)",
                  block[case]["cpu_us_per_msg_to_exit_over_off"]["median"], f"<= {limit:g}", lambda v, m=limit: v <= m)
            for case, limit in TARGET_CPU.items()] + [
        check("tracing: opentelemetry modules imported without [tracing]", imported, "== 0", lambda v: v == 0)]


SCENARIOS = (Scenario("tracing", tracing, rows, checks),)
