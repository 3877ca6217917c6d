"""scale_wide of bench/run.py: c=1,000 on a slow app, the daemon alone (the targets are absolute), in two cases.

* 200 ms  (issue 30 item 3) the sink holds each POST 200 ms, 30,000 messages (5,000 with --quick) in one queue,
          `max_connections = 1000` (the HTTP target's default of 50 would cap the rate at 50 / 0.2 s = 250 msg/s).
          Target: >= 95 % of the ideal 1,000 / 0.2 s = 5,000 msg/s, process tree <= 80 MB. On a 2-core machine the
          daemon, fauxqs and the sink together need more than its cores at that rate (BENCHMARKS.md).
* 2 s     (issue 42 item 4) the same at a hold of 2 s, 15,000 messages (3,000 with --quick): an ideal of 500 msg/s,
          which this machine can drive; and, in the same run, c=50 (`max_connections = 50`) on the same app,
          1,000 messages (250 with --quick), ideal 25 msg/s. Targets: c=1,000 >= 95 % of 500 msg/s, tree <= 80 MB,
          CPU per message <= 1.5x c=50's (the ratio of the two drains of each run, then its median).

Each run drains the three cases in turn. The rate is over the whole drain (first arrival to last answer, ramp-up and
tail included) and in the steady state (arrivals between the 10th and the 90th percentile); the tree's peak RSS is
sampled every 10 ms; CPU per message and the share of a core of the daemon, fauxqs, the sink and this runner.
"""

from __future__ import annotations

import os
from typing import Any

from harness import log, paired, spread

TREE_MB = 80
# (key, concurrency, hold ms, messages, messages with --quick)
CASES = (("d200_c1000", 1000, 200, 30000, 5000), ("d2000_c1000", 1000, 2000, 15000, 3000),
         ("d2000_c50", 50, 2000, 1000, 250))
KEYS = ("msgs_per_s", "fraction_of_ideal", "steady_msgs_per_s", "steady_fraction_of_ideal", "ms_to_first_wave",
        "peak_tree_rss_mb", "peak_rss_mb", "cpu_share_of_one_core", "cpu_us_per_msg", "fauxqs_cpu_us_per_msg",
        "sink_cpu_us_per_msg", "runner_cpu_us_per_msg", "fauxqs_cpu_share", "sink_cpu_share", "runner_cpu_share",
        "sink_mean_held_ms", "sink_max_in_flight", "left_in_queue")


