"""The scenarios that count SQS requests or time single deliveries: requests, idle, wake, priority.

requests and idle count each worker's SQS requests through the counting proxy (bench/sqs_proxy.mjs); wake times one
message from send to POST; priority counts low-priority deliveries that jump a burst of high-priority ones.
"""

from __future__ import annotations

import random
import statistics
import time
from typing import Any

from figures import compare, latencies, pool
from harness import unique
from scenario import Block, Check, Row, Scenario, check, compared, interleave

SIDES = ("daemon", "baseline")


def requests(bench: Any) -> Block:
    """SQS requests per delivered message on a backlog, counted by the proxy (batch_size 10)."""
    s, concurrency = bench.settings, 50

    def one(kind: str, i: int) -> dict[str, Any]:
        name, url = bench.backlog(f"req-{kind}-{i}", s.request_messages)
        start = bench.proxy.count()
        # the daemon with --drain: it exits once the queue comes back empty from a long poll
        worker = bench.worker(kind, f"req-{kind}-{i}", endpoint=bench.proxy.url, queues=[name], concurrency=concurrency,
                              drain=kind == "daemon", max_messages=None if kind == "daemon" else s.request_messages)
        code = worker.wait(60 + s.request_messages / 20)
        code = worker.stop() if code is None else code
        delivered = bench.sink.stats()["count"]
        entries = [e for e in bench.proxy.entries(start) if e[2] == name]
        bench.sqs.delete(url)
        by_action: dict[str, int] = {}
        for entry in entries:
            by_action[entry[1]] = by_action.get(entry[1], 0) + 1
        setup = sum(by_action.get(a, 0) for a in ("GetQueueUrl", "GetQueueAttributes"))
        deletes = [e[4] for e in entries if e[1] == "DeleteMessageBatch" and e[4]]
        return {"delivered": delivered, "requests": len(entries), "requests_per_msg": len(entries) / max(1, delivered),
                "requests_per_msg_without_startup": (len(entries) - setup) / max(1, delivered),
                "mean_delete_batch": statistics.mean(deletes) if deletes else None, "by_action": by_action,
                "exit_code": code}

    runs = interleave(s.runs, SIDES, one, lambda kind, i, r: (
        f"requests {kind} run {i + 1}: {r['requests']} requests for {r['delivered']} messages = "
        f"{r['requests_per_msg']:.3f}/msg {r['by_action']}"))
    out = compare(runs, ("requests_per_msg", "requests_per_msg_without_startup", "mean_delete_batch"))
    out["by_action_last_run"] = {kind: runs[kind][-1]["by_action"] for kind in runs}
    return {**out, "messages": s.request_messages, "concurrency": concurrency}


def requests_rows(block: Block) -> list[Row]:
    return [compared("SQS requests per message (backlog)", block, "requests_per_msg", 3),
            compared("  mean DeleteMessageBatch size", block, "mean_delete_batch", 2)]


def requests_checks(block: Block) -> list[Check]:
    return [check("SQS requests per message, backlog, batch_size 10", block["daemon"]["requests_per_msg"]["median"],
                  "<= 0.22", lambda v: v <= 0.22)]


# ---------------------------------------------------------------- idle

IDLE_CONCURRENCY = (10, 50, 500)


