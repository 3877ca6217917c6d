"""The node services the bench starts on 127.0.0.1 (fauxqs, the sink, the DynamoDB stand-in, the OTLP collector),
each with its /_bench/ control endpoints."""

from __future__ import annotations

import http.client
import json
import shutil
import subprocess
import threading
import time
from typing import Any

from harness import BENCH, LOGS, log, stop_process

def ensure_fauxqs() -> None:
    """Install fauxqs into bench/node_modules (pinned by bench/package-lock.json) if it is missing."""
    if (BENCH / "node_modules" / "fauxqs" / "package.json").exists():
        return
    npm = shutil.which("npm")
    if npm is None or shutil.which("node") is None:
        raise SystemExit("bench: node and npm are needed for the fauxqs SQS emulator (apt-get install nodejs npm)")
    log("bench: installing fauxqs into bench/node_modules ...")
    subprocess.run([npm, "install", "--prefix", str(BENCH), "--no-audit", "--no-fund", "--loglevel=error"],
                   check=True, cwd=BENCH)

class JsonHttp:
    """A tiny keep-alive JSON client for the control endpoints."""

    def __init__(self, port: int) -> None:
        self.port = port
        self.connection = http.client.HTTPConnection("127.0.0.1", port, timeout=120)

    def call(self, method: str, path: str) -> Any:
        for attempt in range(2):
            try:
                self.connection.request(method, path, body=b"" if method == "POST" else None)
                return json.loads(self.connection.getresponse().read())
            except (OSError, http.client.HTTPException):
                self.connection.close()
                self.connection = http.client.HTTPConnection("127.0.0.1", self.port, timeout=120)
                if attempt:
                    raise
        return None

class NodeService:
    """A node script that prints {"port": N} once listening and answers /_bench/... with JSON."""

    def __init__(self, name: str, script: str) -> None:
        LOGS.mkdir(parents=True, exist_ok=True)
        self.stderr = open(LOGS / f"{name}.log", "wb")
        self.process = subprocess.Popen(["node", str(BENCH / script)], cwd=BENCH, stdout=subprocess.PIPE,
                                        stderr=self.stderr)
        line: list[bytes] = []
        reader = threading.Thread(target=lambda: line.append(self.process.stdout.readline()), daemon=True)
        reader.start()
        reader.join(30)
        if not line or not line[0]:
            self.stop()
            raise SystemExit(f"bench: {name} did not start; see {LOGS / (name + '.log')}")
        self.info = json.loads(line[0].decode())
        self.port = int(self.info["port"])
        self.url = f"http://127.0.0.1:{self.port}"
        self.control = JsonHttp(int(self.info.get("direct_port", self.port)))

    @property
    def pid(self) -> int:
        return self.process.pid

    def call(self, method: str, path: str) -> Any:
        return self.control.call(method, "/_bench/" + path)

    def set_delay(self, ms: float) -> dict[str, Any]:
        """The round trip added to every answer from now on (half before handling, half after)."""
        return self.call("POST", f"delay?ms={ms}")

    def stats(self, query: str = "") -> dict[str, Any]:
        return self.call("GET", "stats" + query)

    def stop(self) -> None:
        stop_process(self.process, 5)
        self.stderr.close()

class Fauxqs(NodeService):
    """fauxqs_server.mjs: `url` for the workers (delayed, counted by queue), `direct_url` for the runner's setup."""

    def __init__(self) -> None:
        super().__init__("fauxqs", "fauxqs_server.mjs")
        self.direct_url = f"http://127.0.0.1:{self.info['direct_port']}"
        self.default_delay_ms = float(self.stats()["delay_ms"])

    def requests(self, queue: str) -> dict[str, int]:
        """The workers' requests on one queue by action (GetQueueUrl by QueueName)."""
        return dict(self.stats(f"?queue={queue}")["counts"].get(queue, {}))

    def forget(self, queue: str) -> None:
        self.call("POST", f"forget?queue={queue}")

    def make_fair(self, queue: str) -> None:
        self.call("POST", f"fair?queue={queue}")

class Sink(NodeService):
    """bench/sink.mjs: the app, counting arrivals; answers after the delay it was reset with."""

    def __init__(self) -> None:
        super().__init__("sink", "sink.mjs")
        self.waiter = JsonHttp(self.port)

    def reset(self, delay_ms: float = 0) -> dict[str, Any]:
        return self.call("POST", f"reset?delay_ms={delay_ms}")

    def events(self, start: int = 0) -> list[tuple[float, str]]:
        return [(t, q) for t, q in self.call("GET", f"events?from={start}")]

    def wait(self, count: int, timeout: float) -> dict[str, Any]:
        return self.waiter.call("GET", f"/_bench/wait?count={count}&timeout_ms={int(timeout * 1000)}")

    def clock_offset_ms(self) -> float:
        """The sink's clock minus time.time(), in ms, from the round trip with the smallest delay."""
        best = (float("inf"), 0.0)
        for _ in range(7):
            before, now, after = time.time() * 1000, self.stats()["now"], time.time() * 1000
            best = min(best, (after - before, now - (before + after) / 2))
        return best[1]
