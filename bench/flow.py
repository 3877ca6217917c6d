#!/usr/bin/env python3
"""The flow-control scenarios: rate accuracy, backpressure (AIMD) convergence, a capped high queue.

    python bench/flow.py              2 runs of each (about 1.5 min)
    python bench/flow.py --quick      1 run, shorter backlogs (about 30-40 s)
    python bench/flow.py --runs=N --json=PATH --daemon-bin=PATH   (JSON: bench/results/flow-latest[-quick].json)

bench/run.py runs them too (`--only=flow`, through SCENARIOS and RUNNERS below). Everything is on
127.0.0.1: fauxqs (bench/harness.py), the real bin/workerless on a TOML file written here
(bench/results/conf/flow-*.toml), and the app: a ThreadingHTTPServer in this process that records
every request (arrival, answer, queue, status) on the runner's monotonic clock, keeps the in-flight
count per queue, sleeps `delay` before answering 200, and with a capacity N answers 429 without
Retry-After to a request that arrives while N are in flight. Every figure is a ratio to the
configured rate, capacity or free slots.

* rate      one queue, `rate_limit` 10, 50 and 200 on the target (concurrency 20, the app answers at
            once), a backlog of burst + rate x `steady_s`. Steady rate: deliveries per second from the
            later of (first arrival + 1.5 s) and the moment the burst is spent (arrivals so far >=
            burst + rate x elapsed) to the last arrival, / rate_limit. Bound: the most arrivals in any
            10 s window (the whole run when it is shorter) and in any 1 s window, / (rate x W + burst).
* aimd      an app that takes N = 8 at once (50 ms each) and answers 429 above that; concurrency 50,
            overload "backpressure" (the default), max_retries 3 with a dead-letter queue,
            error_visibility_timeout 1. In flight at the app = requests it accepted and has not answered
            (so at most N). Moving average = the time-weighted mean of that over the trailing 1 s
            (from the first request while less than 1 s has passed), sampled every 50 ms. Convergence
            time = from the first request to the first sample at which the app has been at N at least
            once and from which the moving average stays >= 0.7 N until 95 % of the messages were
            delivered (the drain's tail is left out); 0.05 s means it never fell below. Also: the
            mean in flight / N over the second half of [first request, 95 % delivered], the lowest
            moving average there and the share of it during which the app had nothing in flight,
            the share of 429 answers (and their number in the first second: the overshoot at the
            start, as large as what the first receives bring), lost (messages never answered 2xx
            and not left in the queue after the daemon stopped: must be 0), dead-lettered (what the
            dead-letter queue holds: must be 0). The limit's sawtooth (halved at N + 1, one more per
            `limit` successes) averages about 0.75 N.
            The daemon's own view, from its /status every 100 ms over the same second half: its
            adaptive limit (mean / N, and the lowest) and its deliveries in flight (mean / N).
* priority  strategy "priority", concurrency 10, a high queue with max_concurrency 3 and a backlog, a
            low queue with a backlog, the app answers after 50 ms. While high is capped (from its
            first arrival + 0.5 s to its last arrival) the time-weighted mean of low's in flight /
            (concurrency - 3): the low queue's share of the slots high may not use (expect ~1.0);
            the same over high's mean in flight / 3 (each slot loses the same gap between an answer
            and its next request; this ratio leaves that out); high's peak in flight (must be <= 3).
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import platform
import sys
import threading
import time
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import harness  # noqa: E402
from harness import RESULTS, Sqs, Worker, free_port, log, spread, unique, worker_env  # noqa: E402

SCENARIOS = ("flow",)
RATES = (10, 50, 200)


class FlowSettings:
    def __init__(self, quick: bool) -> None:
        self.steady_s = 5.0 if quick else 8.0  # the rate backlog: burst + rate x steady_s
        self.rate_concurrency = 20
        self.capacity = 8
        self.aimd_concurrency = 50
        self.aimd_messages = 600 if quick else 1000
        self.app_delay = 0.05
        self.threshold = 0.7  # of the capacity, for the convergence time
        self.priority_concurrency = 10
        self.high_cap = 3
        self.high_messages = 200 if quick else 300  # 3 at a time, 50 ms each: 3.3 or 5 s
        self.low_messages = 900 if quick else 1200  # enough to keep the 7 other slots busy meanwhile


# ---------------------------------------------------------------- the app


@dataclass
class Request:
    arrived: float
    answered: float
    queue: str
    status: int
    number: int


class App:
    """The local app, in this process: records every request; optional capacity (429 above it)."""

    def __init__(self, delay: float = 0.0, capacity: int | None = None) -> None:
        self.delay, self.capacity = delay, capacity
        self.lock = threading.Lock()
        self.requests: list[Request] = []
        self.accepted = 0
        self.now: dict[str, int] = {}
        self.peak: dict[str, int] = {}
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, kwargs={"poll_interval": 0.1}, daemon=True).start()

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        app = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_POST(self) -> None:  # noqa: N802 - http.server's name
                arrived = time.monotonic()
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                status = app.handle(arrived, self.headers.get("X-Aws-Sqsd-Queue", ""), body)
                self.send_response(status)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, *args: Any) -> None:
                pass

        return Handler

    def handle(self, arrived: float, queue: str, body: bytes) -> int:
        try:
            number = int(json.loads(body)["n"])
        except (ValueError, KeyError, TypeError):
            number = -1
        with self.lock:
            if self.capacity is not None and self.accepted >= self.capacity:
                self.requests.append(Request(arrived, time.monotonic(), queue, 429, number))
                return 429
            self.accepted += 1
            self.now[queue] = self.now.get(queue, 0) + 1
            self.peak[queue] = max(self.peak.get(queue, 0), self.now[queue])
        if self.delay:
            time.sleep(self.delay)
        with self.lock:
            self.accepted -= 1
            self.now[queue] -= 1
            self.requests.append(Request(arrived, time.monotonic(), queue, 200, number))
        return 200

    def ok(self, queue: str | None = None) -> list[Request]:
        with self.lock:
            return [r for r in self.requests if r.status == 200 and (queue is None or r.queue == queue)]

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def mean_in_flight(requests: list[Request], start: float, end: float) -> float:
    """Time-weighted mean of the requests in flight at the app over [start, end]."""
    if end <= start:
        return 0.0
    busy = sum(max(0.0, min(r.answered, end) - max(r.arrived, start)) for r in requests)
    return busy / (end - start)


def idle_share(requests: list[Request], start: float, end: float) -> float:
    """The share of [start, end] during which the app had nothing in flight."""
    covered, reach = 0.0, start
    for r in sorted(requests, key=lambda r: r.arrived):
        begin, finish = max(r.arrived, reach), min(r.answered, end)
        if finish > begin:
            covered += finish - begin
        reach = max(reach, min(r.answered, end))
    return 1 - covered / (end - start) if end > start else 0.0


def most_in_window(arrivals: list[float], seconds: float) -> int:
    """The most arrivals in any window [t, t + seconds) that starts at an arrival."""
    best, last = 0, 0
    for first, moment in enumerate(arrivals):
        while last < len(arrivals) and arrivals[last] < moment + seconds:
            last += 1
        best = max(best, last - first)
    return best


# ---------------------------------------------------------------- the daemon


def toml_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return json.dumps(value) if isinstance(value, str) else str(value)


def start_daemon(bench: Any, label: str, *, concurrency: int, queues: list[dict[str, Any]],
                 target: dict[str, Any], strategy: str = "priority", status_port: int | None = None) -> Worker:
    """bin/workerless on a config file written here (the flow-control keys have no flags), started."""
    lines = [f"concurrency = {concurrency}", "shutdown_timeout = 10", "", "[polling]",
             f'strategy = "{strategy}"', "poll_for = 1", "batch_size = 10", ""]
    for queue in queues:
        lines += ["[[queues]]", *(f"{key} = {toml_value(value)}" for key, value in queue.items()), ""]
    lines += ["[targets.default]", 'type = "http"', *(f"{key} = {toml_value(value)}" for key, value in target.items())]
    if status_port is not None:
        lines += ["", "[status]", f'listen = "127.0.0.1:{status_port}"']
    path = RESULTS / "conf" / f"{label}.toml"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join(lines) + "\n")
    argv = [sys.executable, str(harness.DAEMON_BIN), "-c", str(path)]
    worker = Worker("daemon", label, argv, worker_env(bench.fauxqs.url), cwd=harness.DAEMON_BIN.resolve().parent.parent)
    bench.workers.append(worker)
    worker.start().wait_started(60)
    return worker


class LimitSampler:
    """The daemon's own view of its target (/status: the adaptive limit and the in-flight count) every 100 ms."""

    def __init__(self, port: int) -> None:
        self.port = port
        self.samples: list[tuple[float, int, int]] = []  # (monotonic, limit, in_flight)
        self.stopping = threading.Event()
        self.thread = threading.Thread(target=self._sample, daemon=True)
        self.thread.start()

    def _sample(self) -> None:
        connection = http.client.HTTPConnection("127.0.0.1", self.port, timeout=5)
        while not self.stopping.wait(0.1):
            try:
                connection.request("GET", "/status")
                target = json.loads(connection.getresponse().read())["targets"][0]
                self.samples.append((time.monotonic(), int(target["limit"]), int(target["in_flight"])))
            except (OSError, http.client.HTTPException, ValueError, KeyError, IndexError):
                connection.close()

    def stop(self) -> list[tuple[float, int, int]]:
        self.stopping.set()
        self.thread.join(5)
        return self.samples


