"""The batch scenario of bench/run.py (issue 42): an HTTP target with `batch_size = 10` against `batch_size = 1`.

The app (bench/sink.mjs) holds each POST 100 ms, whatever it carries, and answers a batch POST 200 with an empty
body (every record succeeded). Concurrency 50 (`max_connections` 50, the default): with one message a POST the
daemon is bound to 50 / 0.1 s = 500 msg/s; with 10 a POST (polling `batch_size` 10, `max_batching_window` 0: one
receive fills one POST) the ideal is 5,000 msg/s. The daemon only; both sizes drained in turn in each run (one
unmeasured drain of each first), 5,000 messages at batch 1 and 30,000 at batch 10 (1,000 and 5,000 with --quick),
so each drain lasts several seconds at its ideal. Figures: the rate over the whole drain (first arrival to last
answer) and in the steady state (arrivals between the 10th and 90th percentile), CPU per message of the daemon
and the share of a core of the daemon, fauxqs, the sink and this runner (none of the helpers should be near a
whole core), POSTs and messages per POST, the app's mean hold and POSTs in flight.
Targets: batch 10 >= 90 % of 5,000 msg/s; CPU per message at batch 10 <= 0.5x batch 1's (paired in each run).
"""

from __future__ import annotations

import os
from typing import Any

from harness import log, paired, spread

CONCURRENCY = 50
HOLD_MS = 100
# batch_size -> (messages, messages with --quick)
SIZES = {1: (5000, 1000), 10: (30000, 5000)}
KEYS = ("msgs_per_s", "fraction_of_ideal", "fraction_of_ideal_at_measured_hold", "steady_msgs_per_s",
        "steady_fraction_of_ideal", "cpu_us_per_msg", "cpu_share_of_one_core", "fauxqs_cpu_us_per_msg",
        "sink_cpu_us_per_msg", "runner_cpu_us_per_msg", "fauxqs_cpu_share", "sink_cpu_share", "runner_cpu_share",
        "messages_per_post", "sink_mean_held_ms", "sink_max_in_flight", "peak_tree_rss_mb", "sqs_requests_per_msg",
        "left_in_queue")


def ideal(size: int) -> float:
    return CONCURRENCY * size / (HOLD_MS / 1000)


def drain(bench: Any, label: str, size: int, messages: int) -> dict[str, Any]:
    result = bench.backlog_run("daemon", label, concurrency=CONCURRENCY, messages=messages, delay_ms=HOLD_MS,
                               target_keys={"batch_size": size})
    times = sorted(t for t, _ in bench.sink.events())
    n = len(times)
    low, high = times[n // 10], times[(9 * n) // 10]
    result["steady_msgs_per_s"] = (9 * n // 10 - n // 10) / ((high - low) / 1000) if high > low else None
    result["fraction_of_ideal"] = result["msgs_per_s"] / ideal(size)
    result["steady_fraction_of_ideal"] = (result["steady_msgs_per_s"] or 0) / ideal(size)
    held = result["sink_mean_held_ms"] or HOLD_MS
    result["fraction_of_ideal_at_measured_hold"] = result["msgs_per_s"] / (CONCURRENCY * size / (held / 1000))
    result["messages_per_post"] = result["messages"] / result["sink_posts"] if result.get("sink_posts") else None
    result["loadavg"] = list(os.getloadavg())
    return result


def describe(label: str, size: int, r: dict[str, Any]) -> str:
    def f(key: str) -> float:
        return float(r.get(key) or 0)

    return (f"  {label}: {f('msgs_per_s'):.0f} msg/s ({f('fraction_of_ideal'):.1%} of {ideal(size):.0f}; steady "
            f"{f('steady_fraction_of_ideal'):.1%}), {f('messages_per_post'):.2f} msgs/POST, app held "
            f"{f('sink_mean_held_ms'):.1f} ms, {r['sink_max_in_flight']} POSTs in flight; daemon {f('cpu_us_per_msg'):.0f}"
            f" us/msg, {f('cpu_share_of_one_core'):.0%} of a core; fauxqs {f('fauxqs_cpu_share'):.0%}, sink "
            f"{f('sink_cpu_share'):.0%}, runner {f('runner_cpu_share'):.0%} of a core; tree "
            f"{f('peak_tree_rss_mb'):.1f} MB; load {r['loadavg'][0]:.1f}")


def batch(bench: Any) -> dict[str, Any]:
    s = bench.settings
    runs: dict[int, list[dict[str, Any]]] = {size: [] for size in SIZES}
    if not s.quick:  # as in throughput: the first backlogs after fauxqs and the sink start run slower
        for size, (messages, quick_messages) in SIZES.items():
            drain(bench, f"batch{size}-warmup", size, quick_messages)
    for index in range(s.runs):
        for size, (messages, quick_messages) in SIZES.items():
            label = f"batch{size}-{index}"
            result = drain(bench, label, size, quick_messages if s.quick else messages)
            log(describe(label, size, result))
            runs[size].append(result)
    out: dict[str, Any] = {"concurrency": CONCURRENCY, "hold_ms": HOLD_MS}
    for size, (messages, quick_messages) in SIZES.items():
        block: dict[str, Any] = {key: spread([r.get(key) for r in runs[size]]) for key in KEYS}
        block.update(messages=quick_messages if s.quick else messages, ideal_msgs_per_s=ideal(size),
                     loadavg=[r["loadavg"] for r in runs[size]])
        out[f"b{size}"] = block
    out["cpu_ratio_b10_to_b1"] = paired(runs[10], runs[1], "cpu_us_per_msg")
    out["rate_ratio_b10_to_b1"] = paired(runs[10], runs[1], "msgs_per_s")
    return out


RUNNERS = {"batch": batch}


def target_checks(scenario: dict[str, Any]) -> list[tuple[str, Any, str, bool | None]]:
    if "batch" not in scenario:
        return []
    block = scenario["batch"]
    rate = block["b10"]["fraction_of_ideal"]["median"]
    ratio = block["cpu_ratio_b10_to_b1"]["median"]
    return [(f"batch: 100 ms app, c={CONCURRENCY}, batch_size 10: msgs/s / ideal {ideal(10):.0f} (median, whole drain)",
             rate, ">= 0.90", None if rate is None else rate >= 0.90),
            ("batch: CPU/msg batch_size 10 / batch_size 1 (paired in each run, median)", ratio, "<= 0.5",
             None if ratio is None else ratio <= 0.5)]


def table_rows(scenario: dict[str, Any], cell: Any, ratio_text: Any) -> list[tuple[str, str, str, str]]:
    if "batch" not in scenario:
        return []
    block = scenario["batch"]
    rows = [(f"batch scenario, 100 ms app, c={CONCURRENCY}: columns are batch_size 10 | batch_size 1", "", "", "")]
    for key, label, digits in (("msgs_per_s", "msgs/s", 0), ("fraction_of_ideal", "fraction of ideal", 3),
                               ("cpu_us_per_msg", "daemon CPU us/msg", 0), ("messages_per_post", "msgs per POST", 2),
                               ("sink_cpu_share", "sink's share of a core", 2),
                               ("fauxqs_cpu_share", "fauxqs's share of a core", 2),
                               ("runner_cpu_share", "runner's share of a core", 2)):
        rows.append((f"  {label}", cell(block["b10"][key], digits), cell(block["b1"][key], digits), ""))
    rows.append(("  CPU/msg batch 10 / batch 1 (paired)", cell(block["cpu_ratio_b10_to_b1"], 2), "", ""))
    return rows
