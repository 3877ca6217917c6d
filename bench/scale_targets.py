"""The scale targets of issue 30 item 3 at the issue's own settings, the daemon alone (the targets are absolute).

* scale_queues    `runs` daemons at once, each on its own 50 empty queues (poll_for 20), idle for 180 s (45 s with
                  --quick): SQS requests per queue per minute. Then each daemon in turn (the others frozen with
                  SIGSTOP): messages each to a random one of its queues at an SQS round trip of 0 and of 20 ms, timed
                  to the POST from SendMessage's answer and held to the round trip (a raw ReceiveMessage) + 5 ms.
* scale_priority  50 queues in strict priority order, concurrency 1, a 5 ms app: a backlog in every queue, then bursts
                  to random queues. An inversion is a delivery from queue i while a queue above it had a message sent
                  and not yet delivered; `inversions_past_slack` leaves out those sent less than 5 ms before.
"""

from __future__ import annotations

import http.client
import json
import random
import signal
import statistics
import time
from typing import Any

from figures import cell, percentile, pool, spreads
from harness import log, unique
from polling import wake_tries
from scale import idle_window
from scenario import Block, Check, Row, Scenario, alone, check

QUEUES = 50
POLL_FOR = 20
REQUESTS_PER_QUEUE_MIN = 3
WAKE_SLACK_MS = 5
WAKE_RTTS_MS = (0, 20)
WAKE_KEYS = ("p50_ms", "p99_ms", "max_ms", "after_send_p50_ms", "after_send_p99_ms", "send_ms_p50",
             "sqs_round_trip_ms", "p50_over_round_trip_ms", "p99_over_round_trip_ms")


def raw_receive_rtt_ms(port: int, url: str, tries: int = 20) -> float:
    """Median round trip of ReceiveMessage (WaitTimeSeconds=0, an empty queue) on the daemon's port, from a raw
    keep-alive connection: the emulator's round trip without a client library's CPU."""
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    body = json.dumps({"QueueUrl": url, "WaitTimeSeconds": 0, "MaxNumberOfMessages": 1}).encode()
    headers = {"Content-Type": "application/x-amz-json-1.0", "X-Amz-Target": "AmazonSQS.ReceiveMessage",
               "Authorization": "AWS4-HMAC-SHA256 Credential=x/20250101/us-east-1/sqs/aws4_request, "
                                "SignedHeaders=host, Signature=0"}
    samples = []
    for _ in range(tries + 2):
        began = time.perf_counter()
        connection.request("POST", "/", body=body, headers=headers)
        response = connection.getresponse()
        response.read()
        samples.append((time.perf_counter() - began) * 1000)
        if response.status != 200:
            raise RuntimeError(f"raw ReceiveMessage: HTTP {response.status}")
    connection.close()
    return statistics.median(samples[2:])


def idle_daemons(bench: Any, group: list[tuple[list[str], list[str], Any]], window: float) -> list[dict[str, Any]]:
    """SQS requests per queue per minute (fauxqs's counts) and CPU of each daemon over an idle window."""
    out = []
    for index, figures in idle_window(bench, {i: (names, worker) for i, (names, _, worker) in enumerate(group)},
                                      window).items():
        per_queue = figures.pop("per_queue")
        out.append({"requests_per_queue_min": sum(per_queue) / len(per_queue),
                    "max_queue_requests_per_min": max(per_queue), "requests_per_min": sum(per_queue), **figures})
        log(f"  scale_queues idle daemon {index + 1}: {out[-1]['requests_per_queue_min']:.2f} requests per queue per "
            f"minute (busiest {out[-1]['max_queue_requests_per_min']:.2f}; {figures['by_action']}) over "
            f"{figures['window_s']:.0f} s")
    return out


def wake_alone(bench: Any, group: list[Any], index: int, tries: int, rng: random.Random, rtt: int,
               round_trip: float) -> dict[str, Any]:
    """Wake-ups of daemon `index` with the others frozen, against the measured round trip."""
    others = [worker for j, (*_, worker) in enumerate(group) if j != index]
    for other in others:
        other.signal(signal.SIGSTOP)
    try:
        time.sleep(POLL_FOR / 2 if rtt else 0.5)  # a new delay applies to long polls begun after it
        tried = wake_tries(bench, group[index][1], tries, rng, POLL_FOR + 10, random_queue=True)
    finally:
        for other in others:
            other.signal(signal.SIGCONT)
    times, after = tried["latencies"], tried["after_send"]
    return {"p50_ms": percentile(times, 50), "p99_ms": percentile(times, 99), "max_ms": max(times),
            "after_send_p50_ms": percentile(after, 50), "after_send_p99_ms": percentile(after, 99),
            "send_ms_p50": statistics.median(tried["sends"]) if tried["sends"] else None,
            "p50_over_round_trip_ms": percentile(after, 50) - round_trip,
            "p99_over_round_trip_ms": percentile(after, 99) - round_trip,
            "latencies_ms": [round(x, 2) for x in times], "after_send_ms": [round(x, 2) for x in after],
            "queues_hit": tried["hit"], "sqs_round_trip_ms": round_trip}