def wait_for(condition: Any, timeout: float, worker: Worker) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return True
        if worker.poll() is not None:
            raise RuntimeError(f"{worker.label} exited {worker.exit_code}; see {worker.log_path}")
        time.sleep(0.05)
    return False


# ---------------------------------------------------------------- scenarios


def rate_run(bench: Any, rate: int, label: str) -> dict[str, Any]:
    s: FlowSettings = bench.flow_settings
    burst, messages = rate, int(rate + rate * s.steady_s)
    url = bench.sqs.create(name := unique(label))
    bench.sqs.send_many(url, messages, "rate")
    app = App()
    try:
        worker = start_daemon(bench, label, concurrency=s.rate_concurrency, queues=[{"name": name}],
                              target={"url": f"{app.url}/", "rate_limit": rate})
        if not wait_for(lambda: len(app.ok()) >= messages, messages / rate + 30, worker):
            raise RuntimeError(f"{label}: {len(app.ok())} of {messages} delivered")
        worker.stop()
        arrivals = sorted(r.arrived for r in app.ok())
    finally:
        app.stop()
        bench.sqs.delete(url)
    t0 = arrivals[0]
    # The burst is spent once the arrivals so far are all the tokens there were (never: slower than the rate).
    spent = next((t for i, t in enumerate(arrivals) if i + 1 >= burst + rate * (t - t0)), t0)
    steady = [t for t in arrivals if t >= max(t0 + 1.5, spent)]
    steady_rate = (len(steady) - 1) / (steady[-1] - steady[0]) if len(steady) > 2 else 0.0
    span = arrivals[-1] - t0
    return {"rate_limit": rate, "messages": messages, "run_s": span, "burst_spent_after_s": spent - t0,
            "steady_per_s": steady_rate, "steady_ratio": steady_rate / rate, "steady_deliveries": len(steady),
            "max_10s": (most := most_in_window(arrivals, 10.0)), "max_10s_ratio": most / (rate * 10 + burst),
            "window_10s_is_whole_run": span < 10.0,
            "max_1s": (most := most_in_window(arrivals, 1.0)), "max_1s_ratio": most / (rate + burst)}


