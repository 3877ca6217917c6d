"""What each scenario of bench/run.py runs, by name; the backlog scenarios themselves.

The backlog scenarios load a queue, let the daemon and the plain baseline (bench/baseline.py) drain it
in turns and report rate, CPU and memory: throughput, components, slow_sink, memory, latency. The
request-counting and timing scenarios are in bench/polling.py, the scale ones in bench/scale.py.
Each scenario is a function of the running Bench (bench/session.py) returning its figures.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from typing import Any, Callable

import batch
import fleet
import fleet_limits
import flow
import harness
import idempotency
import polling
import redrive
import scale
import scale_targets
import tracing
from harness import log, paired, spread, unique
from session import Bench, summarize

# What the latency scenario compares the daemon with: bench/baseline.py as it is, which is already
# the pipelined loop of the Go peer simple-sqsd (no change was needed).
PIPELINED_BASELINE = ("bench/baseline.py, pipelined as simple-sqsd: `concurrency` greenlets, each looping "
                      "receive(10) -> POST each -> DeleteMessageBatch, so up to `concurrency` receives in flight")


def throughput(bench: Bench) -> dict[str, Any]:
    s = bench.settings
    out = {}
    for concurrency in (10, 50):
        if not s.quick:
            # One unmeasured run of each first: the first backlog after fauxqs and the sink start (node's
            # JIT, fresh queues) ran up to a third slower for whichever side came first.
            for kind in ("daemon", "baseline"):
                bench.backlog_run(kind, f"tp-c{concurrency}-{kind}-warmup", concurrency=concurrency,
                                 messages=s.throughput_messages // 2, delay_ms=0)
        runs: dict[str, list[dict[str, Any]]] = {"daemon": [], "baseline": []}
        for index in range(s.runs):
            for kind in ("daemon", "baseline"):
                result = bench.backlog_run(kind, f"tp-c{concurrency}-{kind}-{index}", concurrency=concurrency,
                                          messages=s.throughput_messages, delay_ms=0)
                log(f"  throughput c={concurrency} {kind} run {index + 1}: {result['msgs_per_s']:.0f} msg/s, "
                    f"{result['cpu_us_per_msg']:.0f} us CPU/msg ({result['cpu_share_of_one_core']:.0%} of a core; "
                    f"fauxqs {result['fauxqs_cpu_us_per_msg']:.0f} us/msg, sink {result['sink_cpu_us_per_msg']:.0f}"
                    f" us/msg), {result['peak_rss_mb']:.1f} MB, process tree {result['peak_tree_rss_mb']:.1f} MB")
                runs[kind].append(result)
        out[f"c{concurrency}"] = summarize(runs, ("msgs_per_s", "cpu_us_per_msg", "peak_rss_mb", "peak_tree_rss_mb",
                                                  "cpu_share_of_one_core", "fauxqs_cpu_us_per_msg",
                                                  "sink_cpu_us_per_msg"))
    return out


def components(bench: Bench) -> dict[str, Any]:
    """CPU per receive, delete batch and POST measured alone: the floor under CPU per message."""
    s = bench.settings
    rounds = 50 if s.quick else 200
    runs: list[dict[str, Any]] = []
    for index in range(s.runs):
        name = unique("components")
        url = bench.sqs.create(name)
        bench.sqs.send_many(url, rounds * 10, "bulk")
        bench.sink.reset(0)
        done = subprocess.run([sys.executable, str(harness.BENCH / "components.py"), url, bench.sink.url,
                               str(rounds)], capture_output=True, text=True, timeout=300,
                              env=harness.worker_env(bench.fauxqs.url))
        bench.sqs.delete(url)
        if done.returncode != 0:
            raise RuntimeError(f"components.py failed: {done.stderr[-800:]}")
        result = json.loads(done.stdout.strip().splitlines()[-1])
        log(f"  components run {index + 1}: receive(10) {result['receive_10_us']:.0f} us, delete batch(10) "
            f"{result['delete_batch_10_us']:.0f} us, POST {result['post_us_at_50']:.0f} us "
            f"-> floor {result['floor_us_per_msg']:.0f} us/msg; POST via wire.http "
            f"{result['http_wire_post_us_at_50']:.0f} us")
        runs.append(result)
    keys = ("receive_10_us", "delete_batch_10_us", "post_us_at_50", "post_us_one_at_a_time",
            "http_wire_post_us_at_50", "greenlet_spawn_join_us", "floor_us_per_msg")
    return {key: spread([run[key] for run in runs]) for key in keys}


def slow_sink(bench: Bench) -> dict[str, Any]:
    """Sink answers after 20 ms (the target), and after 200 ms, where CPU cannot be the limit."""
    s = bench.settings
    concurrency = 50
    out: dict[str, Any] = {"concurrency": concurrency}
    for delay_ms, messages in ((s.slow_delay_ms, s.slow_messages), (200, s.slow_messages // 2)):
        ideal = concurrency / (delay_ms / 1000)
        runs: dict[str, list[dict[str, Any]]] = {"daemon": [], "baseline": []}
        for index in range(s.runs):
            for kind in ("daemon", "baseline"):
                result = bench.backlog_run(kind, f"slow{delay_ms}-{kind}-{index}", concurrency=concurrency,
                                          messages=messages, delay_ms=delay_ms)
                result["fraction_of_ideal"] = result["msgs_per_s"] / ideal
                held = result["sink_mean_held_ms"] or delay_ms
                result["fraction_of_ideal_at_measured_hold"] = result["msgs_per_s"] / (concurrency / (held / 1000))
                log(f"  slow sink {delay_ms} ms {kind} run {index + 1}: {result['msgs_per_s']:.0f} msg/s = "
                    f"{result['fraction_of_ideal']:.1%} of ideal {ideal:.0f}/s (sink held {held:.1f} ms; "
                    f"{result['cpu_us_per_msg']:.0f} us CPU/msg, {result['cpu_share_of_one_core']:.0%} of a core)")
                runs[kind].append(result)
        block = summarize(runs, ("msgs_per_s", "fraction_of_ideal", "fraction_of_ideal_at_measured_hold",
                                 "cpu_us_per_msg", "cpu_share_of_one_core", "peak_rss_mb", "sink_mean_held_ms",
                                 "sink_max_in_flight"))
        block.update(ideal_msgs_per_s=ideal, delay_ms=delay_ms, messages=messages)
        out[f"d{delay_ms}"] = block
    return out


def memory(bench: Bench) -> dict[str, Any]:
    s = bench.settings
    out = {}
    for concurrency, messages in s.memory_messages.items():
        runs: dict[str, list[dict[str, Any]]] = {"daemon": [], "baseline": []}
        for index in range(s.runs):
            for kind in ("daemon", "baseline"):
                # issue 22: the tree's peak while every slot is busy, against the same build idle (c=50 only)
                idle = (bench.idle_run(kind, f"mem-idle-{kind}-{index}", concurrency=concurrency)
                        if concurrency == 50 else None)
                result = bench.backlog_run(kind, f"mem-c{concurrency}-{kind}-{index}", concurrency=concurrency,
                                          messages=messages, delay_ms=s.memory_delay_ms,
                                          max_connections=concurrency)
                result["idle_tree_rss_mb"] = idle
                peak = result["peak_tree_rss_mb"]
                result["tree_peak_over_idle"] = peak / idle if peak and idle else None
                log(f"  memory c={concurrency} {kind} run {index + 1}: peak RSS {result['peak_rss_mb']:.1f} MB, "
                    f"process tree {peak or 0:.1f} MB" + (f" (idle {idle:.1f} MB)" if idle else "") +
                    f", {result['sink_max_in_flight']} in flight at the sink")
                runs[kind].append(result)
        out[f"c{concurrency}"] = summarize(runs, ("peak_rss_mb", "peak_tree_rss_mb", "idle_tree_rss_mb",
                                                  "tree_peak_over_idle", "sink_max_in_flight", "msgs_per_s"))
        out[f"c{concurrency}"]["messages"] = messages
    out["delay_ms"] = s.memory_delay_ms
    return out


def latency(bench: Bench) -> dict[str, Any]:
    """Backlog throughput at c=50 when every SQS answer takes 0, 10 and 30 ms longer (fauxqs's
    round-trip knob), daemon against the pipelined baseline, runs interleaved."""
    s = bench.settings
    concurrency, messages, rtts = s.latency_concurrency, s.latency_messages, s.latency_rtts_ms
    keys = ("msgs_per_s", "cpu_us_per_msg", "cpu_share_of_one_core", "peak_rss_mb", "sqs_requests_per_msg",
            "sqs_mean_added_ms", "left_in_queue", "fauxqs_cpu_us_per_msg", "sink_cpu_us_per_msg")
    runs: dict[int, dict[str, list[dict[str, Any]]]] = {rtt: {"daemon": [], "baseline": []} for rtt in rtts}
    try:
        if not s.quick:  # as in throughput: the first backlogs after fauxqs and the sink start run slower
            bench.fauxqs.set_delay(0)
            for kind in ("daemon", "baseline"):
                bench.backlog_run(kind, f"lat-{kind}-warmup", concurrency=concurrency,
                                 messages=min(5000, messages // 2), delay_ms=0)
        for index in range(s.runs):
            for rtt in rtts:
                for kind in ("daemon", "baseline"):
                    bench.fauxqs.set_delay(rtt)  # also resets its measure of the delay actually added
                    began = time.monotonic()
                    result = bench.backlog_run(kind, f"lat-rtt{rtt}-{kind}-{index}", concurrency=concurrency,
                                              messages=messages, delay_ms=0)
                    result["sqs_mean_added_ms"] = bench.fauxqs.stats()["mean_added_ms"] or 0.0
                    result["seconds_with_setup"] = time.monotonic() - began
                    log(f"  latency rtt={rtt}ms {kind} run {index + 1}: {result['msgs_per_s']:.0f} msg/s, "
                        f"{result['cpu_us_per_msg']:.0f} us CPU/msg ({result['cpu_share_of_one_core']:.0%} of a "
                        f"core), {result['peak_rss_mb']:.1f} MB, {result['sqs_requests_per_msg']:.3f} SQS "
                        f"requests/msg, round trip added {result['sqs_mean_added_ms']:.1f} ms, "
                        f"{result['left_in_queue']} left undeleted at exit "
                        f"({result['seconds_with_setup']:.0f} s with the backlog load)")
                    runs[rtt][kind].append(result)
    finally:
        bench.fauxqs.set_delay(bench.fauxqs.default_delay_ms)
    out: dict[str, Any] = {"concurrency": concurrency, "messages": messages, "rtts_ms": list(rtts),
                           "baseline": PIPELINED_BASELINE}
    for rtt in rtts:
        out[f"rtt{rtt}"] = summarize(runs[rtt], keys)
        out[f"rtt{rtt}"]["by_action_last_run"] = {kind: runs[rtt][kind][-1]["sqs_by_action"] for kind in
                                                  ("daemon", "baseline")}

    ratios: dict[str, Any] = {}
    for rtt in rtts[1:]:
        for kind in ("daemon", "baseline"):
            ratios[f"{kind}_rtt{rtt}_over_rtt0"] = paired(runs[rtt][kind], runs[0][kind], "msgs_per_s")
    for rtt in rtts:
        ratios[f"daemon_over_baseline_rtt{rtt}"] = paired(runs[rtt]["daemon"], runs[rtt]["baseline"], "msgs_per_s")
    out["ratios"] = ratios
    return out


# --only=NAME runs RUNNERS[NAME]; the default order of a full run is this order.
RUNNERS: dict[str, Callable[[Bench], dict[str, Any]]] = {
    "throughput": throughput, "components": components, "slow_sink": slow_sink,
    "requests": polling.requests, "idle": polling.idle, "wake": polling.wake, "memory": memory,
    "priority": polling.priority, "latency": latency, **scale.RUNNERS, **scale_targets.RUNNERS, **flow.RUNNERS, **fleet.RUNNERS,
    **fleet_limits.RUNNERS, **idempotency.RUNNERS, **tracing.RUNNERS, **redrive.RUNNERS, **batch.RUNNERS}
SCENARIOS = tuple(RUNNERS)