def drain(bench: Any, label: str, concurrency: int, delay_ms: int, messages: int) -> dict[str, Any]:
    ideal = concurrency / (delay_ms / 1000)
    result = bench.backlog_run("daemon", label, concurrency=concurrency, messages=messages, delay_ms=delay_ms,
                               max_connections=concurrency)
    times = sorted(t for t, _ in bench.sink.events())
    n = len(times)
    low, high = times[n // 10], times[(9 * n) // 10]
    result["steady_msgs_per_s"] = (9 * n // 10 - n // 10) / ((high - low) / 1000) if high > low else None
    result["ms_to_first_wave"] = times[min(n, concurrency) - 1] - times[0]
    result["fraction_of_ideal"] = result["msgs_per_s"] / ideal
    result["steady_fraction_of_ideal"] = (result["steady_msgs_per_s"] or 0) / ideal
    result["loadavg"] = list(os.getloadavg())
    log(f"  {label}: {result['msgs_per_s']:.1f} msg/s whole drain ({result['fraction_of_ideal']:.1%} of {ideal:.0f}), "
        f"steady {result['steady_msgs_per_s'] or 0:.1f} ({result['steady_fraction_of_ideal']:.1%}); "
        f"{concurrency}th arrival {result['ms_to_first_wave']:.0f} ms after the first; sink held "
        f"{result['sink_mean_held_ms'] or 0:.1f} ms, {result['sink_max_in_flight']} in flight; tree "
        f"{result['peak_tree_rss_mb'] or 0:.1f} MB; daemon {result['cpu_share_of_one_core'] or 0:.0%} of a core, "
        f"{result['cpu_us_per_msg']:.0f} us/msg (fauxqs {result['fauxqs_cpu_us_per_msg'] or 0:.0f}, sink "
        f"{result['sink_cpu_us_per_msg'] or 0:.0f}, runner {result['runner_cpu_us_per_msg'] or 0:.0f} us/msg; shares of a core "
        f"{result['fauxqs_cpu_share'] or 0:.0%}, {result['sink_cpu_share'] or 0:.0%}, {result['runner_cpu_share'] or 0:.0%}); "
        f"load {result['loadavg'][0]:.1f}")
    return result


def wide(bench: Any) -> dict[str, Any]:
    s = bench.settings
    runs: dict[str, list[dict[str, Any]]] = {key: [] for key, *_ in CASES}
    for index in range(s.runs):
        for key, concurrency, delay_ms, messages, quick_messages in CASES:
            runs[key].append(drain(bench, f"wide-{key}-{index}", concurrency, delay_ms,
                                   quick_messages if s.quick else messages))
    out: dict[str, Any] = {}
    for key, concurrency, delay_ms, messages, quick_messages in CASES:
        block: dict[str, Any] = {name: spread([r.get(name) for r in runs[key]]) for name in KEYS}
        block.update(messages=quick_messages if s.quick else messages, concurrency=concurrency, delay_ms=delay_ms,
                     ideal_msgs_per_s=concurrency / (delay_ms / 1000), loadavg=[r["loadavg"] for r in runs[key]])
        out[key] = block
    out["d2000_cpu_ratio_c1000_to_c50"] = paired(runs["d2000_c1000"], runs["d2000_c50"], "cpu_us_per_msg")
    return out


def target_checks(scenario: dict[str, Any]) -> list[tuple[str, Any, str, bool | None]]:
    checks: list[tuple[str, Any, str, bool | None]] = []
    if "scale_wide" not in scenario:
        return checks
    block = scenario["scale_wide"]

    def check(name: str, value: Any, limit: str, ok: bool) -> None:
        checks.append((name, value, limit, None if value is None else ok))

    for key in ("d200_c1000", "d2000_c1000"):
        case = block[key]
        value = case["fraction_of_ideal"]["median"]
        check(f"scale_wide: c=1000, {case['delay_ms']} ms app, msgs/s / ideal {case['ideal_msgs_per_s']:.0f} "
              "(median, whole drain)", value, ">= 0.95", value is not None and value >= 0.95)
        value = case["peak_tree_rss_mb"]["max"]
        check(f"scale_wide: c=1000, {case['delay_ms']} ms app, process tree peak RSS (worst run)", value,
              f"<= {TREE_MB} MB", value is not None and value <= TREE_MB)
    value = block["d2000_cpu_ratio_c1000_to_c50"]["median"]
    check("scale_wide: 2 s app, CPU/msg c=1000 / c=50 (paired in each run, median)", value, "<= 1.5",
          value is not None and value <= 1.5)
    return checks


def table_rows(scenario: dict[str, Any], cell: Any, ratio_text: Any) -> list[tuple[str, str, str, str]]:
    if "scale_wide" not in scenario:
        return []
    rows: list[tuple[str, str, str, str]] = []
    block = scenario["scale_wide"]
    for key, *_ in CASES:
        b = block[key]
        what = f"scale_wide c={b['concurrency']}, {b['delay_ms']} ms app ({b['messages']} msgs)"
        rows += [(f"{what}: msgs/s (ideal {b['ideal_msgs_per_s']:.0f})", cell(b["msgs_per_s"], 1), "", ""),
                 ("  fraction of ideal, whole drain / steady", f"{cell(b['fraction_of_ideal'], 3)} / "
                  f"{cell(b['steady_fraction_of_ideal'], 3)}", "", ""),
                 ("  daemon CPU us/msg", cell(b["cpu_us_per_msg"], 0), "", ""),
                 ("  process tree peak RSS MB", cell(b["peak_tree_rss_mb"]), "", "")]
    rows.append(("scale_wide 2 s app: CPU/msg c=1000 / c=50 (paired)", cell(block["d2000_cpu_ratio_c1000_to_c50"], 2),
                 "", ""))
    return rows
