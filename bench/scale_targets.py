"""The scale targets of issue 30 item 3, each measured at the issue's own settings: scale_wide, scale_queues,
scale_priority. The daemon only (the targets are absolute); bench/scale.py's `scale` scenario has the baseline.

* scale_wide      c=1,000 on an app that holds each POST 200 ms, and (issue 42 item 4) 2 s beside c=50 on the same
                  app: bench/scale_wide.py.
* scale_queues    `runs` daemons at once, each on its own 50 empty queues (strict priority, concurrency 50,
                  `poll_for = 20`), idle for 180 s (45 s with --quick) after 5 s of start-up: SQS requests per
                  queue per minute, counted by fauxqs per queue. Then each daemon in turn (the others frozen
                  with SIGSTOP): 20 messages (5 with --quick), each to a random one of its 50 queues, 0.3-0.8 s
                  apart, at an SQS round trip of 0 and of 20 ms (fauxqs's delayed port; the runner's send goes
                  to the undelayed port). The wake-up is timed to the POST's arrival at the sink from just before
                  the runner's SendMessage (its boto3 call and round trip included) and from SendMessage's
                  answer (the send's own round trip taken out: the message is visible by then). The round trip
                  it is held to is measured on the daemon's port: a ReceiveMessage with WaitTimeSeconds=0 on an
                  empty queue from a raw keep-alive connection (median of 20). Targets: <= 3 requests per
                  queue per minute; wake-up from the send's answer (p50 and p99 of each run) <= that round trip
                  + 5 ms.
* scale_priority  50 queues in strict priority order, concurrency 1, the app holding each POST 5 ms: 20 messages
                  waiting in every queue (10 with --quick) before the start, and once 100 are delivered, 20
                  bursts of 5 messages to random queues, 0.2 s apart. An inversion is a delivery from queue i
                  while some queue above it (p < i) had a message sent (SendMessageBatch answered, mapped to
                  the sink's clock) and not yet delivered: the strictest reading, since a message the daemon
                  has received and buffered counts as waiting too. Each inversion is listed with how long before
                  it the waiting message was sent; `inversions_past_slack` leaves out those sent less than 5 ms
                  before (a receive on its way cannot have seen them). Target: 0.
"""

from __future__ import annotations

import http.client
import json
import random
import signal
import statistics
import time
from typing import Any

import scale_wide
from harness import log, percentile, spread, unique

SCENARIOS = ("scale_wide", "scale_queues", "scale_priority")
QUEUES = 50
POLL_FOR = 20
REQUESTS_PER_QUEUE_MIN = 3
WAKE_SLACK_MS = 5
WAKE_RTTS_MS = (0, 20)


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


