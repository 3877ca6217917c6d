"""The scale_priority target of issue 30 item 3: no priority inversion across 50 queues at concurrency 1."""

# A 5 ms app, a backlog in every queue, then bursts to random queues. An inversion is a delivery from queue i while a
# queue above it had a message sent and not yet delivered; `inversions_past_slack` leaves out those sent less than
# WAKE_SLACK_MS before.

from __future__ import annotations

import random
import statistics
import time
from typing import Any

from figures import spreads
from harness import log, unique
from scale_targets import POLL_FOR, QUEUES, WAKE_SLACK_MS
from scenario import Block, Scenario, alone, check


def priority_run(bench: Any, index: int, per_queue: int, bursts: int, burst_size: int, delay_ms: int
                 ) -> dict[str, Any]:
    names = [unique(f"p50-{index}-{n:02d}") for n in range(QUEUES)]
    urls = [bench.sqs.create(name) for name in names]
    for url in urls:
        bench.sqs.send_many(url, per_queue, "preload", threads=1)
    total = per_queue * QUEUES + bursts * burst_size
    bench.sink.reset(delay_ms)
    worker = bench.worker("daemon", f"scale-priority-{index}", queues=names, concurrency=1, poll_for=POLL_FOR,
                          max_messages=total)
    rng = random.Random(index)
    sent: list[tuple[float, int, int]] = []  # (sink-clock ms the batch was answered, queue index, n)
    try:
        if bench.sink.wait(100, timeout=60)["count"] < 100:
            raise RuntimeError(f"scale_priority: fewer than 100 delivered in 60 s; see {worker.log_path}")
        offset = bench.sink.clock_offset_ms()
        for _ in range(bursts):
            queue = rng.randrange(QUEUES)
            sent += [(at * 1000 + offset, queue, n) for at, n in bench.sqs.send_many(urls[queue], burst_size, "burst",
                                                                                   threads=1)]
            time.sleep(0.2)
        stats = bench.sink.wait(total, timeout=120)
        if worker.wait(30) is None:
            worker.stop()
        events = bench.sink.events()
    finally:
        if worker.exit_code is None:
            worker.stop()
        bench.drop_queues(names, urls)
    result = count_inversions(events, {name: i for i, name in enumerate(names)}, per_queue, sent)
    result.update(delivered=stats["count"], max_in_flight=stats["max_in_flight"])
    log(f"  scale_priority run {index + 1}: {result['inversions']} inversions in {result['delivered']} deliveries "
        f"({result['burst_deliveries']} from the bursts; order breaks {result['order_breaks']}); "
        f"{result['inversions_past_slack']} past the slack: {result['inversion_details'][:6]}")
    return result


def priority(bench: Any) -> Block:
    per_queue, bursts, burst_size, delay_ms = (10 if bench.settings.quick else 20), 20, 5, 5
    runs = [priority_run(bench, index, per_queue, bursts, burst_size, delay_ms) for index in range(bench.settings.runs)]
    out: Block = spreads(runs, ("inversions", "inversions_past_slack", "delivered", "order_breaks", "burst_wait_p50_ms",
                                "burst_wait_max_ms"))
    out.update(inversion_details=[r["inversion_details"] for r in runs], queues=QUEUES, concurrency=1,
               per_queue=per_queue, bursts=bursts, burst_size=burst_size, sink_delay_ms=delay_ms)
    return out


def count_inversions(events: list[tuple[float, str]], rank: dict[str, int], per_queue: int,
                     sent: list[tuple[float, int, int]]) -> dict[str, Any]:
    """Deliveries from queue i while a queue above it had a message sent and not yet delivered. `order_breaks`:
    deliveries from a lower queue than the one before (not an inversion when nothing above was waiting)."""
    sent = sorted(sent)
    queues = len(rank)
    sent_so_far = [per_queue] * queues
    delivered = [0] * queues
    pointer = 0
    inversions = breaks = 0
    previous = -1
    burst_waits = []
    details: list[dict[str, Any]] = []
    pending_bursts: list[list[float]] = [[] for _ in range(queues)]
    for at, name in sorted(events):
        while pointer < len(sent) and sent[pointer][0] <= at:
            _, queue, n = sent[pointer]
            sent_so_far[queue] += n
            pending_bursts[queue].extend([sent[pointer][0]] * n)
            pointer += 1
        i = rank.get(name)
        if i is None:
            continue
        waiting = [p for p in range(i) if sent_so_far[p] > delivered[p]]
        if waiting:
            inversions += 1
            # how long the waiting message above had been sent (inf: it was there before the start)
            oldest = min((t for p in waiting for t in pending_bursts[p][:1]), default=None)
            details.append({"at": round(at, 1), "queue": i, "above": waiting[:5],
                            "sent_ms_before": round(at - oldest, 2) if oldest is not None and not any(
                                delivered[p] < per_queue for p in waiting) else None})
        if i < previous:
            breaks += 1
        previous = i
        delivered[i] += 1
        if delivered[i] > per_queue and pending_bursts[i]:
            burst_waits.append(at - pending_bursts[i].pop(0))
    late = [d for d in details if d["sent_ms_before"] is not None and d["sent_ms_before"] > WAKE_SLACK_MS]
    return {"inversions": inversions, "inversions_past_slack": len(late) + sum(1 for d in details
                                                                               if d["sent_ms_before"] is None),
            "inversion_details": details, "order_breaks": breaks, "burst_deliveries": len(burst_waits),
            "burst_wait_p50_ms": statistics.median(burst_waits) if burst_waits else 0.0,
            "burst_wait_max_ms": max(burst_waits) if burst_waits else 0.0}


SCENARIOS = (Scenario("scale_priority", priority,
                      lambda block: [alone(f"scale_priority {QUEUES} queues c=1: inversions", block["inversions"], 0)],
                      lambda block: [check(f"scale_priority: inversions across {QUEUES} queues, c=1 (worst run)",
                                           block["inversions"]["max"], "0", lambda v: v == 0)]),)
