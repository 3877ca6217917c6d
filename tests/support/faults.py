"""Fault-injecting stand-ins for the failure table: an SQS endpoint that breaks, an app that misbehaves.

- `FaultySqs`: the counting proxy in front of moto, on a fixed port, that can go down (connections
  refused and open ones cut) and come back, answer AWS errors (5xx, throttling, 403 signature
  errors) for chosen actions, or rewrite requests on their way (corrupt receipt handles).
- `FaultyApp`: the recording HTTP app whose replies may also trickle their body a byte at a time.
- `metric_total`: read the daemon's own counters from its status server.
"""

from __future__ import annotations

import io
import json
import re
import time
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import gevent
import gevent.pool
import pytest
from gevent import pywsgi
from prometheus_client.parser import text_string_to_metric_families

from .http_app import HttpApp, RecordedRequest, Reply, headers_from_environ, status_line
from .ports import ReservedPort
from .proxy import CountingProxy, ProxiedRequest, action_of

# action, parameters -> a reply to send instead of forwarding, or None to forward
Fault = Callable[[str, dict[str, Any]], Reply | None]
# action, raw request body -> the body to forward
Rewrite = Callable[[str, bytes], bytes]


def aws_error(status: int, code: str, message: str) -> Reply:
    """An AWS JSON-protocol error as SQS sends it; botocore reads the code from x-amzn-query-error."""
    fault = "Sender" if status < 500 else "Receiver"
    body = json.dumps({"__type": f"com.amazonaws.sqs#{code}", "message": message}).encode()
    headers = {"Content-Type": "application/x-amz-json-1.0", "x-amzn-query-error": f"{code};{fault}",
               "x-amzn-RequestId": "00000000-0000-0000-0000-000000000000"}
    return status, headers, body


INTERNAL_ERROR = aws_error(500, "InternalError", "We encountered an internal error. Please try again.")
SERVICE_UNAVAILABLE = aws_error(503, "ServiceUnavailable", "Service is unavailable. Try again later.")
THROTTLED = aws_error(400, "RequestThrottled", "Rate exceeded")
SIGNATURE_MISMATCH = aws_error(
    403, "SignatureDoesNotMatch",
    "Signature expired: 20250101T000000Z is now earlier than 20250101T000500Z (20250101T001000Z - 5 min.)",
)


class FaultySqs(CountingProxy):
    """A CountingProxy whose port survives `down()`/`up()`, with `fail(...)` and `rewrite` faults.

    Every request that reaches it is recorded, including the ones answered with an error, so a
    test can count how hard the daemon hammers a failing endpoint.
    """

    def __init__(self, upstream: str) -> None:
        super().__init__(upstream)
        self.reserved = ReservedPort()  # refuses connections while no server of ours listens there
        self.port = self.reserved.port
        self._server = self._new_server()
        self.fault: Fault | None = None
        self.rewrite: Rewrite | None = None
        self.faulted: list[ProxiedRequest] = []  # requests answered by a fault, not by moto

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def is_up(self) -> bool:
        return bool(self._server.started)

    def _new_server(self) -> pywsgi.WSGIServer:
        # A pool, so stop() can cut keep-alive connections too, not only close the listener.
        return pywsgi.WSGIServer(("127.0.0.1", self.port), self._wsgi, log=None, spawn=gevent.pool.Pool(1000))

    def start(self) -> None:
        self.up()

    def stop(self) -> None:
        """Down for good, the port let go."""
        self.down()
        self.reserved.release()

    def down(self) -> None:
        """Refuse new connections and cut every open one (long polls included), like a dead endpoint."""
        self._server.stop(timeout=0)
        self.reserved.hold()

    def up(self) -> None:
        """Listen again on the same port (SO_REUSEADDR lets it bind at once)."""
        if not self._server.started:
            self._server = self._new_server()
            self._server.start()
            self.reserved.release()

    def restart(self, downtime: float) -> None:
        self.down()
        gevent.sleep(downtime)
        self.up()

    def fail(self, reply: Reply, actions: tuple[str, ...] = ()) -> None:
        """Answer `reply` to every request (or only to `actions`) until `heal()`."""
        self.fault = lambda action, params: reply if not actions or action in actions else None

    def heal(self) -> None:
        self.fault = None
        self.rewrite = None

    def corrupt_receipts(self, action: str, times: int = 1) -> list[str]:
        """Replace every receipt handle in the next `times` `action` calls; returns the originals."""
        originals: list[str] = []
        left = [times]

        def rewrite(seen: str, body: bytes) -> bytes:
            if seen != action or left[0] <= 0:
                return body
            left[0] -= 1
            document = json.loads(body)
            for entry in document.get("Entries", []):
                originals.append(entry["ReceiptHandle"])
                entry["ReceiptHandle"] = "garbage-" + entry["ReceiptHandle"][::-1][:40]
            if "ReceiptHandle" in document:
                originals.append(document["ReceiptHandle"])
                document["ReceiptHandle"] = "garbage"
            return json.dumps(document).encode()

        self.rewrite = rewrite
        return originals

    def handle(self, environ: dict[str, Any], arrived: float) -> Reply:
        body = environ["wsgi.input"].read()
        action, params = action_of(headers_from_environ(environ), body, environ.get("QUERY_STRING", ""))
        fault = self.fault
        reply = fault(action, params) if fault is not None else None
        if reply is not None:
            record = ProxiedRequest(action, params, arrived, time.monotonic(), reply[0])
            self.requests.append(record)
            self.faulted.append(record)
            return reply
        rewrite = self.rewrite
        if rewrite is not None:
            body = rewrite(action, body)
        environ["wsgi.input"] = io.BytesIO(body)
        return super().handle(environ, arrived)

    def faulted_count(self, action: str | None = None, since: float = 0.0) -> int:
        return sum(1 for r in list(self.faulted) if r.started >= since and (action is None or r.action == action))