def convergence(ok: list[Request], t0: float, end: float, capacity: int, threshold: float) -> float | None:
    """Seconds from t0 to the first 50 ms sample from which the trailing-1 s mean in flight stays >= threshold x
    capacity until `end`, once the app has been at capacity (None: never)."""
    peak_at = min((r.arrived for r in ok if sum(1 for o in ok if o.arrived <= r.arrived < o.answered) >= capacity),
                  default=None)
    if peak_at is None:
        return None
    samples = [t0 + 0.05 * k for k in range(1, int((end - t0) / 0.05) + 1)]
    good = [mean_in_flight(ok, max(t0, t - 1.0), t) >= threshold * capacity for t in samples]
    found = None
    for t, fine in zip(reversed(samples), reversed(good)):
        if not fine:
            break
        found = t
    if found is None:
        return None
    return max(found, peak_at) - t0


def aimd_run(bench: Any, label: str) -> dict[str, Any]:
    s: FlowSettings = bench.flow_settings
    messages = s.aimd_messages
    url, dead_url = bench.sqs.create(name := unique(label)), bench.sqs.create(dead := unique(label + "-dlq"))
    bench.sqs.send_many(url, messages, "aimd")
    app, port = App(s.app_delay, s.capacity), free_port()
    try:
        worker = start_daemon(bench, label, concurrency=s.aimd_concurrency, status_port=port,
                              queues=[{"name": name, "max_retries": 3, "dead_letter_queue": dead,
                                       "error_visibility_timeout": 1}],
                              target={"url": f"{app.url}/", "overload": "backpressure"})
        sampler = LimitSampler(port)
        wait_for(lambda: len({r.number for r in app.ok()}) >= messages, 90, worker)
        limits = sampler.stop()
        worker.stop()  # then what is left is what was never deleted, visible or not
        left, dead_lettered = bench.sqs.left(url), bench.sqs.left(dead_url)
        with app.lock:
            requests, peak = list(app.requests), max(app.peak.values(), default=0)
    finally:
        app.stop()
        bench.sqs.delete(url)
        bench.sqs.delete(dead_url)
    figures = aimd_figures(requests, messages, s.capacity, s.threshold)
    middle, end = figures.pop("second_half")
    late = [(limit, in_flight) for at, limit, in_flight in limits if middle <= at < end]
    if late:  # the daemon's view: its adaptive limit and its deliveries in flight, sampled
        figures["limit_mean_second_half_ratio"] = sum(limit for limit, _ in late) / len(late) / s.capacity
        figures["limit_min_second_half"] = min(limit for limit, _ in late)
        figures["daemon_in_flight_mean_second_half_ratio"] = sum(n for _, n in late) / len(late) / s.capacity
    return {"messages": messages, "capacity": s.capacity, "concurrency": s.aimd_concurrency, "peak_in_flight": peak,
            **figures, "left_in_queue": left, "lost": max(0, figures["never_answered_2xx"] - left),
            "dead_lettered": dead_lettered}