def idle_queues(bench: Any) -> dict[str, Any]:
    s = bench.settings
    window = 45.0 if s.quick else 180.0
    tries = 5 if s.quick else 20
    group = []
    for index in range(s.runs):
        names = [unique(f"q50-{index}-{n:02d}") for n in range(QUEUES)]
        urls = [bench.sqs.create(name) for name in names]
        worker = bench.worker("daemon", f"scale-queues-{index}", queues=names, concurrency=50, poll_for=POLL_FOR)
        group.append((names, urls, worker))
    probe_name = unique("q50-probe")
    probe_url = bench.sqs.create(probe_name)
    idle: list[dict[str, Any]] = []
    wake: dict[int, list[dict[str, Any]]] = {rtt: [] for rtt in WAKE_RTTS_MS}
    try:
        for *_, worker in group:
            worker.wait_started(60)
        time.sleep(5.0)
        counts0 = bench.fauxqs.stats()["counts"]
        cpu0 = [worker.cpu() for *_, worker in group]
        began = time.monotonic()
        time.sleep(window)
        elapsed = time.monotonic() - began
        counts1 = bench.fauxqs.stats()["counts"]
        for index, (names, _, worker) in enumerate(group):
            per_queue = []
            by_action: dict[str, int] = {}
            for name in names:
                before, after = counts0.get(name, {}), counts1.get(name, {})
                n = 0
                for action, value in after.items():
                    delta = value - before.get(action, 0)
                    n += delta
                    if delta:
                        by_action[action] = by_action.get(action, 0) + delta
                per_queue.append(n * 60 / elapsed)
            cpu1 = worker.cpu()
            result = {"requests_per_queue_min": sum(per_queue) / len(per_queue),
                      "max_queue_requests_per_min": max(per_queue), "requests_per_min": sum(per_queue),
                      "by_action": by_action, "window_s": elapsed,
                      "cpu_s_per_idle_min": (cpu1 - cpu0[index]) * 60 / elapsed
                      if cpu1 is not None and cpu0[index] is not None else None}
            idle.append(result)
            log(f"  scale_queues idle daemon {index + 1}: {result['requests_per_queue_min']:.2f} requests per queue "
                f"per minute (busiest queue {result['max_queue_requests_per_min']:.2f}; {by_action}) over "
                f"{elapsed:.0f} s, {result['cpu_s_per_idle_min']:.3f} CPU s per idle minute")
        rng = random.Random(30)
        for rtt in WAKE_RTTS_MS:
            bench.fauxqs.set_delay(rtt)
            try:
                round_trip = raw_receive_rtt_ms(bench.fauxqs.port, probe_url)
                for index, (names, urls, worker) in enumerate(group):
                    others = [w for j, (*_, w) in enumerate(group) if j != index]
                    for other in others:
                        other.signal(signal.SIGSTOP)
                    try:
                        time.sleep(POLL_FOR / 2 if rtt else 0.5)  # a new delay applies to long polls begun after it
                        result = wake_run(bench, urls, tries, rng, round_trip)
                    finally:
                        for other in others:
                            other.signal(signal.SIGCONT)
                    result["sqs_round_trip_ms"] = round_trip
                    wake[rtt].append(result)
                    log(f"  scale_queues wake daemon {index + 1}, SQS +{rtt} ms (round trip {round_trip:.2f} ms): "
                        f"p50 {result['p50_ms']:.1f} ms, p99 {result['p99_ms']:.1f} ms, from the send's answer p50 "
                        f"{result['after_send_p50_ms']:.1f}, p99 {result['after_send_p99_ms']:.1f}; queues "
                        f"{result['queues_hit']}")
            finally:
                bench.fauxqs.set_delay(bench.fauxqs.default_delay_ms)
    finally:
        for names, urls, worker in group:
            worker.stop()
            bench.drop_queues(names, urls)
        bench.sqs.delete(probe_url)
    out: dict[str, Any] = {key: spread([r[key] for r in idle]) for key in
                           ("requests_per_queue_min", "max_queue_requests_per_min", "requests_per_min",
                            "cpu_s_per_idle_min")}
    out["by_action"] = [r["by_action"] for r in idle]
    out.update(queues=QUEUES, poll_for=POLL_FOR, window_s=window, concurrency=50, tries=tries,
               daemons_at_once=len(group))
    for rtt in WAKE_RTTS_MS:
        block = {key: spread([r[key] for r in wake[rtt]]) for key in
                 ("p50_ms", "p99_ms", "max_ms", "after_send_p50_ms", "after_send_p99_ms", "send_ms_p50",
                  "sqs_round_trip_ms", "p50_over_round_trip_ms", "p99_over_round_trip_ms")}
        pooled = [x for r in wake[rtt] for x in r["latencies_ms"]]
        block["pooled_p50_ms"] = percentile(pooled, 50)
        block["pooled_p99_ms"] = percentile(pooled, 99)
        block["runs_detail"] = wake[rtt]
        out[f"wake_rtt{rtt}"] = block
    return out


def wake_run(bench: Any, urls: list[str], tries: int, rng: random.Random, round_trip: float) -> dict[str, Any]:
    bench.sink.reset(0)
    offset = bench.sink.clock_offset_ms()
    latencies, after_send, sends, hit = [], [], [], []
    for attempt in range(tries):
        time.sleep(rng.uniform(0.3, 0.8))
        queue = rng.randrange(len(urls))
        hit.append(queue)
        sent = time.time() * 1000
        bench.sqs.send_one(urls[queue], "wake")
        answered = time.time() * 1000
        stats = bench.sink.wait(attempt + 1, timeout=POLL_FOR + 10)
        if stats["count"] < attempt + 1:
            latencies.append(float("inf"))
            after_send.append(float("inf"))
            break
        arrival = stats["last"] - offset
        latencies.append(arrival - sent)
        after_send.append(arrival - answered)
        sends.append(answered - sent)
    p99 = percentile(latencies, 99)
    return {"p50_ms": percentile(latencies, 50), "p99_ms": p99, "max_ms": max(latencies),
            "after_send_p50_ms": percentile(after_send, 50), "after_send_p99_ms": percentile(after_send, 99),
            "send_ms_p50": statistics.median(sends) if sends else None,
            "p50_over_round_trip_ms": percentile(after_send, 50) - round_trip,
            "p99_over_round_trip_ms": percentile(after_send, 99) - round_trip,
            "latencies_ms": [round(x, 2) for x in latencies], "after_send_ms": [round(x, 2) for x in after_send],
            "queues_hit": hit}


