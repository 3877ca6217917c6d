"""The scenarios that count SQS requests or time single deliveries: requests, idle, wake, priority.

requests and idle count each worker's SQS requests through the counting proxy (bench/sqs_proxy.mjs);
wake times one message from send to POST; priority counts low-priority deliveries that jump a burst of
high-priority ones. Each is a function of the running Bench (bench/session.py) returning its figures.
"""

from __future__ import annotations

import random
import statistics
import time
from typing import Any

from harness import log, percentile, unique
from session import Bench, summarize


def requests(bench: Bench) -> dict[str, Any]:
    """SQS requests per delivered message on a backlog, counted by the proxy (batch_size 10)."""
    s = bench.settings
    concurrency = 50
    runs: dict[str, list[dict[str, Any]]] = {"daemon": [], "baseline": []}
    for index in range(s.runs):
        for kind in ("daemon", "baseline"):
            name = unique(f"req-{kind}-{index}")
            url = bench.sqs.create(name)
            bench.sqs.send_many(url, s.request_messages, "bulk")
            bench.sink.reset(0)
            start = bench.proxy.count()
            if kind == "daemon":  # --drain: exits after the queue comes back empty from a long poll
                worker = bench.worker(kind, f"req-{kind}-{index}", endpoint=bench.proxy.url, queues=[name],
                                     concurrency=concurrency, poll_for=1, drain=True)
            else:
                worker = bench.worker(kind, f"req-{kind}-{index}", endpoint=bench.proxy.url, queues=[name],
                                     concurrency=concurrency, poll_for=1, max_messages=s.request_messages)
            code = worker.wait(60 + s.request_messages / 20)
            if code is None:
                code = worker.stop()
            delivered = bench.sink.stats()["count"]
            entries = [e for e in bench.proxy.entries(start) if e[2] == name]
            bench.sqs.delete(url)
            by_action: dict[str, int] = {}
            for entry in entries:
                by_action[entry[1]] = by_action.get(entry[1], 0) + 1
            setup = sum(by_action.get(a, 0) for a in ("GetQueueUrl", "GetQueueAttributes"))
            deletes = [e[4] for e in entries if e[1] == "DeleteMessageBatch" and e[4]]
            result = {
                "delivered": delivered,
                "requests": len(entries),
                "requests_per_msg": len(entries) / max(1, delivered),
                "requests_per_msg_without_startup": (len(entries) - setup) / max(1, delivered),
                "mean_delete_batch": statistics.mean(deletes) if deletes else None,
                "by_action": by_action,
                "exit_code": code,
            }
            log(f"  requests {kind} run {index + 1}: {result['requests']} requests for {delivered} messages = "
                f"{result['requests_per_msg']:.3f}/msg {by_action}")
            runs[kind].append(result)
    out = summarize(runs, ("requests_per_msg", "requests_per_msg_without_startup", "mean_delete_batch"))
    out["by_action_last_run"] = {kind: runs[kind][-1]["by_action"] for kind in runs}
    out["messages"] = s.request_messages
    out["concurrency"] = concurrency
    return out


def idle(bench: Bench) -> dict[str, Any]:
    """3 empty queues; every worker runs at once, each on its own queues; counted by the proxy."""
    s = bench.settings
    poll_for = s.idle_poll_for
    concurrencies = (10, 50, 500)
    runs: dict[str, dict[int, list[dict[str, Any]]]] = {"daemon": {c: [] for c in concurrencies},
                                        "baseline": {c: [] for c in concurrencies}}
    for index in range(s.runs):
        group = []
        for kind in ("daemon", "baseline"):
            for concurrency in concurrencies:
                names = [unique(f"idle-{kind}-c{concurrency}-{letter}") for letter in "abc"]
                urls = [bench.sqs.create(name) for name in names]
                worker = bench.worker(kind, f"idle-{kind}-c{concurrency}-{index}", endpoint=bench.proxy.url,
                                     queues=names, concurrency=concurrency, poll_for=poll_for)
                group.append((kind, concurrency, names, urls, worker))
        for *_, worker in group:
            worker.wait_started()
        time.sleep(poll_for + 1.5)  # past start-up: every queue is being watched
        start = bench.proxy.count()
        began = time.monotonic()
        time.sleep(s.idle_window)
        entries = bench.proxy.entries(start)
        window = time.monotonic() - began
        for kind, concurrency, names, urls, worker in group:
            worker.stop()
            mine = [e for e in entries if e[2] in names]
            per_minute = len(mine) * 60 / window
            per_queue_interval = []
            for name in names:
                times = sorted(e[0] for e in mine if e[2] == name and e[1] == "ReceiveMessage")
                if len(times) >= 2:
                    per_queue_interval.append((len(times) - 1) / ((times[-1] - times[0]) / 1000) * 60)
            result = {"requests_per_min": per_minute, "requests": len(mine), "window_s": window,
                      "receives_per_min_from_intervals": sum(per_queue_interval) if per_queue_interval else None,
                      "long_polls": sum(1 for e in mine if e[1] == "ReceiveMessage" and (e[3] or 0) > 0)}
            log(f"  idle {kind} c={concurrency} run {index + 1}: {per_minute:.1f} requests/min "
                f"({len(mine)} in {window:.1f}s, poll_for={poll_for})")
            runs[kind][concurrency].append(result)
            for url in urls:
                bench.sqs.delete(url)
    out: dict[str, Any] = {"poll_for": poll_for, "window_s": s.idle_window,
                           "target_per_min": 3 * 60 / poll_for + 2}
    for concurrency in concurrencies:
        out[f"c{concurrency}"] = summarize({k: runs[k][concurrency] for k in runs},
                                           ("requests_per_min", "receives_per_min_from_intervals"))
    return out


