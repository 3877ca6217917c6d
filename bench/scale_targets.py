"""The scale_queues target of issue 30 item 3 at the issue's own settings, the daemon alone (the targets are absolute).

`runs` daemons at once, each on its own 50 empty queues (poll_for 20), idle for 180 s (45 s with --quick): SQS
requests per queue per minute. Then each daemon in turn (the others frozen with SIGSTOP): messages each to a random one
of its queues at an SQS round trip of 0 and of 20 ms, timed to the POST from SendMessage's answer and held to the round
trip (a raw ReceiveMessage) + 5 ms. (scale_priority: scale_priority.py.)
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


SCENARIOS = (Scenario("scale_queues", idle_queues, queues_rows, queues_checks),)
