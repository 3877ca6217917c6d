"""The flow scenarios' app (records every request, answers 429 above a capacity), its daemon and /status sampler."""

from __future__ import annotations

import http.client
import json
import threading
import time
from dataclasses import dataclass
from typing import Any

from local_app import LocalApp
from processes import Worker


@dataclass
class Request:
    arrived: float
    answered: float
    queue: str
    status: int
    number: int


class App(LocalApp):
    """Records every request; with a capacity, answers 429 above it."""

    def __init__(self, delay: float = 0.0, capacity: int | None = None) -> None:
        self.delay, self.capacity = delay, capacity
        self.lock = threading.Lock()
        self.requests: list[Request] = []
        self.accepted = 0
        self.now: dict[str, int] = {}
        self.peak: dict[str, int] = {}
        super().__init__(lambda headers, body: self.handle(time.monotonic(), headers.get("X-Aws-Sqsd-Queue", ""), body))

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


def start_daemon(bench: Any, label: str, *, concurrency: int, queues: list[dict[str, Any]],
                 target: dict[str, Any], strategy: str = "priority", status_port: int | None = None) -> Worker:
    """bin/workerless on a config file written here (the flow-control keys have no flags), started."""
    worker = bench.daemon(label, queues=queues, concurrency=concurrency, target={"type": "http", **target},
                          polling={"strategy": strategy, "poll_for": 1, "batch_size": 10},
                          tables={"status": {"listen": f"127.0.0.1:{status_port}"}} if status_port else None)
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
