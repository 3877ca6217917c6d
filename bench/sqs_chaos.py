"""A fault-injecting proxy in front of the SQS emulator, for the soak's `--sqs-faults` mode.

The same fault model as the tests' `tests/support/chaos.py` (which bench must not import: bench
stays standalone of the tests package, and runs in plain CPython threads rather than gevent):
per action, a seeded share of the calls gets one fault drawn from

- `throttle`: `RequestThrottled` 400 with `x-amzn-query-error`, as SQS's JSON protocol sends it;
- `error` / `unavailable`: `InternalError` 500 / `ServiceUnavailable` 503;
- `reset`: the client connection reset (SO_LINGER 0: the client reads ECONNRESET), not forwarded;
- `reset_after`: forwarded, so it takes effect, and then reset instead of answered (a delete that
  happened although the client saw it fail);
- `stall`: held `stall` seconds, then forwarded; `stall_reset`: held, then reset unforwarded.

Only SQS's JSON protocol is spoken (the daemon's hot calls and botocore's SQS client both use it).
Counts of requests per action and of faults per action and kind are kept for the report.
"""

from __future__ import annotations

import http.client
import json
import os
import random
import socket
import struct
import sys
import threading
import time
from collections import Counter
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

KINDS = ("throttle", "error", "unavailable", "reset", "reset_after", "stall", "stall_reset")
# What a running daemon calls; start-up calls (GetQueueUrl, GetQueueAttributes) stay clean so a
# restart is never refused for a reason other than the one under test.
RUNTIME_ACTIONS = ("ReceiveMessage", "DeleteMessageBatch", "ChangeMessageVisibilityBatch", "SendMessage",
                   "SendMessageBatch", "DeleteMessage", "ChangeMessageVisibility")
ERRORS = {
    "throttle": (400, "RequestThrottled", "Rate exceeded"),
    "error": (500, "InternalError", "We encountered an internal error. Please try again."),
    "unavailable": (503, "ServiceUnavailable", "Service is unavailable. Try again later."),
}
HOP_BY_HOP = {"connection", "keep-alive", "transfer-encoding", "content-length", "te", "upgrade"}
LINGER_ZERO = struct.pack("ii", 1, 0)


class SqsChaos:
    """`SqsChaos(upstream_port, share=0.2, seed=1)`; `.url` for AWS_ENDPOINT_URL; `stop()` at the end."""

    def __init__(self, upstream_port: int, *, share: float, seed: int, kinds: tuple[str, ...] = KINDS,
                 actions: tuple[str, ...] = RUNTIME_ACTIONS, stall: tuple[float, float] = (0.5, 2.0)) -> None:
        unknown = set(kinds) - set(KINDS)
        if unknown or not kinds or not 0 <= share <= 1:
            raise ValueError(f"share must be in [0, 1] and kinds among {KINDS}: {share}, {kinds}")
        self.upstream_port = upstream_port
        self.share, self.seed, self.kinds, self.actions, self.stall = share, seed, kinds, actions, stall
        self.lock = threading.Lock()
        self.rngs: dict[str, random.Random] = {}  # one per action: the n-th call of it always gets the same fault
        self.requests: Counter[str] = Counter()
        self.faults: Counter[tuple[str, str]] = Counter()
        self.local = threading.local()  # each handler thread keeps one keep-alive connection upstream
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.server.chaos = self  # type: ignore[attr-defined]
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, name="sqs-chaos", daemon=True).start()

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()

    def choose(self, action: str) -> tuple[str | None, float]:
        with self.lock:
            self.requests[action] += 1
            if action not in self.actions:
                return None, 0.0
            rng = self.rngs.setdefault(action, random.Random(f"{self.seed}:{action}"))
            if rng.random() >= self.share:
                return None, 0.0
            kind = rng.choice(self.kinds)
            self.faults[(action, kind)] += 1
            return kind, rng.uniform(*self.stall) if kind.startswith("stall") else 0.0

    def forward(self, method: str, path: str, headers: dict[str, str], body: bytes) -> tuple[int, list[Any], bytes]:
        for attempt in range(2):
            connection = getattr(self.local, "connection", None)
            if connection is None:
                connection = self.local.connection = http.client.HTTPConnection("127.0.0.1", self.upstream_port,
                                                                                timeout=120)
            try:
                connection.request(method, path, body=body, headers=headers)
                response = connection.getresponse()
                answer = response.read()
                return response.status, [(k, v) for k, v in response.getheaders() if k.lower() not in HOP_BY_HOP], answer
            except (OSError, http.client.HTTPException) as error:
                connection.close()
                self.local.connection = None
                if attempt:
                    return 502, [("Content-Type", "text/plain")], repr(error).encode()
        raise AssertionError("unreachable")

    def report(self) -> dict[str, Any]:
        with self.lock:
            return {
                "share": self.share, "kinds": list(self.kinds), "stall_seconds": list(self.stall),
                "requests": dict(sorted(self.requests.items())),
                "faults": {action: {kind: n for (a, kind), n in sorted(self.faults.items()) if a == action}
                           for action in sorted({a for a, _ in self.faults})},
                "faults_total": sum(self.faults.values()),
            }


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive, as the daemon's pooled connections expect

    def do_POST(self) -> None:
        chaos: SqsChaos = self.server.chaos  # type: ignore[attr-defined]
        body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        action = (self.headers.get("X-Amz-Target") or "unknown").rsplit(".", 1)[-1]
        kind, stall_seconds = chaos.choose(action)
        if kind in ERRORS:
            status, code, message = ERRORS[kind]
            self.answer(status, [("Content-Type", "application/x-amz-json-1.0"),
                                 ("x-amzn-query-error", f"{code};{'Sender' if status < 500 else 'Receiver'}")],
                        json.dumps({"__type": f"com.amazonaws.sqs#{code}", "message": message}).encode())
            return
        if stall_seconds:
            time.sleep(stall_seconds)
        if kind in ("reset", "stall_reset"):
            self.reset()
            return
        headers = {k: v for k, v in self.headers.items() if k.lower() not in HOP_BY_HOP}
        status, out, answer = chaos.forward("POST", self.path, headers, body)
        if kind == "reset_after":
            self.reset()
            return
        self.answer(status, out, answer)

    def answer(self, status: int, headers: list[Any], body: bytes) -> None:
        self.send_response_only(status)
        for key, value in headers:
            self.send_header(key, value)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def reset(self) -> None:
        """Close the connection with SO_LINGER 0, so the kernel sends a RST rather than a FIN. The fd
        is closed here, detached from the socket object: rfile and wfile still hold it, and a plain
        close() would wait for them, while socketserver's shutdown(SHUT_WR) would send a FIN first."""
        self.close_connection = True
        try:
            self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, LINGER_ZERO)
            os.close(self.connection.detach())
        except OSError:
            pass

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def handle_one_request(self) -> None:
        try:
            super().handle_one_request()
        except OSError:  # the daemon went away (SIGKILL) or we reset it ourselves
            self.close_connection = True


if __name__ == "__main__":  # a quick manual check: python bench/sqs_chaos.py UPSTREAM_PORT [SHARE]
    proxy = SqsChaos(int(sys.argv[1]), share=float(sys.argv[2]) if len(sys.argv) > 2 else 0.2, seed=1)
    print(json.dumps({"port": proxy.server.server_address[1]}), flush=True)
    try:
        while True:
            time.sleep(10)
            print(json.dumps(proxy.report()), flush=True)
    except KeyboardInterrupt:
        proxy.stop()