def aimd_figures(requests: list[Request], messages: int, capacity: int, threshold: float) -> dict[str, Any]:
    ok = sorted((r for r in requests if r.status == 200), key=lambda r: r.answered)
    first_ok: dict[int, float] = {}
    for r in ok:
        first_ok.setdefault(r.number, r.answered)
    t0 = min(r.arrived for r in requests)
    done = sorted(first_ok.values())
    end = done[int(0.95 * messages) - 1] if len(done) >= 0.95 * messages else ok[-1].answered
    middle = (t0 + end) / 2
    busy = [r for r in requests if r.status == 429]
    samples = (middle + 0.05 * k for k in range(int((end - middle) / 0.05) + 1))
    moving = [mean_in_flight(ok, t - 1.0, t) for t in samples]
    second_half = [r for r in requests if middle <= r.arrived < end]
    return {"run_s": max(r.answered for r in requests) - t0, "to_95_percent_s": end - t0,
            "convergence_s": convergence(ok, t0, end, capacity, threshold),
            "mean_in_flight_second_half": mean_in_flight(ok, middle, end),
            "mean_in_flight_second_half_ratio": mean_in_flight(ok, middle, end) / capacity,
            "moving_average_min_second_half_ratio": min(moving) / capacity,
            "app_idle_share_second_half": idle_share(ok, middle, end),
            "requests": len(requests), "busy_429": len(busy), "busy_share": len(busy) / len(requests),
            "busy_429_first_second": sum(1 for r in busy if r.arrived < t0 + 1.0),
            "busy_share_second_half": sum(1 for r in second_half if r.status == 429) / max(1, len(second_half)),
            "delivered": len(first_ok), "duplicates": len(ok) - len(first_ok),
            "never_answered_2xx": messages - len(first_ok), "second_half": (middle, end)}


