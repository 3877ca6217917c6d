"""The order kind: priority kept or broken. Queues in priority order with a backlog each (`preload`), a slow app; once
deliveries flow, bursts sent to the queue above (or to random ones); an inversion is a delivery from a queue while a
queue above it had a message sent (SendMessage answered) and not yet delivered.

params: queues, preload [per queue] (full, quick), bursts, burst_size (full, quick), burst_to ("first" | "random"),
burst_gap_s, threads (the runner's senders), after (deliveries before the bursts), app_ms, from_first_burst (count
only from the first burst delivery on: the wake-up before it is not an inversion), slack_ms."""

from __future__ import annotations

import random
import time
from typing import Any

from drain import add_ratios
from figures import interleave, spreads
from harness import unique
from session import Bench
from shapes import Case, Row, place

KEYS = ("inversions", "inversions_past_slack", "low_between_first_and_last_high", "high_span_ms", "delivered")

def count(events: list[tuple[float, str]], rank: dict[str, int], preload: list[int],
          sent: list[tuple[float, int, int]], p: dict[str, Any]) -> dict[str, Any]:
    """Inversions in the sink's arrivals, with how long the message above had waited (past the slack or not)."""
    sent, queues = sorted(sent), len(rank)
    so_far, delivered, pending = list(preload), [0] * queues, [[] for _ in range(queues)]
    pointer = inversions = late = 0
    details: list[dict[str, Any]] = []
    targets = {queue for _, queue, _ in sent}
    bursts = sorted(at for at, name in events if rank.get(name) in targets and at >= (sent[0][0] if sent else 0))
    first_burst = bursts[0] if bursts and p.get("from_first_burst") else float("-inf")
    for at, name in sorted(events):
        while pointer < len(sent) and sent[pointer][0] <= at:
            _, queue, n = sent[pointer]
            so_far[queue] += n
            pending[queue].extend([sent[pointer][0]] * n)
            pointer += 1
        i = rank.get(name)
        if i is None:
            continue
        waiting = [q for q in range(i) if so_far[q] > delivered[q]]
        if waiting and at > first_burst:
            inversions += 1
            oldest = min((t for q in waiting for t in pending[q][:1]), default=None)
            before = at - oldest if oldest is not None and all(delivered[q] >= preload[q] for q in waiting) else None
            late += before is None or before > p.get("slack_ms", 5)
            details.append({"at": round(at, 1), "queue": i, "above": waiting[:5],
                            "sent_ms_before": round(before, 2) if before is not None else None})
        delivered[i] += 1
        if delivered[i] > preload[i] and pending[i]:
            pending[i].pop(0)
    between = sum(1 for at, name in events if bursts and bursts[0] < at < bursts[-1] and rank.get(name) not in targets)
    return {"inversions": inversions, "inversions_past_slack": late, "low_between_first_and_last_high": between,
            "high_span_ms": bursts[-1] - bursts[0] if bursts else None, "delivered": len(events),
            "inversion_details": details}

def one(bench: Bench, row: Row, case: Case, label: str, index: int) -> dict[str, Any]:
    p, quick = row.params, bench.settings.quick
    names = [unique(f"{label}-{n:02d}") for n in range(p["queues"])]
    urls = [bench.sqs.create(name) for name in names]
    preload = [n[quick] for n in p["preload"]]
    for url, n in zip(urls, preload):
        bench.sqs.send_many(url, n, "preload", threads=p.get("threads", 4)) if n else None
    bursts, size = p["bursts"], p["burst_size"][quick]
    total = sum(preload) + bursts * size
    bench.sink.reset(p["app_ms"])
    worker = bench.worker(case, label, names, poll_for=p.get("poll_for", 1), max_messages=total)
    rng, sent = random.Random(index), []
    try:
        after = min(p["after"], total // 4)
        if bench.sink.wait(after, timeout=60)["count"] < after:
            raise RuntimeError(f"{label}: fewer than {after} delivered in 60 s; see {worker.log_path}")
        offset = bench.sink.clock_offset_ms()
        for _ in range(bursts):
            queue = rng.randrange(len(names)) if p["burst_to"] == "random" else 0
            sent += [(at * 1000 + offset, queue, n) for at, n in
                     bench.sqs.send_many(urls[queue], size, "burst", threads=p.get("threads", 4))]
            time.sleep(p.get("burst_gap_s", 0))
        bench.sink.wait(total, timeout=120)
        if worker.wait(30) is None:
            worker.stop()
        events = bench.sink.events()
    finally:
        worker.stop()
        bench.drop_queues(names, urls)
    return count(events, {name: i for i, name in enumerate(names)}, preload, sent, p)

def run(bench: Bench, row: Row) -> dict[str, Any]:
    runs = interleave(bench.settings.runs, row.cases, lambda name, i: one(
        bench, row, row.cases[name], f"{row.name}-{name}-{i}", i), lambda name, i, r: (
        f"{row.name} {name} run {i + 1}: {r['inversions']} inversions ({r['inversions_past_slack']} past the slack) "
        f"in {r['delivered']} deliveries: {r['inversion_details'][:4]}"))
    block: dict[str, Any] = dict(row.params.get("block", {}))
    for name, results in runs.items():
        place(block, name, {**spreads(results, KEYS), "inversion_details": [r["inversion_details"] for r in results]})
    if row.ratio:
        add_ratios(block, list(row.cases))
    return block
