"""The redrive scenario of bench/run.py: how fast `workerless redrive` empties a dead-letter queue (issue 30 item 1).

* redrive  a dead-letter queue on fauxqs loaded with 20,000 messages (2,000 with --quick), each naming its source
           queue in `workerless.source_queue` as the daemon's dead letters do, moved back by the real
           `bin/workerless redrive DLQ --parallel=N` at N = 10 (the default) and N = 1 (one batch at a time, as
           before), at an SQS round trip of 0 and of 20 ms (fauxqs's delayed port). --parallel=1 moves 5,000
           (1,000 with --quick): one batch after another, its rate is flat from the first batch on. The rate is
           the command's own (its last progress line: messages moved over the time from its first receive
           to its last delete); `wall_msgs_per_s` counts the process's start too. After each run the runner
           reads the source queue back and counts every body: `lost` (in neither queue) and `duplicated`
           (copies past the first) must both be 0, and nothing may be left in the dead-letter queue.
           SQS's own StartMessageMoveTask moves at most 500 messages a second; the target is 3x that at 20 ms.
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
from harness import log, paired, spread, unique

# name -> (SQS round trip ms, --parallel)
CASES: dict[str, tuple[float, int]] = {"rtt0_p1": (0, 1), "rtt0_p10": (0, 10), "rtt20_p1": (20, 1),
                                        "rtt20_p10": (20, 10)}
KEYS = ("msgs_per_s", "wall_msgs_per_s", "cpu_us_per_msg", "sqs_requests_per_msg", "lost", "duplicated",
        "left_in_dead_letter_queue")
TARGET_MSGS_PER_S = 1500  # at 20 ms: 3x StartMessageMoveTask's 500 a second
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
    """One run of `workerless redrive` over `count` dead letters; its rate, CPU, requests, and what it lost or
    duplicated."""
    rtt, parallel = CASES[case]
    source, dead_letters = unique(f"{label}-src"), unique(f"{label}-dlq")
    source_url, dead_letter_url = bench.sqs.create(source), bench.sqs.create(dead_letters)
    load(bench, dead_letter_url, source, count)
    bench.fauxqs.set_delay(rtt)
    argv = [sys.executable, str(harness.DAEMON_BIN), "redrive", dead_letters, f"--parallel={parallel}"]
    cpu_before = resource.getrusage(resource.RUSAGE_CHILDREN)
    began = time.monotonic()
    done = subprocess.run(argv, env=harness.worker_env(bench.fauxqs.url), cwd=harness.DAEMON_BIN.parent.parent,
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
    bench.drop_queues([source, dead_letters], [source_url, dead_letter_url])
    return result


def redrive(bench: Any) -> dict[str, Any]:
    s = bench.settings
    messages = 2000 if s.quick else 20000
    sizes = {1: 1000 if s.quick else 5000, 10: messages}
    runs: dict[str, list[dict[str, Any]]] = {case: [] for case in CASES}
    try:
        if not s.quick:  # as in throughput: the first runs after fauxqs starts are slower
            redrive_run(bench, "rtt0_p10", "redrive-warmup", messages // 4)
        for index in range(s.runs):
            for case, (rtt, parallel) in CASES.items():
                result = redrive_run(bench, case, f"redrive-{case}-{index}", sizes[parallel])
                log(f"  redrive {rtt:g} ms --parallel={parallel} run {index + 1}: {result['msgs_per_s']:.0f} msg/s "
                    f"({result['wall_msgs_per_s']:.0f} with the process start), {result['cpu_us_per_msg']:.0f} us "
                    f"CPU/msg, {result['sqs_requests_per_msg']:.3f} SQS requests/msg, {result['lost']} lost, "
                    f"{result['duplicated']} duplicated, {result['left_in_dead_letter_queue']} left in the DLQ")
                runs[case].append(result)
    finally:
        bench.fauxqs.set_delay(bench.fauxqs.default_delay_ms)
    out: dict[str, Any] = {"cases": {case: {"sqs_ms": rtt, "parallel": parallel, "messages": sizes[parallel]}
                                     for case, (rtt, parallel) in CASES.items()}}
    for case, results in runs.items():
        out[case] = {key: spread([r[key] for r in results]) for key in KEYS}
    for rtt in (0, 20):
        out[f"rtt{rtt}_p10"]["rate_over_p1"] = paired(runs[f"rtt{rtt}_p10"], runs[f"rtt{rtt}_p1"], "msgs_per_s")
    return out


RUNNERS = {"redrive": redrive}


def table_rows(scenario: dict[str, Any], cell: Any, ratio_text: Any) -> list[tuple[str, str, str, str]]:
    """Rows for run.py's table: each case's rate, and --parallel=10 over --parallel=1 in the last column."""
    if "redrive" not in scenario:
        return []
    block = scenario["redrive"]
    rows = [("redrive (workerless redrive DLQ)", "", "", "vs --parallel=1")]
    for case, shape in block["cases"].items():
        figures = block[case]
        where = f"SQS {shape['sqs_ms']:g} ms, --parallel={shape['parallel']}, {shape['messages']} messages"
        rows += [(f"  {where}: msgs/s", cell(figures["msgs_per_s"], 0), "",
                  cell(figures["rate_over_p1"], 1) if "rate_over_p1" in figures else ""),
                 (f"  {where}: lost / duplicated (worst run)",
                  f"{figures['lost']['max']} / {figures['duplicated']['max']}", "", "")]
    return rows


def target_checks(scenario: dict[str, Any]) -> list[tuple[str, Any, str, bool | None]]:
    if "redrive" not in scenario:
        return []
    block = scenario["redrive"]
    rate = block["rtt20_p10"]["msgs_per_s"]["median"]
    harm = max((block[case][key]["max"] or 0) for case in CASES
               for key in ("lost", "duplicated", "left_in_dead_letter_queue"))
    return [("redrive: msgs/s at a 20 ms SQS round trip, --parallel=10", rate, f">= {TARGET_MSGS_PER_S}",
             None if rate is None else rate >= TARGET_MSGS_PER_S),
            ("redrive: messages lost, duplicated or left in the DLQ (worst run, any case)", harm, "0", harm == 0)]