@dataclass
class Trickle:
    """A reply body sent one `chunk` (a byte) every `interval` seconds, with the full Content-Length announced."""

    length: int = 120  # chunks
    interval: float = 0.25
    chunk: bytes = b"x"
    sent: int = 0
    started: float = 0.0
    ended: float | None = None  # when the stream stopped, by completion or because the client left
    completed: bool = False

    def stream(self) -> Iterator[bytes]:
        self.started = time.monotonic()
        try:
            for _ in range(self.length):
                yield self.chunk
                self.sent += 1
                gevent.sleep(self.interval)
            self.completed = True
        finally:
            self.ended = time.monotonic()


@dataclass
class Answer:
    """What a FaultyApp sends: a plain reply, or headers followed by a trickling body."""

    status: int
    headers: dict[str, str] = field(default_factory=dict)
    body: bytes | Trickle = b""


class FaultyApp(HttpApp):
    """HttpApp whose `respond` may return an `Answer` with a `Trickle` body; `answered` logs outcomes.

    `answered` holds (request, status, monotonic time the handler returned) for every request, so
    a test can tell which deliveries were answered 2xx, i.e. delivered successfully.
    """

    def __init__(self) -> None:
        super().__init__()
        self.answered: list[tuple[RecordedRequest, int, float]] = []

    def _wsgi(self, environ: dict[str, Any], start_response: Callable[..., Any]) -> Any:
        request, reply = self.counted(self.handle_request, environ)
        answer = reply if isinstance(reply, Answer) else Answer(reply[0], dict(reply[1]), reply[2])
        headers = [(k, v) for k, v in answer.headers.items() if k.lower() != "content-length"]
        if isinstance(answer.body, Trickle):
            headers.append(("Content-Length", str(answer.body.length * len(answer.body.chunk))))
            start_response(status_line(answer.status), headers)
            return self._trickle(request, answer.status, answer.body)
        self.answered.append((request, answer.status, time.monotonic()))
        headers.append(("Content-Length", str(len(answer.body))))
        start_response(status_line(answer.status), headers)
        return [answer.body]

    def _trickle(self, request: RecordedRequest, status: int, trickle: Trickle) -> Iterator[bytes]:
        """A trickled reply counts as answered only if the client stayed for all of it (else status 0)."""
        try:
            yield from trickle.stream()
        finally:
            self.answered.append((request, status if trickle.completed else 0, time.monotonic()))

    def succeeded_bodies(self) -> list[bytes]:
        """Bodies of the requests answered 2xx, in the order they were answered."""
        return [request.body for request, status, _ in list(self.answered) if 200 <= status < 300]


def metric_total(url: str, name: str) -> float:
    """Sum of every sample of metric family `name` on the daemon's /metrics page."""
    with urllib.request.urlopen(f"{url}/metrics", timeout=5) as response:
        text = response.read().decode()
    total = 0.0
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name == name:
                total += sample.value
    return total


# Fixtures for the fault suites; a test module imports the ones it uses (as *_fixture).

@pytest.fixture(name="faulty_sqs")
def faulty_sqs_fixture(moto_endpoint: str) -> Iterator[FaultySqs]:
    """A FaultySqs in front of the session's moto; aim the daemon at it with `sqs_env`."""
    proxy = FaultySqs(moto_endpoint)
    proxy.up()
    yield proxy
    proxy.stop()


@pytest.fixture(name="faulty_app")
def faulty_app_fixture() -> Iterator[FaultyApp]:
    app = FaultyApp()
    app.start()
    yield app
    app.stop()


@pytest.fixture(name="sqs_env")
def sqs_env_fixture(aws_env: dict[str, str], faulty_sqs: FaultySqs) -> dict[str, str]:
    """The daemon's environment, with every AWS endpoint going through `faulty_sqs`."""
    return {**aws_env, "AWS_ENDPOINT_URL": faulty_sqs.url}


BACKOFF_LINE = re.compile(
    r"^(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3}) (\w+) \S+: queue=(\S+) "
    r"receive (?:failed \((\d+) in a row\), retrying in|refused: .*Retrying in) ([\d.]+)s", re.MULTILINE)


@dataclass(frozen=True)
class Backoff:
    at: float  # seconds since the epoch, from the log line's timestamp
    level: str
    failures: int  # failures in a row so far (1 for the "refused" line, which only the first one gets)
    seconds: float  # the jittered wait the daemon chose


def backoffs(log: str, queue: str) -> list[Backoff]:
    """Every receive back-off the daemon logged for `queue` (needs --log-level=DEBUG past the first)."""
    found = []
    for stamp, level, name, count, seconds in BACKOFF_LINE.findall(log):
        if name == queue:
            at = time.mktime(time.strptime(stamp[:19], "%Y-%m-%d %H:%M:%S")) + int(stamp[20:]) / 1000
            found.append(Backoff(at, level, int(count or 1), float(seconds)))
    return found
