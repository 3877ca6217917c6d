"""How soon a worker answers: the startup kind (process start to first delivery: a queue with one message waiting,
the worker with --max-messages=1, timed from just before Popen to the sink's arrival, then to its exit; params: tries
(full, quick), poll_for), and the listen kind: workers started at once on their own empty queues, what they ask of
SQS over an idle window (fauxqs's counts), then how soon each wakes up to one message at a time while the others
are frozen (SIGSTOP).

params: workers {name: (Case, queues)}, poll_for, window (full, quick) s (0: no idle window), settle s, copies (run
`runs` copies of each worker in one round instead of one per round), stop_before_wake [names], wake [names], wake_at
(where the wake figures go: a format of name, side, rtt), wake_rtts, tries (full, quick), random_queue, round_trip
(time the SQS round trip with a raw ReceiveMessage and report the wake-up over it)."""

from __future__ import annotations

import http.client
import json
import random
import signal
import statistics
import subprocess
import sys
import time
from collections import Counter
from typing import Any

import harness
from drain import add_ratios
from figures import interleave, log, percentile, pool, spreads
from harness import unique
from session import Bench
from shapes import Case, Row, place

IDLE_KEYS = ("requests_per_min", "requests_per_queue_min", "max_queue_requests_per_min", "cpu_s_per_idle_min",
             "rss_mb", "peak_rss_mb")
WAKE_KEYS = ("p50_ms", "p99_ms", "max_ms", "after_send_p50_ms", "after_send_p99_ms", "sqs_round_trip_ms",
             "p50_over_round_trip_ms", "p99_over_round_trip_ms")

def raw_receive_rtt_ms(port: int, url: str, tries: int = 20) -> float:
    """Median round trip of an empty ReceiveMessage on the workers' port, no client library's CPU in it."""
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    body = json.dumps({"QueueUrl": url, "WaitTimeSeconds": 0, "MaxNumberOfMessages": 1}).encode()
    headers = {"Content-Type": "application/x-amz-json-1.0", "X-Amz-Target": "AmazonSQS.ReceiveMessage",
               "Authorization": "AWS4-HMAC-SHA256 Credential=x/20250101/us-east-1/sqs/aws4_request, "
                                "SignedHeaders=host, Signature=0"}
    samples = []
    for _ in range(tries + 2):
        began = time.perf_counter()
        connection.request("POST", "/", body=body, headers=headers)
        connection.getresponse().read()
        samples.append((time.perf_counter() - began) * 1000)
    connection.close()
    return statistics.median(samples[2:])

def wake_tries(bench: Bench, urls: list[str], tries: int, rng: random.Random, timeout: float,
               random_queue: bool = False) -> dict[str, list[Any]]:
    """One message at a time, 0.3-0.8 s apart, to the last (or a random) queue: ms to its arrival at the sink."""
    bench.sink.reset(0)
    offset = bench.sink.clock_offset_ms()
    out: dict[str, list[Any]] = {"latencies": [], "after_send": []}
    for attempt in range(tries):
        time.sleep(rng.uniform(0.3, 0.8))
        sent = time.time() * 1000
        bench.sqs.send_one(urls[rng.randrange(len(urls)) if random_queue else -1], "wake")
        answered = time.time() * 1000
        stats = bench.sink.wait(attempt + 1, timeout=timeout)
        if stats["count"] < attempt + 1:
            out["latencies"].append(float("inf"))
            out["after_send"].append(float("inf"))
            break
        arrival = stats["last"] - offset
        out["latencies"].append(arrival - sent)
        out["after_send"].append(arrival - answered)
    return out