def wake(bench: Bench) -> dict[str, Any]:
    """Idle daemon (3 queues, poll_for=20): one message to the lowest-priority queue, send -> POST."""
    s = bench.settings
    runs: dict[str, list[dict[str, Any]]] = {"daemon": [], "baseline": []}
    rng = random.Random(6)
    for index in range(s.runs):
        for kind in ("daemon", "baseline"):
            names = [unique(f"wake-{kind}-{level}") for level in ("high", "mid", "low")]
            urls = [bench.sqs.create(name) for name in names]
            bench.sink.reset(0)
            worker = bench.worker(kind, f"wake-{kind}-{index}", queues=names, concurrency=50,
                                 poll_for=s.wake_poll_for)
            worker.wait_started()
            time.sleep(1.5)
            offset = bench.sink.clock_offset_ms()
            latencies = []
            for attempt in range(s.wake_tries):
                time.sleep(rng.uniform(0.3, 0.8))
                sent = time.time() * 1000
                bench.sqs.send_one(urls[-1], "wake")
                stats = bench.sink.wait(attempt + 1, timeout=s.wake_poll_for + 10)
                if stats["count"] < attempt + 1:
                    latencies.append(float("inf"))
                    break
                latencies.append(stats["last"] - offset - sent)
            worker.stop()
            for url in urls:
                bench.sqs.delete(url)
            result = {"p50_ms": percentile(latencies, 50), "p99_ms": percentile(latencies, 99),
                      "max_ms": max(latencies), "latencies_ms": [round(x, 2) for x in latencies]}
            log(f"  wake {kind} run {index + 1}: p50 {result['p50_ms']:.1f} ms, p99 {result['p99_ms']:.1f} ms")
            runs[kind].append(result)
    out = summarize(runs, ("p50_ms", "p99_ms"))
    for kind in runs:
        pooled = [x for run in runs[kind] for x in run["latencies_ms"]]
        out[kind]["pooled_p50_ms"] = percentile(pooled, 50)
        out[kind]["pooled_p99_ms"] = percentile(pooled, 99)
    out["tries"] = s.wake_tries
    out["poll_for"] = s.wake_poll_for
    return out


def priority(bench: Bench) -> dict[str, Any]:
    """Low backlog at concurrency 10; once it flows, a burst of high; count low starts that jump it."""
    s = bench.settings
    concurrency = s.priority_concurrency
    total = s.priority_low + s.priority_high
    runs: dict[str, list[dict[str, Any]]] = {"daemon": [], "baseline": []}
    for index in range(s.runs):
        for kind in ("daemon", "baseline"):
            high, low = unique(f"prio-{kind}-high"), unique(f"prio-{kind}-low")
            high_url, low_url = bench.sqs.create(high), bench.sqs.create(low)
            bench.sqs.send_many(low_url, s.priority_low, "low")
            bench.sink.reset(s.priority_delay_ms)
            worker = bench.worker(kind, f"prio-{kind}-{index}", queues=[high, low], concurrency=concurrency,
                                 max_messages=total)
            bench.sink.wait(min(300, s.priority_low // 4), timeout=60)
            offset = bench.sink.clock_offset_ms()
            batches = bench.sqs.send_many(high_url, s.priority_high, "high", threads=4)
            bench.sink.wait(total, timeout=120)
            code = worker.wait(30)
            if code is None:
                worker.stop()
            events = bench.sink.events()
            for url in (high_url, low_url):
                bench.sqs.delete(url)
            result = count_inversions(events, high, s.priority_high,
                                      [(at * 1000 + offset, n) for at, n in batches])
            log(f"  priority {kind} run {index + 1}: {result['inversions']} inversions "
                f"({result['low_between_first_and_last_high']} low starts between first and last high)")
            runs[kind].append(result)
    out = summarize(runs, ("inversions", "low_between_first_and_last_high", "high_span_ms"))
    out.update(concurrency=concurrency, low=s.priority_low, high=s.priority_high,
               sink_delay_ms=s.priority_delay_ms)
    return out


def count_inversions(events: list[tuple[float, str]], high: str, high_total: int,
                     sent: list[tuple[float, int]]) -> dict[str, Any]:
    """Low deliveries that started after the first high one while sent high messages were undelivered."""
    sent = sorted(sent)
    highs = [t for t, queue in events if queue == high]
    if not highs:
        return {"inversions": None, "low_between_first_and_last_high": None, "high_span_ms": None}
    first_high, last_high = highs[0], highs[-1]
    delivered_high = 0
    inversions = between = 0
    for at, queue in sorted(events):
        if queue == high:
            delivered_high += 1
            continue
        if at <= first_high or delivered_high >= high_total:
            continue
        between += 1
        sent_by = sum(n for done_at, n in sent if done_at <= at)
        if sent_by > delivered_high:
            inversions += 1
    return {"inversions": inversions, "low_between_first_and_last_high": between,
            "high_span_ms": last_high - first_high, "high_delivered": len(highs)}
