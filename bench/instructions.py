#!/usr/bin/env python3
"""Instructions per message under callgrind: the hot path's cost without the machine's noise.

    python bench/instructions.py                        this checkout
    python bench/instructions.py --vs=/other/checkout   and another checkout's bin/workerless, the same drains

CPU time per message on a shared machine moves by a fifth between two drains of one build (see
BENCHMARKS.md, 'The quick CPU check'), more than most changes to the hot path are worth. This counts what
the daemon's process executes instead: each checkout drains --small and then --large messages at
concurrency 50 from fauxqs into the instant sink under `valgrind --tool=callgrind`, and the instructions of
the larger drain less those of the smaller, over the messages between them, are the instructions per
message, start-up and stop cancelled out. PYTHONHASHSEED is fixed so dict layouts repeat; what still moves
(how many answers were already there when a slot read its socket) moves the figure by about 1%. Instructions
in the kernel (system calls) are not counted. Needs valgrind (apt install valgrind); a run takes a few
minutes per checkout. Not part of CI.
"""

from __future__ import annotations

import argparse
import re
import shutil
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import harness  # noqa: E402
from harness import RESULTS, make_daemon, unique  # noqa: E402
from session import Bench, Settings  # noqa: E402


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--vs", help="another checkout (its bin/workerless runs the same drains)")
    parser.add_argument("--small", type=int, default=1000)
    parser.add_argument("--large", type=int, default=5000)
    return parser.parse_args()


def instructions(bench: Bench, daemon_bin: Path, label: str, messages: int) -> int:
    """The instructions callgrind counted for one whole run of the daemon draining `messages`."""
    harness.DAEMON_BIN = daemon_bin
    name = unique(f"instructions-{label}")
    url = bench.sqs.create(name)
    bench.sqs.send_many(url, messages, "bulk")
    bench.sink.reset(0)
    worker = make_daemon(f"instructions-{label}", bench.fauxqs.url, queues=[name], sink_url=bench.sink.url,
                         concurrency=50, poll_for=1, extra=(f"--max-messages={messages}",))
    out = RESULTS / f"callgrind-{label}-{messages}.out"
    worker.argv = ["valgrind", "--tool=callgrind", f"--callgrind-out-file={out}", *worker.argv]
    worker.env["PYTHONHASHSEED"] = "0"
    bench.workers.append(worker.start())
    if worker.wait(60 + messages / 5) is None:
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
    bins = {"this": harness.DAEMON_BIN.resolve()}
    if args.vs:
        bins["vs"] = (Path(args.vs) / "bin" / "workerless").resolve()
    bench = Bench(Settings(quick=True, runs=1))
    per_message: dict[str, float] = {}
    try:
        for name, daemon_bin in bins.items():
            small = instructions(bench, daemon_bin, name, args.small)
            large = instructions(bench, daemon_bin, name, args.large)
            per_message[name] = (large - small) / (args.large - args.small)
            print(f"  {name} ({daemon_bin.parent.parent}): {per_message[name]:,.0f} instructions per message "
                  f"({small:,} for {args.small:,} messages, {large:,} for {args.large:,})", flush=True)
    finally:
        bench.close()
    if "vs" in per_message:
        print(f"instructions per message: {per_message['this'] / per_message['vs']:.3f}x {bins['vs'].parent.parent}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
