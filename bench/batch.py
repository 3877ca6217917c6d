"""batch (issue 42): an HTTP target with `batch_size = 10` against `batch_size = 1`, the daemon alone, on an app
(bench/sink.mjs) that holds each POST 100 ms at concurrency 50: ideals 5,000 and 500 msg/s, drained in turn."""

from __future__ import annotations

from typing import Any

from backlog import steady_drain
from figures import cell, paired, spreads
from scenario import Block, Check, Row, Scenario, alone, check, interleave

CONCURRENCY = 50
HOLD_MS = 100
SIZES = {1: (5000, 1000), 10: (30000, 5000)}  # batch_size -> (messages, messages with --quick)
KEYS = ("msgs_per_s", "fraction_of_ideal", "fraction_of_ideal_at_measured_hold", "steady_msgs_per_s",
        "steady_fraction_of_ideal", "cpu_us_per_msg", "cpu_share_of_one_core", "fauxqs_cpu_us_per_msg",
        "sink_cpu_us_per_msg", "runner_cpu_us_per_msg", "fauxqs_cpu_share", "sink_cpu_share", "runner_cpu_share",
        "messages_per_post", "sink_mean_held_ms", "sink_max_in_flight", "peak_tree_rss_mb", "sqs_requests_per_msg",
        "left_in_queue")


def ideal(size: int, hold_ms: float = HOLD_MS) -> float:
    return CONCURRENCY * size / (hold_ms / 1000)


def drain(bench: Any, label: str, size: int, messages: int) -> dict[str, Any]:
    result, _ = steady_drain(bench, label, ideal(size), concurrency=CONCURRENCY, messages=messages, delay_ms=HOLD_MS,
                             target_keys={"batch_size": size})
    result["fraction_of_ideal_at_measured_hold"] = result["msgs_per_s"] / ideal(size, result["sink_mean_held_ms"]
                                                                                 or HOLD_MS)
    result["messages_per_post"] = result["messages"] / result["sink_posts"] if result.get("sink_posts") else None
    return result


def batch(bench: Any) -> Block:
    quick = bench.settings.quick
    if not quick:  # as in throughput: the first backlogs after fauxqs and the sink start run slower
        for size, (_, quick_messages) in SIZES.items():
            drain(bench, f"batch{size}-warmup", size, quick_messages)
    runs = interleave(bench.settings.runs, SIZES, lambda size, i: drain(
        bench, f"batch{size}-{i}", size, SIZES[size][quick]), lambda size, i, r: (
        f"batch{size}-{i}: {r['msgs_per_s']:.0f} msg/s ({r['fraction_of_ideal']:.1%} of {ideal(size):.0f}; steady "
        f"{r['steady_fraction_of_ideal']:.1%}), {r['messages_per_post'] or 0:.2f} msgs/POST, app held "
        f"{r['sink_mean_held_ms'] or 0:.1f} ms; daemon {r['cpu_us_per_msg']:.0f} us/msg; shares of a core: fauxqs "
        f"{r['fauxqs_cpu_share'] or 0:.0%}, sink {r['sink_cpu_share'] or 0:.0%}, runner {r['runner_cpu_share'] or 0:.0%}"
        f"; load {r['loadavg'][0]:.1f}"))
    out: Block = {"concurrency": CONCURRENCY, "hold_ms": HOLD_MS}
    for size, counts in SIZES.items():
        out[f"b{size}"] = {**spreads(runs[size], KEYS), "messages": counts[quick], "ideal_msgs_per_s": ideal(size),
                           "loadavg": [r["loadavg"] for r in runs[size]]}
    out["cpu_ratio_b10_to_b1"] = paired(runs[10], runs[1], "cpu_us_per_msg")
    out["rate_ratio_b10_to_b1"] = paired(runs[10], runs[1], "msgs_per_s")
    return out


def checks(block: Block) -> list[Check]:
    return [check(f"batch: 100 ms app, c={CONCURRENCY}, batch_size 10: msgs/s / ideal {ideal(10):.0f} (median, whole "
                  "drain)", block["b10"]["fraction_of_ideal"]["median"], ">= 0.90", lambda v: v >= 0.90),
            check("batch: CPU/msg batch_size 10 / batch_size 1 (paired in each run, median)",
                  block["cpu_ratio_b10_to_b1"]["median"], "<= 0.5", lambda v: v <= 0.5)]


def rows(block: Block) -> list[Row]:
    return [(f"batch scenario, 100 ms app, c={CONCURRENCY}: columns are batch_size 10 | batch_size 1", "", "", ""),
            *((f"  {label}", cell(block["b10"][key], digits), cell(block["b1"][key], digits), "") for key, label, digits
              in (("msgs_per_s", "msgs/s", 0), ("fraction_of_ideal", "fraction of ideal", 3),
                  ("cpu_us_per_msg", "daemon CPU us/msg", 0), ("messages_per_post", "msgs per POST", 2),
                  ("sink_cpu_share", "sink's share of a core", 2), ("fauxqs_cpu_share", "fauxqs's share of a core", 2),
                  ("runner_cpu_share", "runner's share of a core", 2))),
            alone("  CPU/msg batch 10 / batch 1 (paired)", block["cpu_ratio_b10_to_b1"], 2)]


SCENARIOS = (Scenario("batch", batch, rows, checks),)