def idle(bench: Any) -> Block:
    """3 empty queues; every worker runs at once, each on its own queues; counted by the proxy."""
    s, poll_for = bench.settings, bench.settings.idle_poll_for
    cases = [(kind, c) for kind in SIDES for c in IDLE_CONCURRENCY]
    runs: dict[tuple[str, int], list[dict[str, Any]]] = {case: [] for case in cases}
    for index in range(s.runs):
        group = {}
        for kind, c in cases:
            names = [unique(f"idle-{kind}-c{c}-{letter}") for letter in "abc"]
            urls = [bench.sqs.create(name) for name in names]
            group[(kind, c)] = (names, urls, bench.worker(kind, f"idle-{kind}-c{c}-{index}", endpoint=bench.proxy.url,
                                                          queues=names, concurrency=c, poll_for=poll_for))
        for *_, worker in group.values():
            worker.wait_started()
        time.sleep(poll_for + 1.5)  # past start-up: every queue is being watched
        start, began = bench.proxy.count(), time.monotonic()
        time.sleep(s.idle_window)
        entries, window = bench.proxy.entries(start), time.monotonic() - began
        for (kind, c), (names, urls, worker) in group.items():
            worker.stop()
            mine = [e for e in entries if e[2] in names]
            rates = []
            for name in names:
                times = sorted(e[0] for e in mine if e[2] == name and e[1] == "ReceiveMessage")
                if len(times) >= 2:
                    rates.append((len(times) - 1) / ((times[-1] - times[0]) / 1000) * 60)
            runs[(kind, c)].append({"requests_per_min": len(mine) * 60 / window, "requests": len(mine),
                                    "window_s": window, "receives_per_min_from_intervals": sum(rates) if rates else None,
                                    "long_polls": sum(1 for e in mine if e[1] == "ReceiveMessage" and (e[3] or 0) > 0)})
            bench.drop_queues([], urls)
    out: Block = {"poll_for": poll_for, "window_s": s.idle_window, "target_per_min": 3 * 60 / poll_for + 2}
    for c in IDLE_CONCURRENCY:
        out[f"c{c}"] = compare({kind: runs[(kind, c)] for kind in SIDES},
                               ("requests_per_min", "receives_per_min_from_intervals"))
    return out


def idle_rows(block: Block) -> list[Row]:
    return [compared(f"idle requests/min c={c} (poll_for={block['poll_for']})", block[f"c{c}"], "requests_per_min")
            for c in IDLE_CONCURRENCY]


def idle_checks(block: Block) -> list[Check]:
    return [check(f"idle requests/min, 3 queues, poll_for={block['poll_for']}, c={c} (worst run)",
                  block[f"c{c}"]["daemon"]["requests_per_min"]["max"], f"<= {block['target_per_min']:g}",
                  lambda v, t=block["target_per_min"]: v <= t) for c in IDLE_CONCURRENCY]


# ---------------------------------------------------------------- wake


def wake_tries(bench: Any, urls: list[str], tries: int, rng: random.Random, timeout: float,
               random_queue: bool = False) -> dict[str, list[Any]]:
    """One message at a time, 0.3-0.8 s apart, to the last queue (or a random one): ms from just before SendMessage
    (`latencies`) and from its answer (`after_send`) to the arrival at the sink; inf once one never came."""
    bench.sink.reset(0)
    offset = bench.sink.clock_offset_ms()
    out: dict[str, list[Any]] = {"latencies": [], "after_send": [], "sends": [], "hit": []}
    for attempt in range(tries):
        time.sleep(rng.uniform(0.3, 0.8))
        queue = rng.randrange(len(urls)) if random_queue else len(urls) - 1
        out["hit"].append(queue)
        sent = time.time() * 1000
        bench.sqs.send_one(urls[queue], "wake")
        answered = time.time() * 1000
        stats = bench.sink.wait(attempt + 1, timeout=timeout)
        if stats["count"] < attempt + 1:
            out["latencies"].append(float("inf"))
            out["after_send"].append(float("inf"))
            break
        arrival = stats["last"] - offset
        out["latencies"].append(arrival - sent)
        out["after_send"].append(arrival - answered)
        out["sends"].append(answered - sent)
    return out


def wake(bench: Any) -> Block:
    """Idle worker (3 queues, poll_for=20): one message to the lowest-priority queue, send -> POST."""
    s, rng = bench.settings, random.Random(6)

    def one(kind: str, i: int) -> dict[str, Any]:
        names = [unique(f"wake-{kind}-{level}") for level in ("high", "mid", "low")]
        urls = [bench.sqs.create(name) for name in names]
        bench.sink.reset(0)
        worker = bench.worker(kind, f"wake-{kind}-{i}", queues=names, concurrency=50, poll_for=s.wake_poll_for)
        worker.wait_started()
        time.sleep(1.5)
        tries = wake_tries(bench, urls, s.wake_tries, rng, s.wake_poll_for + 10)
        worker.stop()
        bench.drop_queues([], urls)
        return latencies(tries["latencies"])

    runs = interleave(s.runs, SIDES, one, lambda kind, i, r: (
        f"wake {kind} run {i + 1}: p50 {r['p50_ms']:.1f} ms, p99 {r['p99_ms']:.1f} ms"))
    out = compare(runs, ("p50_ms", "p99_ms"))
    for kind in runs:
        pool(out[kind], runs[kind])
    return {**out, "tries": s.wake_tries, "poll_for": s.wake_poll_for}


