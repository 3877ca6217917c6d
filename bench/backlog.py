"""The backlog scenarios: a queue loaded, drained by the daemon and by the plain baseline (bench/baseline.py) in
turns; rate, CPU and memory: throughput, components, slow_sink, memory (latency: latency.py)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from typing import Any

import harness
import processes
from figures import compare, drain_text, middle_rate, spread
from scenario import Block, Check, Row, Scenario, alone, check, compared, interleave

SIDES = ("daemon", "baseline")

def warm_up(bench: Any, label: str, concurrency: int, messages: int) -> None:
    """One unmeasured drain of each side: the first backlogs after fauxqs and the sink start (node's JIT, fresh
    queues) ran up to a third slower for whichever side came first."""
    if not bench.settings.quick:
        for kind in SIDES:
            bench.backlog_run(kind, f"{label}-{kind}-warmup", concurrency=concurrency, messages=messages, delay_ms=0)


def sides(bench: Any, label: str, say: str, **shape: Any) -> dict[str, list[dict[str, Any]]]:
    """The daemon and the baseline draining the same backlog, run by run."""
    return interleave(bench.settings.runs, SIDES,
                      lambda kind, i: bench.backlog_run(kind, f"{label}-{kind}-{i}", **shape),
                      lambda kind, i, r: f"{say} {kind} run {i + 1}: {drain_text(r)}")


def steady_drain(bench: Any, label: str, ideal: float, **shape: Any) -> tuple[dict[str, Any], list[float]]:
    """A daemon's backlog run with its rate as a share of `ideal`, over the whole drain (first arrival to last
    answer) and in the steady state (arrivals between the 10th and the 90th percentile); the arrivals."""
    result = bench.backlog_run("daemon", label, **shape)
    times = sorted(t for t, _ in bench.sink.events())
    result["steady_msgs_per_s"] = middle_rate(times)
    result["fraction_of_ideal"] = result["msgs_per_s"] / ideal
    result["steady_fraction_of_ideal"] = (result["steady_msgs_per_s"] or 0) / ideal
    result["loadavg"] = list(os.getloadavg())
    return result, times


# ---------------------------------------------------------------- throughput


def throughput(bench: Any) -> Block:
    s, out = bench.settings, {}
    for c in (10, 50):
        warm_up(bench, f"tp-c{c}", c, s.throughput_messages // 2)
        runs = sides(bench, f"tp-c{c}", f"throughput c={c}", concurrency=c, messages=s.throughput_messages,
                     delay_ms=0)
        out[f"c{c}"] = compare(runs, ("msgs_per_s", "cpu_us_per_msg", "peak_rss_mb", "peak_tree_rss_mb",
                                      "cpu_share_of_one_core", "fauxqs_cpu_us_per_msg", "sink_cpu_us_per_msg"))
    return out


def throughput_rows(block: Block) -> list[Row]:
    return [compared(f"throughput c={c}: {text}", block[f"c{c}"], key, digits) for c in (10, 50)
            for key, text, digits in (("msgs_per_s", "msgs/s", 0), ("cpu_us_per_msg", "CPU us/msg", 0),
                                      ("peak_rss_mb", "peak RSS MB", 1),
                                      ("peak_tree_rss_mb", "peak RSS of the process tree MB", 1))]


def throughput_checks(block: Block) -> list[Check]:
    value = block["c50"].get("ratio_daemon_to_baseline", {}).get("msgs_per_s")
    return [check("throughput c=50 vs plain baseline", value, ">= 3x", lambda v: v >= 3)] + [
        check(f"daemon CPU per message, c={c}", block[f"c{c}"]["daemon"]["cpu_us_per_msg"]["median"], "<= 250 us",
              lambda v: v <= 250) for c in (10, 50)]


# ---------------------------------------------------------------- components

COMPONENTS = (("receive_10_us", "part: ReceiveMessage(10) CPU us"),
              ("delete_batch_10_us", "part: DeleteMessageBatch(10) CPU us"),
              ("post_us_at_50", "part: one POST CPU us (50 at a time)"), ("post_us_one_at_a_time", None),
              ("http_wire_post_us_at_50", "part: one POST via wire.http CPU us (50 at a time)"),
              ("greenlet_spawn_join_us", None), ("floor_us_per_msg", "floor: POST + (receive+delete)/10"))


def components(bench: Any) -> Block:
    """CPU per receive, delete batch and POST measured alone (bench/components.py): the floor under CPU per message."""
    rounds = 50 if bench.settings.quick else 200

    def one(_: str, index: int) -> dict[str, Any]:
        name, url = bench.backlog("components", rounds * 10)
        done = subprocess.run([sys.executable, str(harness.BENCH / "components.py"), url, bench.sink.url, str(rounds)],
                              capture_output=True, text=True, timeout=300, env=processes.worker_env(bench.fauxqs.url))
        bench.sqs.delete(url)
        if done.returncode != 0:
            raise RuntimeError(f"components.py failed: {done.stderr[-800:]}")
        return json.loads(done.stdout.strip().splitlines()[-1])

    runs = interleave(bench.settings.runs, ["parts"], one, lambda _, i, r: (
        f"components run {i + 1}: receive(10) {r['receive_10_us']:.0f} us, delete batch(10) "
        f"{r['delete_batch_10_us']:.0f} us, POST {r['post_us_at_50']:.0f} us -> floor {r['floor_us_per_msg']:.0f} "
        f"us/msg; POST via wire.http {r['http_wire_post_us_at_50']:.0f} us"))["parts"]
    return {key: spread(run[key] for run in runs) for key, _ in COMPONENTS}


def components_rows(block: Block) -> list[Row]:
    return [alone(label, block[key], 0) for key, label in COMPONENTS if label and key in block]


# ---------------------------------------------------------------- slow_sink


def slow_sink(bench: Any) -> Block:
    """Sink answers after 20 ms (the target), and after 200 ms, where CPU cannot be the limit."""
    s, c = bench.settings, 50
    out: Block = {"concurrency": c}
    for delay_ms, messages in ((s.slow_delay_ms, s.slow_messages), (200, s.slow_messages // 2)):
        ideal = c / (delay_ms / 1000)
        runs = sides(bench, f"slow{delay_ms}", f"slow sink {delay_ms} ms", concurrency=c, messages=messages,
                     delay_ms=delay_ms)
        for result in (r for side in runs.values() for r in side):
            held = result["sink_mean_held_ms"] or delay_ms
            result["fraction_of_ideal"] = result["msgs_per_s"] / ideal
            result["fraction_of_ideal_at_measured_hold"] = result["msgs_per_s"] / (c / (held / 1000))
        block = compare(runs, ("msgs_per_s", "fraction_of_ideal", "fraction_of_ideal_at_measured_hold",
                               "cpu_us_per_msg", "cpu_share_of_one_core", "peak_rss_mb", "sink_mean_held_ms",
                               "sink_max_in_flight"))
        out[f"d{delay_ms}"] = {**block, "ideal_msgs_per_s": ideal, "delay_ms": delay_ms, "messages": messages}
    return out


def slow_sink_rows(block: Block) -> list[Row]:
    return [compared(f"slow sink {d}ms{text}", block[f"d{d}"], key, digits) for d in (20, 200)
            for key, text, digits in (("msgs_per_s", " c=50: msgs/s", 0), ("fraction_of_ideal", " c=50: fraction of "
                                      "ideal", 3), ("cpu_share_of_one_core", ": CPU share of one core", 2))]


def slow_sink_checks(block: Block) -> list[Check]:
    return [check("slow sink 20 ms, c=50: fraction of ideal", block["d20"]["daemon"]["fraction_of_ideal"]["median"],
                  ">= 0.90", lambda v: v >= 0.90)]


# ---------------------------------------------------------------- memory


def memory(bench: Any) -> Block:
    s, out = bench.settings, {}
    for c, messages in s.memory_messages.items():
        def one(kind: str, i: int) -> dict[str, Any]:
            # issue 22: the tree's peak while every slot is busy, against the same build idle (c=50 only)
            idle = bench.idle_run(kind, f"mem-idle-{kind}-{i}", concurrency=c) if c == 50 else None
            result = bench.backlog_run(kind, f"mem-c{c}-{kind}-{i}", concurrency=c, messages=messages,
                                       delay_ms=s.memory_delay_ms, max_connections=c)
            peak = result["peak_tree_rss_mb"]
            return {**result, "idle_tree_rss_mb": idle, "tree_peak_over_idle": peak / idle if peak and idle else None}

        def say(kind: str, i: int, r: dict[str, Any]) -> str:
            idle = f" (idle {r['idle_tree_rss_mb']:.1f} MB)" if r["idle_tree_rss_mb"] else ""
            return (f"memory c={c} {kind} run {i + 1}: peak RSS {r['peak_rss_mb']:.1f} MB, process tree "
                    f"{r['peak_tree_rss_mb'] or 0:.1f} MB{idle}, {r['sink_max_in_flight']} in flight at the sink")

        runs = interleave(s.runs, SIDES, one, say)
        out[f"c{c}"] = {**compare(runs, ("peak_rss_mb", "peak_tree_rss_mb", "idle_tree_rss_mb", "tree_peak_over_idle",
                                         "sink_max_in_flight", "msgs_per_s")), "messages": messages}
    out["delay_ms"] = s.memory_delay_ms
    return out


def memory_rows(block: Block) -> list[Row]:
    rows = []
    for c in (c for c in (50, 500, 1000) if f"c{c}" in block):
        case = block[f"c{c}"]
        rows += [compared(f"peak RSS MB c={c} (sink {block['delay_ms']}ms)", case, "peak_rss_mb"),
                 compared(f"  process tree (daemon and children): peak RSS MB, c={c}", case, "peak_tree_rss_mb")]
        if c == 50:
            rows += [compared("  process tree idle, RSS MB, c=50", case, "idle_tree_rss_mb"),
                     compared("  process tree peak / idle, c=50", case, "tree_peak_over_idle", 2)]
        rows.append(compared(f"  in flight at the sink, c={c}", case, "sink_max_in_flight", 0))
    return rows


def memory_checks(block: Block) -> list[Check]:
    # issue 6: 60 MB at c=50, 80 at c=500; the scale issue: 40 at c=50, 60 at c=1000; issue 22: the whole tree
    checks = [check(f"peak RSS under load, c={c} (worst run; {issue} target)", block[f"c{c}"]["daemon"]["peak_rss_mb"]
                    ["max"], f"<= {limit} MB", lambda v, m=limit: v <= m)
              for c, limit, issue in ((50, 60, "issue 6"), (500, 80, "issue 6"), (50, 40, "scale"), (1000, 60, "scale"))
              if f"c{c}" in block]
    if "c50" in block:
        daemon = block["c50"]["daemon"]
        checks += [check("process tree peak RSS, c=50 (worst run; issue 22)", daemon["peak_tree_rss_mb"]["max"],
                         "<= 40 MB", lambda v: v <= 40),
                   check("process tree peak / idle RSS, c=50 (worst run; issue 22)",
                         daemon["tree_peak_over_idle"]["max"], "<= 1.25", lambda v: v <= 1.25)]
    return checks


SCENARIOS = (Scenario("throughput", throughput, throughput_rows, throughput_checks),
             Scenario("components", components, components_rows),
             Scenario("slow_sink", slow_sink, slow_sink_rows, slow_sink_checks),
             Scenario("memory", memory, memory_rows, memory_checks))
