#!/usr/bin/env python3
"""Instructions per message under callgrind: the hot path's cost without the machine's noise.

    python bench/instructions.py                        this checkout
    python bench/instructions.py --vs=/other/checkout   and another checkout's bin/workerless, the same drains
    python bench/instructions.py --tracing=off,always_on,traceidratio:0.01   [tracing] off, then on with each
                                                         sampler (OTEL_TRACES_SAMPLER[:ARG]), spans to the
                                                         OTLP collector bench/otlp_sink.mjs
    python bench/instructions.py --tracing=off,traceidratio:0.01 --export-batch=8   exports counted in, about
                                                         as often as the tracing scenario makes them

Each checkout drains --small and then --large messages at concurrency 50 under `valgrind --tool=callgrind`; the
difference over the messages between them is the instructions per message, start-up and stop cancelled out, and
steadier than CPU time on a shared machine (BENCHMARKS.md, "Regression guards"). PYTHONHASHSEED is fixed so dict
layouts repeat; system calls are not counted. With --tracing each checkout drains once per sampler, `off` first.
"""

from __future__ import annotations

import argparse
import re
import shutil
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import harness  # noqa: E402
from harness import RESULTS, Traced  # noqa: E402
from session import Bench, Settings  # noqa: E402


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--vs", help="another checkout (its bin/workerless runs the same drains)")
    parser.add_argument("--daemon-bin", help="this side's bin/workerless (default: this checkout's)")
    parser.add_argument("--small", type=int, default=1000)
    parser.add_argument("--large", type=int, default=5000)
    parser.add_argument("--timeout", type=float, help="seconds a drain may take (default 60 + messages / 5; a "
                                                        "loaded machine under callgrind needs more)")
    parser.add_argument("--tracing", default="off",
                        help="comma-separated: off (no [tracing]) or OTEL_TRACES_SAMPLER[:OTEL_TRACES_SAMPLER_ARG]")
    parser.add_argument("--export-batch", type=int, default=512,
                        help="spans a traced drain exports at once (OTEL_BSP_MAX_EXPORT_BATCH_SIZE): 8 with a 1 %% "
                             "sampler is one export every 800 messages or so, as the tracing scenario's 200 ms timer "
                             "makes them at its rate; the default, a full batch, leaves exports out of the figure")
    return parser.parse_args()


def traced(bench: Bench, sampler: str, batch: int = 512) -> Traced | None:
    """None for `off`; else spans sampled by SAMPLER[:ARG] to the OTLP collector, exported only in full batches
    of `batch` and at stop: under callgrind, fifty times slower, a timed export would come once per few spans, and
    how many depended on how long the drain took (a 1 % sampler's figure moved from 1.094x to 1.141x)."""
    if sampler == "off":
        return None
    name, _, argument = sampler.partition(":")
    return Traced(bench.otlp.url, name, argument or None,
                  (("OTEL_BSP_SCHEDULE_DELAY", "3600000"), ("OTEL_BSP_MAX_EXPORT_BATCH_SIZE", str(batch))))


def instructions(bench: Bench, daemon_bin: Path, label: str, messages: int, sampler: str = "off",
                 timeout: float | None = None, batch: int = 512) -> int:
    """The instructions callgrind counted for one whole run of the daemon draining `messages`."""
    harness.use_daemon_bin(daemon_bin)
    name, url = bench.backlog(f"instructions-{label}", messages)
    tracing = traced(bench, sampler, batch)
    worker = bench.daemon(f"instructions-{label}", queues=[name], concurrency=50, extra=(f"--max-messages={messages}",),
                          tables={"tracing": {"exporter": "otlp"}} if tracing else None,
                          env=tracing.variables() if tracing else None)
    out = RESULTS / f"callgrind-{label}-{messages}.out"
    worker.argv = ["valgrind", "--tool=callgrind", f"--callgrind-out-file={out}", *worker.argv]
    worker.env["PYTHONHASHSEED"] = "0"
    worker.start()
    if worker.wait(timeout or 60 + messages / 5) is None:
        worker.stop()
    bench.sqs.delete(url)
    delivered = bench.sink.stats()["count"]
    if delivered < messages:
        raise RuntimeError(f"{label}: only {delivered}/{messages} delivered; see {worker.log_path}")
    found = re.search(r"^(?:summary|totals):\s+(\d+)", out.read_text(), re.M)
    if found is None:
        raise RuntimeError(f"{label}: no totals in {out}")
    return int(found.group(1))


def main() -> int:
    args = parse_args()
    if shutil.which("valgrind") is None:
        print("bench/instructions.py needs valgrind (apt install valgrind)", file=sys.stderr)
        return 2
    bins = harness.checkouts(args.vs, args.daemon_bin)
    bench = Bench(Settings(quick=True, runs=1))
    samplers = args.tracing.split(",")
    per_message: dict[tuple[str, str], float] = {}
    try:
        for name, daemon_bin in bins.items():
            for sampler in samplers:
                label = name if sampler == "off" else f"{name}-{sampler.replace(':', '-').replace('.', '')}"
                small = instructions(bench, daemon_bin, label, args.small, sampler, args.timeout, args.export_batch)
                large = instructions(bench, daemon_bin, label, args.large, sampler, args.timeout, args.export_batch)
                per_message[(name, sampler)] = (large - small) / (args.large - args.small)
                print(f"  {name} ({daemon_bin.parent.parent}), tracing {sampler}: "
                      f"{per_message[(name, sampler)]:,.0f} instructions per message "
                      f"({small:,} for {args.small:,} messages, {large:,} for {args.large:,})", flush=True)
    finally:
        bench.close()
    for name in bins:
        first = per_message[(name, samplers[0])]
        for sampler in samplers[1:]:
            print(f"instructions per message, {name}: tracing {sampler} {per_message[(name, sampler)] / first:.3f}x "
                  f"tracing {samplers[0]}")
    if "vs" in bins:
        for sampler in samplers:
            ratio = per_message[("this", sampler)] / per_message[("vs", sampler)]
            print(f"instructions per message (tracing {sampler}): {ratio:.3f}x {bins['vs'].parent.parent}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