def priority(bench: Any) -> dict[str, Any]:
    s = bench.settings
    per_queue = 10 if s.quick else 20
    bursts, burst_size, delay_ms = 20, 5, 5
    runs: list[dict[str, Any]] = []
    for index in range(s.runs):
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
                for at, n in bench.sqs.send_many(urls[queue], burst_size, "burst", threads=1):
                    sent.append((at * 1000 + offset, queue, n))
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
        result["delivered"] = stats["count"]
        result["max_in_flight"] = stats["max_in_flight"]
        log(f"  scale_priority run {index + 1}: {result['inversions']} inversions in {result['delivered']} deliveries "
            f"({result['burst_deliveries']} of them from the bursts; order breaks {result['order_breaks']}); "
            f"{result['inversions_past_slack']} with the message above "
            f"sent more than {WAKE_SLACK_MS} ms before: {result['inversion_details'][:6]}")
        runs.append(result)
    keys = ("inversions", "inversions_past_slack", "delivered", "order_breaks", "burst_wait_p50_ms", "burst_wait_max_ms")
    out: dict[str, Any] = {key: spread([r[key] for r in runs]) for key in keys}
    out["inversion_details"] = [r["inversion_details"] for r in runs]
    out.update(queues=QUEUES, concurrency=1, per_queue=per_queue, bursts=bursts, burst_size=burst_size,
               sink_delay_ms=delay_ms)
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


RUNNERS = {"scale_wide": scale_wide.wide, "scale_queues": idle_queues, "scale_priority": priority}


def target_checks(scenario: dict[str, Any]) -> list[tuple[str, Any, str, bool | None]]:
    checks: list[tuple[str, Any, str, bool | None]] = scale_wide.target_checks(scenario)

    def check(name: str, value: Any, limit: str, ok: Any) -> None:
        checks.append((name, value, limit, None if value is None else bool(ok(value))))

    if "scale_queues" in scenario:
        block = scenario["scale_queues"]
        check(f"scale_queues: idle SQS requests per queue per minute, {QUEUES} queues, poll_for={POLL_FOR} (worst run)",
              block["requests_per_queue_min"]["max"], f"<= {REQUESTS_PER_QUEUE_MIN}",
              lambda v: v <= REQUESTS_PER_QUEUE_MIN)
        for rtt in WAKE_RTTS_MS:
            wake = block[f"wake_rtt{rtt}"]
            for q in (50, 99):
                check(f"scale_queues: wake p{q} on a random one of {QUEUES} queues, SQS +{rtt} ms, from SendMessage's "
                      f"answer, minus the round trip (median of runs)", wake[f"p{q}_over_round_trip_ms"]["median"],
                      f"<= {WAKE_SLACK_MS} ms", lambda v: v <= WAKE_SLACK_MS)
    if "scale_priority" in scenario:
        value = scenario["scale_priority"]["inversions"]["max"]
        check(f"scale_priority: inversions across {QUEUES} queues, c=1 (worst run)", value, "0", lambda v: v == 0)
    return checks


def table_rows(scenario: dict[str, Any], cell: Any, ratio_text: Any) -> list[tuple[str, str, str, str]]:
    rows: list[tuple[str, str, str, str]] = scale_wide.table_rows(scenario, cell, ratio_text)
    if "scale_queues" in scenario:
        b = scenario["scale_queues"]
        rows.append((f"scale_queues {QUEUES} idle queues: requests per queue per minute",
                     cell(b["requests_per_queue_min"], 2), "", ""))
        for rtt in WAKE_RTTS_MS:
            w = b[f"wake_rtt{rtt}"]
            rows += [(f"  wake, random queue, SQS +{rtt} ms: p50 / p99 ms from before SendMessage",
                      f"{cell(w['p50_ms'])} / {cell(w['p99_ms'])}", "", ""),
                     ("    p50 / p99 ms from SendMessage's answer",
                      f"{cell(w['after_send_p50_ms'])} / {cell(w['after_send_p99_ms'])}", "", ""),
                     ("    round trip ms", cell(w["sqs_round_trip_ms"], 2), "", "")]
    if "scale_priority" in scenario:
        rows.append((f"scale_priority {QUEUES} queues c=1: inversions", cell(scenario["scale_priority"]["inversions"], 0),
                     "", ""))
    return rows