def idle_queues(bench: Any) -> Block:
    quick = bench.settings.quick
    window, tries = (45.0, 5) if quick else (180.0, 20)
    group = []
    for index in range(bench.settings.runs):
        names = [unique(f"q50-{index}-{n:02d}") for n in range(QUEUES)]
        urls = [bench.sqs.create(name) for name in names]
        group.append((names, urls, bench.worker("daemon", f"scale-queues-{index}", queues=names, concurrency=50,
                                                poll_for=POLL_FOR)))
    probe_url = bench.sqs.create(unique("q50-probe"))
    wake: dict[int, list[dict[str, Any]]] = {rtt: [] for rtt in WAKE_RTTS_MS}
    try:
        for *_, worker in group:
            worker.wait_started(60)
        time.sleep(5.0)
        idle = idle_daemons(bench, group, window)
        rng = random.Random(30)
        for rtt in WAKE_RTTS_MS:
            bench.fauxqs.set_delay(rtt)
            try:
                round_trip = raw_receive_rtt_ms(bench.fauxqs.port, probe_url)
                for index in range(len(group)):
                    wake[rtt].append(result := wake_alone(bench, group, index, tries, rng, rtt, round_trip))
                    log(f"  scale_queues wake daemon {index + 1}, SQS +{rtt} ms (round trip {round_trip:.2f} ms): "
                        f"p50 {result['p50_ms']:.1f} ms, p99 {result['p99_ms']:.1f} ms; from the send's answer p50 "
                        f"{result['after_send_p50_ms']:.1f}, p99 {result['after_send_p99_ms']:.1f}")
            finally:
                bench.fauxqs.set_delay(bench.fauxqs.default_delay_ms)
    finally:
        for names, urls, worker in group:
            worker.stop()
            bench.drop_queues(names, urls)
        bench.sqs.delete(probe_url)
    out: Block = spreads(idle, ("requests_per_queue_min", "max_queue_requests_per_min", "requests_per_min",
                                "cpu_s_per_idle_min"))
    out.update(by_action=[r["by_action"] for r in idle], queues=QUEUES, poll_for=POLL_FOR, window_s=window,
               concurrency=50, tries=tries, daemons_at_once=len(group))
    for rtt in WAKE_RTTS_MS:
        out[f"wake_rtt{rtt}"] = block = spreads(wake[rtt], WAKE_KEYS)
        pool(block, wake[rtt])
        block["runs_detail"] = wake[rtt]
    return out


def queues_rows(block: Block) -> list[Row]:
    rows = [alone(f"scale_queues {QUEUES} idle queues: requests per queue per minute", block["requests_per_queue_min"],
                  2)]
    for rtt in WAKE_RTTS_MS:
        w = block[f"wake_rtt{rtt}"]
        rows += [alone(f"  wake, random queue, SQS +{rtt} ms: p50 / p99 ms from before SendMessage",
                       f"{cell(w['p50_ms'])} / {cell(w['p99_ms'])}"),
                 alone("    p50 / p99 ms from SendMessage's answer",
                       f"{cell(w['after_send_p50_ms'])} / {cell(w['after_send_p99_ms'])}"),
                 alone("    round trip ms", w["sqs_round_trip_ms"], 2)]
    return rows


def queues_checks(block: Block) -> list[Check]:
    return [check(f"scale_queues: idle SQS requests per queue per minute, {QUEUES} queues, poll_for={POLL_FOR} (worst "
                  "run)", block["requests_per_queue_min"]["max"], f"<= {REQUESTS_PER_QUEUE_MIN}",
                  lambda v: v <= REQUESTS_PER_QUEUE_MIN)] + [
        check(f"scale_queues: wake p{q} on a random one of {QUEUES} queues, SQS +{rtt} ms, from SendMessage's answer, "
              "minus the round trip (median of runs)", block[f"wake_rtt{rtt}"][f"p{q}_over_round_trip_ms"]["median"],
              f"<= {WAKE_SLACK_MS} ms", lambda v: v <= WAKE_SLACK_MS) for rtt in WAKE_RTTS_MS for q in (50, 99)]


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


SCENARIOS = (
    Scenario("scale_queues", idle_queues, queues_rows, queues_checks),
    Scenario("scale_priority", priority, lambda block: [alone(f"scale_priority {QUEUES} queues c=1: inversions",
                                                              block["inversions"], 0)],
             lambda block: [check(f"scale_priority: inversions across {QUEUES} queues, c=1 (worst run)",
                                  block["inversions"]["max"], "0", lambda v: v == 0)]))