def idle_window(bench: Bench, group: dict[str, tuple[list[str], Any]], window_s: float,
                poll_for: int) -> dict[str, dict[str, Any]]:
    """Each worker over an idle window: SQS requests per minute on its queues (fauxqs's counts), CPU, RSS."""
    counts0, cpu0 = bench.fauxqs.stats()["counts"], {key: worker.cpu() for key, (_, worker) in group.items()}
    began = time.monotonic()
    time.sleep(window_s)
    window, counts1 = time.monotonic() - began, bench.fauxqs.stats()["counts"]
    out = {}
    for key, (names, worker) in group.items():
        by_action: Counter[str] = Counter()
        per_queue = []
        for name in names:
            deltas = {a: n - counts0.get(name, {}).get(a, 0) for a, n in counts1.get(name, {}).items()}
            per_queue.append(sum(deltas.values()) * 60 / window)
            by_action.update({action: n for action, n in deltas.items() if n})
        cpu1 = worker.cpu()
        out[key] = {"requests_per_min": sum(per_queue), "requests_per_queue_min": sum(per_queue) / len(per_queue),
                    "max_queue_requests_per_min": max(per_queue), "by_action": dict(by_action), "window_s": window,
                    "cpu_s_per_idle_min": (cpu1 - cpu0[key]) * 60 / window if cpu1 and cpu0[key] is not None else None,
                    "rss_mb": (worker.status_kb("VmRSS") or 0) / 1024, "peak_rss_mb": (worker.status_kb("VmHWM") or 0)
                    / 1024, "expected_per_min": len(names) * 60 / poll_for}
    return out

def wake(bench: Bench, p: dict[str, Any], group: dict[str, tuple[list[str], list[str], Any]], name: str,
         rtt: float, rng: random.Random) -> dict[str, Any]:
    """Wake-ups of one worker with every other frozen."""
    others = [worker for key, (_, _, worker) in group.items() if key != name and worker.exit_code is None]
    for other in others:
        other.signal(signal.SIGSTOP)
    try:
        time.sleep(p["poll_for"] / 2 if rtt else p.get("before_wake", 0.5))  # a delay applies to polls begun after it
        tried = wake_tries(bench, group[name][1], p["tries"][bench.settings.quick], rng, p["poll_for"] + 10,
                           p.get("random_queue", False))
    finally:
        for other in others:
            other.signal(signal.SIGCONT)
    times, after = tried["latencies"], tried["after_send"]
    out = {"p50_ms": percentile(times, 50), "p99_ms": percentile(times, 99), "max_ms": max(times),
           "after_send_p50_ms": percentile(after, 50), "after_send_p99_ms": percentile(after, 99),
           "latencies_ms": [round(x, 2) for x in times]}
    if p.get("round_trip"):
        out["sqs_round_trip_ms"] = trip = raw_receive_rtt_ms(bench.fauxqs.port, group[name][1][0])
        out.update(p50_over_round_trip_ms=out["after_send_p50_ms"] - trip, p99_over_round_trip_ms=
                   out["after_send_p99_ms"] - trip)
    return out

def one_round(bench: Bench, row: Row, index: int, idle: dict[str, list[Any]], woken: dict[str, list[Any]]) -> None:
    p, copies = row.params, bench.settings.runs if row.params.get("copies") else 1
    group: dict[str, tuple[list[str], list[str], Any]] = {}
    for name, (case, queues) in p["workers"].items():
        for copy in range(copies):
            names = [unique(f"{row.name}-{copy}-{n:02d}") for n in range(queues)]  # priority order: last is lowest
            urls = [bench.sqs.create(queue) for queue in names]
            label = f"{row.name}-{name.replace('/', '-')}-{index}-{copy}"
            group[f"{name}#{copy}"] = (names, urls, bench.worker(case, label, names, poll_for=p["poll_for"]))
    try:
        for *_, worker in group.values():
            worker.wait_started(60)
        time.sleep(p.get("settle", 3.0))
        if p.get("window"):
            window = p["window"][bench.settings.quick]
            for key, figures in idle_window(bench, {k: (n, w) for k, (n, _, w) in group.items()}, window,
                                              p["poll_for"]).items():
                idle[key.partition("#")[0]].append(figures)
                log(f"  {row.name} idle {key} run {index + 1}: {figures['requests_per_min']:.1f} requests/min "
                    f"{figures['by_action']}, {figures['cpu_s_per_idle_min'] or 0:.3f} CPU s/min")
        for key, (*_, worker) in group.items():
            if key.partition("#")[0] in p.get("stop_before_wake", ()):
                worker.stop()
        for rtt in p.get("wake_rtts", (0,)):
            bench.fauxqs.set_delay(rtt)
            for key in [k for k in group if k.partition("#")[0] in p.get("wake", ())]:
                result = wake(bench, p, group, key, rtt, random.Random(f"{index}-{key}-{rtt}"))
                woken[f"{key.partition('#')[0]}@{rtt}"].append(result)
                log(f"  {row.name} wake {key} +{rtt} ms run {index + 1}: p50 {result['p50_ms']:.1f} ms, p99 "
                    f"{result['p99_ms']:.1f} ms (from the send's answer {result['after_send_p99_ms']:.1f})")
    finally:
        bench.fauxqs.set_delay(bench.fauxqs.default_delay_ms)
        for names, urls, worker in group.values():
            worker.stop()
            bench.drop_queues(names, urls)

