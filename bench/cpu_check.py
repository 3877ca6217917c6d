#!/usr/bin/env python3
"""The quick guard on the hot path's CPU: a minute or two, not part of CI's pass/fail (BENCHMARKS.md).

    python bench/cpu_check.py                        this checkout, 0 and 10 ms round trip
    python bench/cpu_check.py --vs=/other/checkout   the same drains, interleaved, beside another checkout

Each run drains --messages at concurrency 50, as the throughput scenario does; it prints the median CPU per message,
its ratio to REFERENCE_US and, with --vs, to the other checkout measured in this run (the figure to trust on a shared
machine). Update REFERENCE_US (with the commit and the machine) when a change to the hot path lands.
"""

from __future__ import annotations

import argparse
import statistics
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import harness  # noqa: E402
from harness import log  # noqa: E402
from session import Bench, Settings  # noqa: E402

# CPU per message of this checkout's daemon, median of 3 runs, recorded by this script on the 2-core
# development machine (a shared one: read the ratio, not the figure), round trip in ms -> microseconds.
REFERENCE_US = {0: 98.0, 10: 96.0}
REFERENCE_OF = "ecb6951, median of 5, 2026-11-26; BENCHMARKS.md, 'Regression guards'"


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--vs", help="another checkout (its bin/workerless runs beside this one's)")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--messages", type=int, default=5000)
    parser.add_argument("--rtts", default="0,10", help="SQS round trips in ms, comma-separated")
    return parser.parse_args()


def drain(bench: Bench, daemon_bin: Path, label: str, rtt: int, messages: int) -> dict[str, Any]:
    harness.use_daemon_bin(daemon_bin)
    bench.fauxqs.set_delay(rtt)
    return bench.backlog_run("daemon", label, concurrency=50, messages=messages, delay_ms=0)


def main() -> int:
    args = parse_args()
    bins = harness.checkouts(args.vs)
    rtts = [int(rtt) for rtt in args.rtts.split(",")]
    bench = Bench(Settings(quick=True, runs=args.runs))
    figures: dict[tuple[str, int], list[dict[str, Any]]] = {}
    try:
        for name, daemon_bin in bins.items():  # one unmeasured drain each: node's JIT, fresh queues
            drain(bench, daemon_bin, f"cpu-{name}-warmup", 0, args.messages // 2)
        for index in range(args.runs):
            for rtt in rtts:
                for name, daemon_bin in bins.items():
                    result = drain(bench, daemon_bin, f"cpu-{name}-rtt{rtt}-{index}", rtt, args.messages)
                    log(f"  {name} rtt={rtt}ms run {index + 1}: {result['cpu_us_per_msg']:.0f} us CPU/msg, "
                        f"{result['msgs_per_s']:.0f} msg/s, {result['sqs_requests_per_msg']:.3f} SQS requests/msg "
                        f"{result['sqs_by_action']}, peak RSS {result['peak_rss_mb']:.1f} MB "
                        f"(process tree {result['peak_tree_rss_mb'] or 0:.1f} MB)")
                    figures.setdefault((name, rtt), []).append(result)
    finally:
        bench.fauxqs.set_delay(bench.fauxqs.default_delay_ms)
        bench.close()
    report(figures, bins, rtts)
    return 0


def median(results: list[dict[str, Any]], key: str) -> float:
    return float(statistics.median(result[key] for result in results))


def report(figures: dict[tuple[str, int], list[dict[str, Any]]], bins: dict[str, Path], rtts: list[int]) -> None:
    print(f"CPU per message, concurrency 50, median of {len(figures[('this', rtts[0])])} drains "
          f"(reference: {REFERENCE_OF})")
    for rtt in rtts:
        cpu = median(figures[("this", rtt)], "cpu_us_per_msg")
        rate = median(figures[("this", rtt)], "msgs_per_s")
        line = f"  rtt {rtt:>2} ms: {cpu:6.0f} us/msg, {rate:6.0f} msg/s"
        if rtt in REFERENCE_US:
            line += f", {cpu / REFERENCE_US[rtt]:.2f}x the reference"
        if "vs" in bins:
            other_cpu = median(figures[("vs", rtt)], "cpu_us_per_msg")
            other_rate = median(figures[("vs", rtt)], "msgs_per_s")
            line += (f"; {bins['vs'].parent.parent}: {other_cpu:.0f} us/msg, {other_rate:.0f} msg/s -> CPU "
                     f"{cpu / other_cpu:.2f}x, rate {rate / other_rate:.2f}x")
        print(line)


if __name__ == "__main__":
    sys.exit(main())