def priority_run(bench: Any, label: str) -> dict[str, Any]:
    s: FlowSettings = bench.flow_settings
    high, low = unique(label + "-high"), unique(label + "-low")
    high_url, low_url = bench.sqs.create(high), bench.sqs.create(low)
    bench.sqs.send_many(high_url, s.high_messages, "high")
    bench.sqs.send_many(low_url, s.low_messages, "low")
    app = App(s.app_delay)
    try:
        worker = start_daemon(bench, label, concurrency=s.priority_concurrency, strategy="priority",
                              queues=[{"name": high, "max_concurrency": s.high_cap}, {"name": low}],
                              target={"url": f"{app.url}/"})
        if not wait_for(lambda: len(app.ok(high)) >= s.high_messages, s.high_messages / 10 + 30, worker):
            raise RuntimeError(f"{label}: {len(app.ok(high))} of {s.high_messages} high messages delivered")
        worker.stop()
        high_ok, low_ok, peak = app.ok(high), app.ok(low), dict(app.peak)
    finally:
        app.stop()
        bench.sqs.delete(high_url)
        bench.sqs.delete(low_url)
    start, end = min(r.arrived for r in high_ok) + 0.5, max(r.arrived for r in high_ok)
    free = s.priority_concurrency - s.high_cap
    low_mean, high_mean = mean_in_flight(low_ok, start, end), mean_in_flight(high_ok, start, end)
    return {"window_s": end - start, "low_mean_in_flight": low_mean, "low_share_of_free_slots": low_mean / free,
            "high_mean_in_flight": high_mean, "high_share_of_cap": high_mean / s.high_cap,
            "low_share_relative_to_high": (low_mean / free) / (high_mean / s.high_cap) if high_mean else None,
            "high_peak_in_flight": peak.get(high, 0), "low_peak_in_flight": peak.get(low, 0),
            "low_delivered_in_window": sum(1 for r in low_ok if start <= r.arrived < end),
            "low_left_when_high_done": s.low_messages - len(low_ok)}


def run(bench: Any) -> dict[str, Any]:
    """Every flow scenario `bench.settings.runs` times; figures as spreads over the runs."""
    s = bench.flow_settings = FlowSettings(bench.settings.quick)
    runs: dict[str, list[dict[str, Any]]] = {f"rate_{rate}": [] for rate in RATES}
    runs.update(aimd=[], priority=[])
    for index in range(bench.settings.runs):
        for rate in RATES:
            result = rate_run(bench, rate, f"flow-rate{rate}-{index}")
            runs[f"rate_{rate}"].append(result)
            log(f"  flow rate_limit {rate}/s run {index + 1}: steady {result['steady_per_s']:.2f}/s "
                f"(x{result['steady_ratio']:.3f}); most in 10 s {result['max_10s']} (x{result['max_10s_ratio']:.3f} of "
                f"10r+burst), in 1 s {result['max_1s']} (x{result['max_1s_ratio']:.3f} of r+burst)")
        result = aimd_run(bench, f"flow-aimd-{index}")
        runs["aimd"].append(result)
        converged = result["convergence_s"]
        log(f"  flow aimd run {index + 1}: converged in {'never' if converged is None else f'{converged:.2f} s'}, "
            f"mean in flight x{result['mean_in_flight_second_half_ratio']:.3f} of N={s.capacity} (second half), "
            f"429 share {result['busy_share']:.3f}, lost {result['lost']}, dead-lettered {result['dead_lettered']}")
        result = priority_run(bench, f"flow-priority-{index}")
        runs["priority"].append(result)
        log(f"  flow priority run {index + 1}: low's share of the {s.priority_concurrency - s.high_cap} free slots "
            f"x{result['low_share_of_free_slots']:.3f} (x{result['low_share_relative_to_high']:.3f} of high's / cap), "
            f"high peak {result['high_peak_in_flight']} (cap {s.high_cap})")
    out: dict[str, Any] = {}
    for name, results in runs.items():
        keys = [key for key in results[0] if any(isinstance(r[key], (int, float)) and not isinstance(r[key], bool)
                                                 for r in results)]
        out[name] = {key: spread([r[key] for r in results]) for key in keys}
        out[name]["runs"] = results
    out["settings"] = dict(vars(s))
    return out


RUNNERS = {"flow": run}


# ---------------------------------------------------------------- standalone


