"""The scale scenarios against the baseline: scale (50 idle queues, and 1,000 slots on one) and lambda (the Lambda
target's CPU per message against the HTTP target's; Invoke is the sink's /2015-03-31/functions/NAME/invocations)."""

from __future__ import annotations

import random
import signal
import time
from typing import Any

import harness
import processes
from figures import compare, latencies, pool, spread
from harness import unique
from polling import wake_tries
from processes import Worker
from scenario import Block, Check, Row, Scenario, alone, check, compared, interleave

POLL_FOR = 20  # SQS's longest long poll, the setting the idle expectation is given for
QUEUES, CONCURRENCY, WIDE_CONCURRENCY = 50, 50, 1000
LAMBDA_FUNCTION, LAMBDA_CONCURRENCY = "bench-fn", 50
SIDES = ("daemon", "baseline")


def idle_window(bench: Any, group: dict[Any, tuple[list[str], Worker]], window_s: float) -> dict[Any, dict[str, Any]]:
    """Each worker of `group` over an idle window: SQS requests per minute on each of its queues and by action
    (fauxqs's counts), and its CPU seconds per idle minute."""
    counts0, cpu0 = bench.fauxqs.stats()["counts"], {key: worker.cpu() for key, (_, worker) in group.items()}
    began = time.monotonic()
    time.sleep(window_s)
    window, counts1 = time.monotonic() - began, bench.fauxqs.stats()["counts"]
    out = {}
    for key, (names, worker) in group.items():
        per_queue, by_action = [], {}
        for name in names:
            before, n = counts0.get(name, {}), 0
            for action, value in counts1.get(name, {}).items():
                delta = value - before.get(action, 0)
                n += delta
                if delta:
                    by_action[action] = by_action.get(action, 0) + delta
            per_queue.append(n * 60 / window)
        cpu1 = worker.cpu()
        out[key] = {"per_queue": per_queue, "by_action": by_action, "window_s": window,
                    "cpu_s_per_idle_min": (cpu1 - cpu0[key]) * 60 / window
                    if cpu1 is not None and cpu0[key] is not None else None}
    return out


def scale(bench: Any) -> Block:
    """Idle figures of four workers at once (daemon and baseline: 50 queues, and 1 queue at c=1000), then wake-up
    latency on the lowest-priority of the 50 queues, one side at a time, the other one frozen with SIGSTOP."""
    quick = bench.settings.quick
    window_s, tries = (40.0, 5) if quick else (60.0, 20)  # two poll_for or more: every queue polled at least twice
    setups = {"q50": (QUEUES, CONCURRENCY), "c1000": (1, WIDE_CONCURRENCY)}
    idle: dict[tuple[str, str], list[dict[str, Any]]] = {(case, kind): [] for case in setups for kind in SIDES}
    wake: dict[str, list[dict[str, Any]]] = {kind: [] for kind in SIDES}
    for index in range(bench.settings.runs):
        group = {}
        for case, (queues, concurrency) in setups.items():
            for kind in SIDES:
                names = [unique(f"scale-{case}-{kind[0]}{index}-{n:02d}") for n in range(queues)]
                urls = [bench.sqs.create(name) for name in names]  # in priority order: the last is the lowest
                group[(case, kind)] = (names, urls, bench.worker(kind, f"scale-{case}-{kind}-{index}", queues=names,
                                                                 concurrency=concurrency, poll_for=POLL_FOR))
        for *_, worker in group.values():
            worker.wait_started(60)
        time.sleep(3.0)
        for key, figures in idle_window(bench, {key: (names, worker) for key, (names, _, worker) in group.items()},
                                        window_s).items():
            names, _, worker = group[key]
            per_queue = figures.pop("per_queue")
            result = {"requests_per_min": sum(per_queue), "expected_per_min": len(names) * 60 / POLL_FOR,
                      "requests": sum(figures["by_action"].values()), **figures,
                      "rss_mb": (processes.proc_status_kb(worker.pid, "VmRSS") or 0) / 1024,
                      "peak_rss_mb": (processes.proc_status_kb(worker.pid, "VmHWM") or 0) / 1024}
            idle[key].append(result)
            harness.log(f"  scale idle {key[0]} {key[1]} run {index + 1}: {result['requests_per_min']:.1f} requests/min "
                        f"(expected {result['expected_per_min']:.0f}), {result['cpu_s_per_idle_min']:.3f} CPU s/min, "
                        f"RSS {result['rss_mb']:.1f} MB")
        for kind in SIDES:  # the 1000-slot workers are done
            group[("c1000", kind)][2].stop()
        for kind in SIDES:
            other = group[("q50", "baseline" if kind == "daemon" else "daemon")][2]
            other.signal(signal.SIGSTOP)
            try:
                time.sleep(0.5)
                result = latencies(wake_tries(bench, group[("q50", kind)][1], tries, random.Random(index),
                                              POLL_FOR + 10)["latencies"])
            finally:
                other.signal(signal.SIGCONT)
            wake[kind].append(result)
            harness.log(f"  scale wake {kind} run {index + 1} (lowest of {QUEUES} queues): p50 {result['p50_ms']:.1f} "
                        f"ms, p99 {result['p99_ms']:.1f} ms")
        for names, urls, worker in group.values():
            if worker.exit_code is None:
                worker.stop()
            bench.drop_queues(names, urls)
    out: Block = {"poll_for": POLL_FOR, "idle_window_s": window_s, "queues": QUEUES, "concurrency": CONCURRENCY,
                  "wide_concurrency": WIDE_CONCURRENCY}
    for case, (queues, _) in setups.items():
        runs = {kind: idle[(case, kind)] for kind in SIDES}
        out[case] = {**compare(runs, ("requests_per_min", "cpu_s_per_idle_min", "rss_mb", "peak_rss_mb")),
                     "expected_per_min": queues * 60 / POLL_FOR,
                     "by_action_last_run": {kind: runs[kind][-1]["by_action"] for kind in SIDES}}
    out["wake"] = compare(wake, ("p50_ms", "p99_ms", "max_ms"))
    for kind in SIDES:
        pool(out["wake"][kind], wake[kind])
    out["wake"]["tries"] = tries
    return out