def wake_rows(block: Block) -> list[Row]:
    return [compared("wake latency p50 ms", block, "p50_ms"), compared("wake latency p99 ms", block, "p99_ms")]


def wake_checks(block: Block) -> list[Check]:
    return [check("wake latency p99, lowest-priority queue", block["daemon"]["p99_ms"]["median"], "< 50 ms",
                  lambda v: v < 50)]


# ---------------------------------------------------------------- priority


def priority(bench: Any) -> Block:
    """Low backlog at concurrency 10; once it flows, a burst of high; count low starts that jump it."""
    s = bench.settings
    total = s.priority_low + s.priority_high

    def one(kind: str, i: int) -> dict[str, Any]:
        high = unique(f"prio-{kind}-high")
        high_url = bench.sqs.create(high)
        low, low_url = bench.backlog(f"prio-{kind}-low", s.priority_low, s.priority_delay_ms, "low")
        worker = bench.worker(kind, f"prio-{kind}-{i}", queues=[high, low], concurrency=s.priority_concurrency,
                              max_messages=total)
        bench.sink.wait(min(300, s.priority_low // 4), timeout=60)
        offset = bench.sink.clock_offset_ms()
        batches = bench.sqs.send_many(high_url, s.priority_high, "high", threads=4)
        bench.sink.wait(total, timeout=120)
        if worker.wait(30) is None:
            worker.stop()
        events = bench.sink.events()
        bench.drop_queues([], [high_url, low_url])
        return count_inversions(events, high, s.priority_high, [(at * 1000 + offset, n) for at, n in batches])

    runs = interleave(s.runs, SIDES, one, lambda kind, i, r: (
        f"priority {kind} run {i + 1}: {r['inversions']} inversions ({r['low_between_first_and_last_high']} low "
        f"starts between first and last high)"))
    out = compare(runs, ("inversions", "low_between_first_and_last_high", "high_span_ms"))
    return {**out, "concurrency": s.priority_concurrency, "low": s.priority_low, "high": s.priority_high,
            "sink_delay_ms": s.priority_delay_ms}


def count_inversions(events: list[tuple[float, str]], high: str, high_total: int,
                     sent: list[tuple[float, int]]) -> dict[str, Any]:
    """Low deliveries that started after the first high one while sent high messages were undelivered."""
    sent = sorted(sent)
    highs = [t for t, queue in events if queue == high]
    if not highs:
        return {"inversions": None, "low_between_first_and_last_high": None, "high_span_ms": None}
    delivered_high = inversions = between = 0
    for at, queue in sorted(events):
        if queue == high:
            delivered_high += 1
        elif at > highs[0] and delivered_high < high_total:
            between += 1
            inversions += sum(n for done_at, n in sent if done_at <= at) > delivered_high
    return {"inversions": inversions, "low_between_first_and_last_high": between, "high_span_ms": highs[-1] - highs[0],
            "high_delivered": len(highs)}


def priority_rows(block: Block) -> list[Row]:
    return [compared("priority inversions (c=10)", block, "inversions", 0),
            compared("  low starts between first/last high", block, "low_between_first_and_last_high", 0)]


def priority_checks(block: Block) -> list[Check]:
    return [check("priority inversions under load, c=10 (worst run)", block["daemon"]["inversions"]["max"], "0",
                  lambda v: v == 0)]


SCENARIOS = (Scenario("requests", requests, requests_rows, requests_checks),
             Scenario("idle", idle, idle_rows, idle_checks), Scenario("wake", wake, wake_rows, wake_checks),
             Scenario("priority", priority, priority_rows, priority_checks))