def run(bench: Bench, row: Row) -> dict[str, Any]:
    p = row.params
    idle: dict[str, list[Any]] = {name: [] for name in p["workers"]}
    woken: dict[str, list[Any]] = {f"{k}@{rtt}": [] for k in p.get("wake", ()) for rtt in p.get("wake_rtts", (0,))}
    for index in range(1 if p.get("copies") else bench.settings.runs):
        one_round(bench, row, index, idle, woken)
    block: dict[str, Any] = dict(p.get("block", {}))
    for name, results in idle.items() if p.get("window") else ():
        figures = {**spreads(results, IDLE_KEYS), "by_action_last_run": results[-1]["by_action"]}
        place(block, name, figures)
    for key, results in woken.items():
        name, _, rtt = key.partition("@")
        figures = spreads(results, WAKE_KEYS)
        pool(figures, results)
        place(block, p["wake_at"].format(name=name, side=name.rpartition("/")[2], rtt=rtt), figures)
    if row.ratio:
        add_ratios(block, [*p["workers"], *(p["wake_at"].format(name=n, side=n.rpartition("/")[2], rtt=0)
                                           for n in p.get("wake", ()))])
    return block

START_KEYS = ("first_delivery_s", "exit_s", "first_delivery_to_exit_s", "cpu_s_to_exit", "peak_rss_mb")

def start_once(bench: Bench, case: Case, label: str, poll_for: int) -> dict[str, Any]:
    name = unique(label)
    url = bench.sqs.create(name)
    bench.sqs.send_one(url, "startup")
    bench.sink.reset(0)
    offset = bench.sink.clock_offset_ms()
    popen_ms = time.time() * 1000
    worker = bench.worker(case, label, [name], poll_for=poll_for, max_messages=1)
    stats = bench.sink.wait(1, timeout=30)
    exit_ms = None
    deadline = time.monotonic() + 40
    while exit_ms is None and time.monotonic() < deadline:
        exit_ms = time.time() * 1000 - popen_ms if worker.poll() is not None else time.sleep(0.002)
    if exit_ms is None:
        worker.kill()
    bench.sqs.delete(url)
    if not stats["count"]:
        raise RuntimeError(f"{label}: no delivery within 30 s; see {worker.log_path}")
    first_ms, usage = stats["first"] - offset - popen_ms, worker.rusage
    return {"first_delivery_s": first_ms / 1000, "exit_s": exit_ms / 1000 if exit_ms is not None else None,
            "first_delivery_to_exit_s": (exit_ms - first_ms) / 1000 if exit_ms is not None else None,
            "cpu_s_to_exit": usage.ru_utime + usage.ru_stime if usage is not None else None,
            "peak_rss_mb": usage.ru_maxrss / 1024 if usage is not None else None, "exit_code": worker.exit_code}

def startup(bench: Bench, row: Row) -> dict[str, Any]:
    tries = row.params["tries"][bench.settings.quick]
    # Bytecode as `pip install` leaves it: without it every start compiles the package again (about 40 ms here).
    subprocess.run([sys.executable, "-m", "compileall", "-q", str(harness.daemon_root() / "workerless_gevent")],
                   check=True)
    runs = interleave(bench.settings.runs * tries, row.cases, lambda name, i: start_once(
        bench, row.cases[name], f"startup-{name}-{i // tries}-{i % tries}", row.params["poll_for"]),
        lambda name, i, r: (f"startup {name} run {i // tries + 1}.{i % tries + 1}: first delivery "
                            f"{r['first_delivery_s']:.3f} s, exit {r['exit_s'] or float('nan'):.3f} s, CPU "
                            f"{r['cpu_s_to_exit'] or 0:.3f} s"))
    block: dict[str, Any] = {**row.params.get("block", {}), "tries": len(next(iter(runs.values())))}
    for name, results in runs.items():
        place(block, name, spreads(results, START_KEYS))
    add_ratios(block, list(row.cases))
    return block
