"""scale_wide: c=1,000 on a slow app, the daemon alone (the targets are absolute): a 200 ms app (issue 30), and a 2 s
app beside c=50 on the same app (issue 42), the three drained in turn in each run."""

from __future__ import annotations

from typing import Any

from backlog import steady_drain
from figures import cell, paired, spreads
from scenario import Block, Check, Row, Scenario, alone, check, interleave

TREE_MB = 80
# key -> (concurrency, hold ms, messages, messages with --quick)
CASES = {"d200_c1000": (1000, 200, 30000, 5000), "d2000_c1000": (1000, 2000, 15000, 3000),
         "d2000_c50": (50, 2000, 1000, 250)}
KEYS = ("msgs_per_s", "fraction_of_ideal", "steady_msgs_per_s", "steady_fraction_of_ideal", "ms_to_first_wave",
        "peak_tree_rss_mb", "peak_rss_mb", "cpu_share_of_one_core", "cpu_us_per_msg", "fauxqs_cpu_us_per_msg",
        "sink_cpu_us_per_msg", "runner_cpu_us_per_msg", "fauxqs_cpu_share", "sink_cpu_share", "runner_cpu_share",
        "sink_mean_held_ms", "sink_max_in_flight", "left_in_queue")


def wide(bench: Any) -> Block:
    quick = bench.settings.quick

    def one(key: str, i: int) -> dict[str, Any]:
        c, hold_ms, messages, quick_messages = CASES[key]
        result, times = steady_drain(bench, f"wide-{key}-{i}", c / (hold_ms / 1000), concurrency=c,
                                     messages=quick_messages if quick else messages, delay_ms=hold_ms,
                                     max_connections=c)
        return {**result, "ms_to_first_wave": times[min(len(times), c) - 1] - times[0]}

    runs = interleave(bench.settings.runs, CASES, one, lambda key, i, r: (
        f"wide-{key}-{i}: {r['msgs_per_s']:.1f} msg/s ({r['fraction_of_ideal']:.1%} of ideal; steady "
        f"{r['steady_fraction_of_ideal']:.1%}); first wave {r['ms_to_first_wave']:.0f} ms; tree "
        f"{r['peak_tree_rss_mb'] or 0:.1f} MB; daemon {r['cpu_us_per_msg']:.0f} us/msg, shares of a core: fauxqs "
        f"{r['fauxqs_cpu_share'] or 0:.0%}, sink {r['sink_cpu_share'] or 0:.0%}, runner {r['runner_cpu_share'] or 0:.0%}"
        f"; load {r['loadavg'][0]:.1f}"))
    out: Block = {key: {**spreads(runs[key], KEYS), "messages": quick_messages if quick else messages,
                        "concurrency": c, "delay_ms": hold_ms, "ideal_msgs_per_s": c / (hold_ms / 1000),
                        "loadavg": [r["loadavg"] for r in runs[key]]}
                  for key, (c, hold_ms, messages, quick_messages) in CASES.items()}
    out["d2000_cpu_ratio_c1000_to_c50"] = paired(runs["d2000_c1000"], runs["d2000_c50"], "cpu_us_per_msg")
    return out


def checks(block: Block) -> list[Check]:
    out = []
    for key in ("d200_c1000", "d2000_c1000"):
        case = block[key]
        out += [check(f"scale_wide: c=1000, {case['delay_ms']} ms app, msgs/s / ideal {case['ideal_msgs_per_s']:.0f} "
                      "(median, whole drain)", case["fraction_of_ideal"]["median"], ">= 0.95", lambda v: v >= 0.95),
                check(f"scale_wide: c=1000, {case['delay_ms']} ms app, process tree peak RSS (worst run)",
                      case["peak_tree_rss_mb"]["max"], f"<= {TREE_MB} MB", lambda v: v <= TREE_MB)]
    return out + [check("scale_wide: 2 s app, CPU/msg c=1000 / c=50 (paired in each run, median)",
                        block["d2000_cpu_ratio_c1000_to_c50"]["median"], "<= 1.5", lambda v: v <= 1.5)]


def rows(block: Block) -> list[Row]:
    out = []
    for key in CASES:
        b = block[key]
        out += [alone(f"scale_wide c={b['concurrency']}, {b['delay_ms']} ms app ({b['messages']} msgs): msgs/s (ideal "
                      f"{b['ideal_msgs_per_s']:.0f})", b["msgs_per_s"]),
                alone("  fraction of ideal, whole drain / steady",
                      f"{cell(b['fraction_of_ideal'], 3)} / {cell(b['steady_fraction_of_ideal'], 3)}"),
                alone("  daemon CPU us/msg", b["cpu_us_per_msg"], 0),
                alone("  process tree peak RSS MB", b["peak_tree_rss_mb"])]
    return out + [alone("scale_wide 2 s app: CPU/msg c=1000 / c=50 (paired)", block["d2000_cpu_ratio_c1000_to_c50"], 2)]


SCENARIOS = (Scenario("scale_wide", wide, rows, checks),)
