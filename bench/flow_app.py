"""The apps in the runner's own process (LocalApp; App records every request and answers 429 above a capacity), the
flow kind's daemon, and what the runs read off the app's requests: in flight, busiest window, convergence."""

from __future__ import annotations

import json
import random
import sys
import threading
import time
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Callable

from processes import Worker

class QuietServer(ThreadingHTTPServer):
    daemon_threads = True

    def handle_error(self, request: Any, client_address: Any) -> None:
        if not isinstance(sys.exc_info()[1], OSError):  # a SIGKILLed daemon resets its connections
            super().handle_error(request, client_address)

class LocalApp:
    """An HTTP app in the runner's own process on 127.0.0.1: each POST answered with the status `handle` gives."""

    def __init__(self, handle: Callable[[Any, bytes], int]) -> None:
        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"  # keep-alive, as the daemon's pooled client expects

            def do_POST(self) -> None:  # noqa: N802 - http.server's name
                status = handle(self.headers, self.rfile.read(int(self.headers.get("Content-Length") or 0)))
                self.send_response(status)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, *args: Any) -> None:
                pass

        self.server = QuietServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, kwargs={"poll_interval": 0.1}, daemon=True).start()

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()

@dataclass
class Request:
    arrived: float
    answered: float
    queue: str
    status: int
    number: int
    tenant: str | None = None
    waited: float | None = None  # seconds from the message's making (its body's "sent") to its arrival here

class App(LocalApp):
    """Records every request: 429 above a capacity, 500 to a seeded share `failures`, else 200 after `delay` s (0 to
    2 x `delay` with `jitter`); the peak in flight by tenant, or by queue."""

    def __init__(self, delay: float = 0.0, capacity: int | None = None, failures: float = 0.0, seed: int = 0,
                 jitter: bool = False) -> None:
        self.delay, self.capacity, self.failures, self.jitter = delay, capacity, failures, jitter
        self.lock, self.rng, self.holds = threading.Lock(), random.Random(seed), random.Random(seed + 1)
        self.requests: list[Request] = []
        self.accepted = 0
        self.now: dict[str, int] = {}
        self.peak: dict[str, int] = {}
        super().__init__(lambda headers, body: self.handle(time.monotonic(), headers.get("X-Aws-Sqsd-Queue", ""), body))

    def handle(self, arrived: float, queue: str, body: bytes) -> int:
        now = time.time()
        try:
            fields = json.loads(body)
            number, tenant, waited = int(fields["n"]), fields.get("tenant"), now - float(fields.get("sent") or now)
        except (ValueError, KeyError, TypeError):
            number, tenant, waited = -1, None, None
        with self.lock:
            refused = 429 if self.capacity is not None and self.accepted >= self.capacity else 500 if (
                self.failures and self.rng.random() < self.failures) else 0
            if refused or number < 0:
                self.requests.append(Request(arrived, time.monotonic(), queue, refused or 400, number, tenant, waited))
                return refused or 400
            self.accepted += 1
            self.now[key] = self.now.get(key := tenant or queue, 0) + 1
            self.peak[key] = max(self.peak.get(key, 0), self.now[key])
            hold = self.holds.uniform(0, 2 * self.delay) if self.jitter else self.delay
        time.sleep(hold)
        with self.lock:
            self.accepted -= 1
            self.now[key] -= 1
            self.requests.append(Request(arrived, time.monotonic(), queue, 200, number, tenant, waited))
        return 200

    def ok(self, queue: str | None = None) -> list[Request]:
        with self.lock:
            return [r for r in self.requests if r.status == 200 and (queue is None or r.queue == queue)]

def start_daemon(bench: Any, label: str, *, concurrency: int, queues: list[dict[str, Any]],
                 target: dict[str, Any]) -> Worker:
    worker = bench.daemon(label, queues=queues, concurrency=concurrency, target={"type": "http", **target},
                          polling={"strategy": "priority", "poll_for": 1, "batch_size": 10})
    worker.start().wait_started(60)
    return worker

def wait_for(condition: Any, timeout: float, worker: Worker) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return True
        if worker.poll() is not None:
            raise RuntimeError(f"{worker.label} exited {worker.exit_code}; see {worker.log_path}")
        time.sleep(0.05)
    return False

def mean_in_flight(requests: list[Request], start: float, end: float) -> float:
    """Time-weighted mean of the requests in flight at the app over [start, end]."""
    if end <= start:
        return 0.0
    busy = sum(max(0.0, min(r.answered, end) - max(r.arrived, start)) for r in requests)
    return busy / (end - start)

def most_in_window(arrivals: list[float], seconds: float) -> int:
    """The most arrivals in any window [t, t + seconds) that starts at an arrival."""
    best, last = 0, 0
    for first, moment in enumerate(arrivals):
        while last < len(arrivals) and arrivals[last] < moment + seconds:
            last += 1
        best = max(best, last - first)
    return best

def convergence(ok: list[Request], t0: float, end: float, capacity: int, threshold: float) -> float | None:
    """Seconds from t0 until the trailing-1 s mean in flight stays >= threshold x capacity (None: never)."""
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
    return {"run_s": max(r.answered for r in requests) - t0, "to_95_percent_s": end - t0,
            "convergence_s": convergence(ok, t0, end, capacity, threshold),
            "mean_in_flight_second_half": mean_in_flight(ok, middle, end),
            "mean_in_flight_second_half_ratio": mean_in_flight(ok, middle, end) / capacity,
            "moving_average_min_second_half_ratio": min(moving) / capacity,
            "requests": len(requests), "busy_429": len(busy), "busy_share": len(busy) / len(requests),
            "busy_429_first_second": sum(1 for r in busy if r.arrived < t0 + 1.0), "delivered": len(first_ok),
            "duplicates": len(ok) - len(first_ok), "never_answered_2xx": messages - len(first_ok)}