def scale_rows(block: Block) -> list[Row]:
    rows = []
    for case in ("q50", "c1000"):
        what = (f"{block['queues']} queues c={block['concurrency']}" if case == "q50"
                else f"1 queue c={block['wide_concurrency']}")
        rows += [compared(f"scale idle {what}: SQS requests/min (expected {block[case]['expected_per_min']:g})",
                          block[case], "requests_per_min"),
                 compared(f"  idle {what}: CPU s per idle minute", block[case], "cpu_s_per_idle_min", 3),
                 compared(f"  idle {what}: RSS MB", block[case], "rss_mb")]
    return rows + [compared(f"scale wake, lowest of {block['queues']} queues: {q} ms", block["wake"], f"{q}_ms")
                   for q in ("p50", "p99")]


def scale_checks(block: Block) -> list[Check]:
    checks = []
    for case in ("q50", "c1000"):
        limit = block[case]["expected_per_min"] + 2
        what = f"{block['queues']} empty queues" if case == "q50" else f"1 empty queue, c={block['wide_concurrency']}"
        checks.append(check(f"scale: idle SQS requests/min, {what}, poll_for={block['poll_for']} (worst run)",
                            block[case]["daemon"]["requests_per_min"]["max"], f"<= {limit:g}",
                            lambda v, m=limit: v <= m))
    return checks + [check(f"scale: wake latency p99, lowest of {block['queues']} queues",
                           block["wake"]["daemon"]["p99_ms"]["median"], "< 50 ms", lambda v: v < 50)]


# ---------------------------------------------------------------- lambda


def lambda_(bench: Any) -> Block:
    """CPU per message, Lambda target (batch_size 1) against the HTTP target, same daemon, same backlog."""
    messages = 2000 if bench.settings.quick else 5000
    options: dict[str, dict[str, Any]] = {"http": {}, "lambda": {"lambda_function": LAMBDA_FUNCTION}}
    if not bench.settings.quick:  # as in throughput: the first backlogs after the node parts start run slower
        for kind in options:
            bench.backlog_run("daemon", f"lambda-{kind}-warmup", concurrency=LAMBDA_CONCURRENCY,
                              messages=messages // 2, delay_ms=0, **options[kind])

    def one(kind: str, i: int) -> dict[str, Any]:
        result = bench.backlog_run("daemon", f"lambda-{kind}-{i}", concurrency=LAMBDA_CONCURRENCY, messages=messages,
                                   delay_ms=0, **options[kind])
        return {**result, "invocations": bench.sink.stats()["invocations"]}

    runs = interleave(bench.settings.runs, options, one, lambda kind, i, r: (
        f"lambda scenario, {kind} target run {i + 1}: {r['cpu_us_per_msg']:.0f} us CPU/msg, {r['msgs_per_s']:.0f} "
        f"msg/s, {r['peak_rss_mb']:.1f} MB, {r['invocations']} invocations"))
    out = compare({"lambda": runs["lambda"], "http": runs["http"]},
                  ("cpu_us_per_msg", "msgs_per_s", "cpu_share_of_one_core", "peak_rss_mb", "sink_cpu_us_per_msg",
                   "left_in_queue"), "lambda", "http")
    out["paired_cpu_ratio"] = spread(a["cpu_us_per_msg"] / b["cpu_us_per_msg"]
                                     for a, b in zip(runs["lambda"], runs["http"]) if b["cpu_us_per_msg"])
    return {**out, "messages": messages, "concurrency": LAMBDA_CONCURRENCY, "lambda_batch_size": 1,
            "invocations_last_run": runs["lambda"][-1]["invocations"]}


def lambda_rows(block: Block) -> list[Row]:
    c, sides = block["concurrency"], ("lambda", "http")
    return [("lambda scenario: columns are Lambda target | HTTP target, same daemon", "", "", ""),
            compared(f"  CPU us/msg, c={c}, Lambda batch_size 1", block, "cpu_us_per_msg", 0, *sides),
            compared(f"  msgs/s, c={c}", block, "msgs_per_s", 0, *sides),
            compared("  peak RSS MB", block, "peak_rss_mb", 1, *sides),
            alone("  CPU/msg Lambda / HTTP (paired runs)", block["paired_cpu_ratio"], 2)]


def lambda_checks(block: Block) -> list[Check]:
    return [check("lambda: daemon CPU/msg Lambda target (batch_size 1) / HTTP target",
                  block["paired_cpu_ratio"]["median"], "<= 2x", lambda v: v <= 2)]


SCENARIOS = (Scenario("scale", scale, scale_rows, scale_checks),
             Scenario("lambda", lambda_, lambda_rows, lambda_checks))
