"""The redrive kind: how fast `workerless redrive DLQ --parallel=N` empties a dead-letter queue of messages
naming their source queue, at N = 10 and 1 and an SQS round trip of 0 and 20 ms. The rate is the command's own (its
last progress line); the runner then reads the source queue back: nothing may be lost, duplicated or left behind.
SQS's own StartMessageMoveTask moves at most 500 messages a second.
"""

from __future__ import annotations

import json
import re
import resource
import subprocess
import sys
import time
from collections import Counter
from typing import Any

import harness
import processes
from figures import interleave, paired, spreads
from harness import unique
from shapes import Row

CASES: dict[str, tuple[float, int]] = {  # name -> (SQS round trip ms, --parallel)
    "rtt0_p1": (0, 1), "rtt0_p10": (0, 10), "rtt20_p1": (20, 1), "rtt20_p10": (20, 10)}
KEYS = ("msgs_per_s", "wall_msgs_per_s", "cpu_us_per_msg", "sqs_requests_per_msg", "lost", "duplicated",
        "left_in_dead_letter_queue", "harm")
LAST_LINE = re.compile(r"moved (\d+) of \d+ messages \(100 %, ([\d,]+) msg/s\)")

def load(bench: Any, url: str, source: str, count: int) -> None:
    """`count` dead letters naming `source`, 10 to a SendMessageBatch from the runner's threads (undelayed port)."""
    attributes = {"workerless.source_queue": {"DataType": "String", "StringValue": source}}

    def send(first: int) -> None:
        entries = [{"Id": str(i), "MessageBody": json.dumps({"n": first + i, "payload": "x" * 120}),
                    "MessageAttributes": attributes} for i in range(min(10, count - first))]
        if bench.sqs.client.send_message_batch(QueueUrl=url, Entries=entries).get("Failed"):
            raise RuntimeError("loading the dead-letter queue failed")

    list(bench.sqs.pool.map(send, range(0, count, 10)))

def read_back(bench: Any, url: str) -> Counter[int]:
    """Every message in the queue by its number, received until empty and left invisible (read once)."""
    numbers: Counter[int] = Counter()
    while batch := bench.sqs.client.receive_message(QueueUrl=url, MaxNumberOfMessages=10, WaitTimeSeconds=0,
                                                    VisibilityTimeout=900).get("Messages", []):
        numbers.update(json.loads(message["Body"])["n"] for message in batch)
    return numbers

def redrive_run(bench: Any, case: str, label: str, count: int) -> dict[str, Any]:
    """One `workerless redrive` of `count` dead letters: its rate, CPU, requests, and what it lost or duplicated."""
    rtt, parallel = CASES[case]
    source, dead_letters = unique(f"{label}-src"), unique(f"{label}-dlq")
    source_url, dead_letter_url = bench.sqs.create(source), bench.sqs.create(dead_letters)
    load(bench, dead_letter_url, source, count)
    bench.fauxqs.set_delay(rtt)
    argv = [sys.executable, str(harness.DAEMON_BIN), "redrive", dead_letters, f"--parallel={parallel}"]
    cpu_before = resource.getrusage(resource.RUSAGE_CHILDREN)
    began = time.monotonic()
    done = subprocess.run(argv, env=processes.worker_env(bench.fauxqs.url), cwd=harness.DAEMON_BIN.parent.parent,
                          capture_output=True, text=True, timeout=900)
    wall = time.monotonic() - began
    cpu_after = resource.getrusage(resource.RUSAGE_CHILDREN)
    bench.fauxqs.set_delay(0)
    last = LAST_LINE.search(done.stderr)
    if done.returncode != 0 or last is None:
        raise RuntimeError(f"{label}: redrive exited {done.returncode}: {done.stderr[-800:]}")
    moved = read_back(bench, source_url)
    requests = sum(bench.fauxqs.requests(source).values()) + sum(bench.fauxqs.requests(dead_letters).values())
    cpu = (cpu_after.ru_utime + cpu_after.ru_stime) - (cpu_before.ru_utime + cpu_before.ru_stime)
    result = {"messages": count, "moved": int(last.group(1)),
              "msgs_per_s": float(last.group(2).replace(",", "")), "wall_msgs_per_s": count / wall,
              "cpu_us_per_msg": cpu / count * 1e6, "sqs_requests_per_msg": requests / count,
              "lost": sum(1 for n in range(count) if n not in moved),
              "duplicated": sum(copies - 1 for copies in moved.values()),
              "left_in_dead_letter_queue": bench.sqs.left(dead_letter_url)}
    result["harm"] = result["lost"] + result["duplicated"] + result["left_in_dead_letter_queue"]
    bench.drop_queues([source, dead_letters], [source_url, dead_letter_url])
    return result

def redrive(bench: Any, row: Row) -> dict[str, Any]:
    quick = bench.settings.quick
    sizes = {1: 1000 if quick else 5000, 10: 2000 if quick else 20000}
    try:
        if not quick:  # as in throughput: the first runs after fauxqs starts are slower
            redrive_run(bench, "rtt0_p10", "redrive-warmup", sizes[10] // 4)
        runs = interleave(bench.settings.runs, CASES, lambda case, i: redrive_run(
            bench, case, f"redrive-{case}-{i}", sizes[CASES[case][1]]), lambda case, i, r: (
            f"redrive {case} run {i + 1}: {r['msgs_per_s']:.0f} msg/s ({r['wall_msgs_per_s']:.0f} with the process "
            f"start), {r['cpu_us_per_msg']:.0f} us CPU/msg, {r['sqs_requests_per_msg']:.3f} SQS requests/msg, "
            f"{r['lost']} lost, {r['duplicated']} duplicated, {r['left_in_dead_letter_queue']} left in the DLQ"))
    finally:
        bench.fauxqs.set_delay(bench.fauxqs.default_delay_ms)
    out: dict[str, Any] = {"cases": {case: {"sqs_ms": rtt, "parallel": parallel, "messages": sizes[parallel]}
                            for case, (rtt, parallel) in CASES.items()}}
    out.update({case: spreads(results, KEYS) for case, results in runs.items()})
    out["harm_worst"] = max(max(results, key=lambda r: r["harm"])["harm"] for results in runs.values())
    for rtt in (0, 20):
        out[f"rtt{rtt}_p10"]["rate_over_p1"] = paired(runs[f"rtt{rtt}_p10"], runs[f"rtt{rtt}_p1"], "msgs_per_s")
    return out