def report(out: dict[str, Any]) -> list[str]:
    """The figures as lines: median [min-max] over the runs."""
    def cell(block: dict[str, Any], key: str, digits: int = 3) -> str:
        item = block.get(key) or {"median": None}
        if item["median"] is None:
            return "n/a"
        return f"{item['median']:.{digits}f} [{item['min']:.{digits}f}-{item['max']:.{digits}f}]"

    s = out["settings"]
    lines = ["flow control (ratios to the configured rate, capacity or free slots; median [min-max])"]
    for rate in RATES:
        block = out[f"rate_{rate}"]
        lines.append(f"  rate_limit {rate:>3}/s: steady / rate {cell(block, 'steady_ratio')}, "
                     f"most in 10 s / (10r+burst) {cell(block, 'max_10s_ratio')}, "
                     f"most in 1 s / (r+burst) {cell(block, 'max_1s_ratio')}")
    block = out["aimd"]
    lines += [f"  backpressure, app takes N={s['capacity']}, concurrency {s['aimd_concurrency']}: convergence "
              f"{cell(block, 'convergence_s', 2)} s, mean in flight / N (second half) "
              f"{cell(block, 'mean_in_flight_second_half_ratio')} (lowest 1 s average "
              f"{cell(block, 'moving_average_min_second_half_ratio')}), 429 share {cell(block, 'busy_share')} "
              f"({cell(block, 'busy_429_first_second', 0)} in the first second)",
              f"    daemon's limit / N (second half) {cell(block, 'limit_mean_second_half_ratio')} (lowest "
              f"{cell(block, 'limit_min_second_half', 0)}), its in flight / N "
              f"{cell(block, 'daemon_in_flight_mean_second_half_ratio')}",
              f"    app idle (second half) {cell(block, 'app_idle_share_second_half')}, lost {cell(block, 'lost', 0)}, "
              f"dead-lettered {cell(block, 'dead_lettered', 0)}, "
              f"left in queue {cell(block, 'left_in_queue', 0)}, peak in flight {cell(block, 'peak_in_flight', 0)}"]
    block = out["priority"]
    lines += [f"  priority, high capped at {s['high_cap']} of {s['priority_concurrency']}: "
              f"low in flight / free slots {cell(block, 'low_share_of_free_slots')}, "
              f"high in flight / cap {cell(block, 'high_share_of_cap')}",
              f"    low's share / high's (per-slot gap left out) {cell(block, 'low_share_relative_to_high')}, "
              f"high peak {cell(block, 'high_peak_in_flight', 0)}"]
    return lines


class Standalone:
    """What run() needs of bench/run.py's Bench: fauxqs, the runner's SQS client, settings, workers."""

    def __init__(self, quick: bool, runs: int) -> None:
        self.settings = argparse.Namespace(quick=quick, runs=runs)
        harness.ensure_fauxqs()
        self.fauxqs = harness.Fauxqs()
        self.sqs = Sqs(self.fauxqs.direct_url)
        self.workers: list[Worker] = []

    def close(self) -> None:
        for worker in self.workers:
            if worker.exit_code is None:
                worker.kill()
        self.fauxqs.stop()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="1 run, shorter backlogs")
    parser.add_argument("--runs", type=int, help="runs of each scenario (default 2, or 1 with --quick)")
    parser.add_argument("--json", help="default bench/results/flow-latest.json (flow-latest-quick.json with --quick)")
    parser.add_argument("--daemon-bin", help="bin/workerless of another checkout, e.g. to try a fix")
    args = parser.parse_args()
    if args.daemon_bin:
        harness.DAEMON_BIN = Path(args.daemon_bin).resolve()
    runs = args.runs or (1 if args.quick else 2)
    path = Path(args.json or RESULTS / ("flow-latest-quick.json" if args.quick else "flow-latest.json"))
    results: dict[str, Any] = {"command": " ".join(["python bench/flow.py", *sys.argv[1:]]), "quick": args.quick,
                               "runs": runs, "daemon_bin": str(harness.DAEMON_BIN),
                               "started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                               "machine": {"nproc": os.cpu_count(), "python": platform.python_version(),
                                           "loadavg_start": os.getloadavg()}}
    began = time.monotonic()
    bench = Standalone(args.quick, runs)
    try:
        results["scenarios"] = {"flow": run(bench)}
    finally:
        bench.close()
    results["seconds"] = round(time.monotonic() - began, 1)
    results["machine"]["loadavg_end"] = os.getloadavg()
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(results, indent=2, default=str) + "\n")
    print("\n".join(report(results["scenarios"]["flow"])))
    print(f"wrote {path} in {results['seconds']:.0f}s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
