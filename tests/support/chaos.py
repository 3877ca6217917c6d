"""A fault-injecting reverse proxy for any AWS endpoint the daemon talks to: SQS, CloudWatch and
DynamoDB (moto serves them all on one port) and the Lambda stand-in (`FakeLambda`).

`ChaosProxy` is a `FaultySqs` (so it keeps its port across `down()`/`up()` and records every
request) that, per call kind, answers a chosen share of the calls with a fault picked by a seeded
rng. A call kind is the API action: `ReceiveMessage`, `DeleteMessageBatch`, `PutMetricData`,
`PutItem`, `Invoke`, ... found from the request whatever the protocol (AWS JSON `X-Amz-Target`,
CloudWatch's Smithy RPC v2 CBOR path, Lambda's REST path, query `Action=`).

Fault kinds (`KINDS`):

- `throttle`: the service's own throttling error in its own protocol (SQS `RequestThrottled` 400
  with `x-amzn-query-error`, CloudWatch `Throttling` 400 in CBOR, DynamoDB `ThrottlingException`
  400, Lambda 429 `TooManyRequestsException`);
- `error`: 500 (`InternalError`, `InternalServiceFault`, `InternalServerError`, `ServiceException`);
- `unavailable`: 503 `ServiceUnavailable`;
- `reset`: the client connection is reset (SO_LINGER 0, so the client reads ECONNRESET) before
  the request is forwarded: it never took effect;
- `reset_after`: the request is forwarded, takes effect, and then the client connection is reset
  instead of answered: for a delete, the message is gone but the client saw a failure;
- `stall`: the request is held `stall` seconds (drawn uniformly from the given range), then forwarded;
- `stall_reset`: held the same way, then reset without forwarding.

Every fault but `reset_after` happens before forwarding. A test says, for instance::

    chaos.set(share=0.2, kinds=("throttle", "error", "reset", "stall"), actions=SQS_ACTIONS)
    chaos.outage()            # every request gets its protocol's 500 (chaos.outage(refuse=True): port closed)
    chaos.heal()              # no faults at all, listening again

and reads `chaos.seen[action]` (requests that reached the proxy) and `chaos.fault_counts[(action,
kind)]`, or `chaos.summary()`.
"""

from __future__ import annotations

import errno
import io
import json
import random
import re
import socket
import struct
import time
from collections import Counter
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any
from urllib.parse import unquote

import gevent
import gevent.pool
import pytest
from gevent import pywsgi

from .faults import FaultySqs
from .http_app import Reply, headers_from_environ
from .proxy import ProxiedRequest, action_of

KINDS = ("throttle", "error", "unavailable", "reset", "reset_after", "stall", "stall_reset")
ERROR_KINDS = ("throttle", "error", "unavailable")  # answered by the proxy, never forwarded
OUTAGE = "outage"  # the kind counted for a request answered 500 by `outage()`

# Every SQS action the daemon makes (hot path, dead-lettering and periodic sends, start-up).
SQS_ACTIONS = ("ReceiveMessage", "DeleteMessageBatch", "ChangeMessageVisibilityBatch", "SendMessage",
               "SendMessageBatch", "DeleteMessage", "ChangeMessageVisibility", "GetQueueUrl",
               "GetQueueAttributes")
# The actions of a running daemon, without the start-up ones (faulting those can stop a start).
SQS_RUNTIME_ACTIONS = ("ReceiveMessage", "DeleteMessageBatch", "ChangeMessageVisibilityBatch", "SendMessage")

INVOKE_PATH = re.compile(r"^/2015-03-31/functions/([^/]+)/invocations/?$")
CBOR_PATH = re.compile(r"^/service/([^/]+)/operation/([^/]+)$")
CREDENTIAL_SCOPE = re.compile(r"Credential=[^/,]+/\d{8}/[^/]+/([^/]+)/aws4_request")
REQUEST_ID = "00000000-0000-0000-0000-00000000c4a0"
LINGER_ZERO = struct.pack("ii", 1, 0)


@dataclass(frozen=True)
class Call:
    """What a request is: the signing service, the protocol it speaks and its action."""

    service: str  # "sqs", "monitoring" (CloudWatch), "dynamodb", "lambda", ... or "unknown"
    protocol: str  # "json" | "cbor" | "rest-json" | "query"
    action: str
    params: dict[str, Any]

    @property
    def queue(self) -> str | None:
        """The SQS queue name of the call, if it names one."""
        url = self.params.get("QueueUrl") or self.params.get("QueueName")
        return str(url).rstrip("/").rsplit("/", 1)[-1] if url else None


def classify(headers: Any, path: str, body: bytes, query: str) -> Call:
    scope = CREDENTIAL_SCOPE.search(headers.get("authorization", ""))
    service = scope.group(1) if scope else "unknown"
    invoke = INVOKE_PATH.match(path)
    if invoke:
        try:
            payload = json.loads(body) if body else None
        except ValueError:
            payload = None
        return Call("lambda", "rest-json", "Invoke", {"FunctionName": unquote(invoke.group(1)), "Payload": payload})
    cbor = CBOR_PATH.match(path)
    if cbor and headers.get("smithy-protocol", "").startswith("rpc-v2-cbor"):
        return Call(service, "cbor", cbor.group(2), {})
    action, params = action_of(headers, body, query)
    target = headers.get("x-amz-target")
    if target and service == "unknown":
        prefix = target.split(".", 1)[0]
        service = {"AmazonSQS": "sqs", "GraniteServiceVersion20100801": "monitoring"}.get(
            prefix, "dynamodb" if prefix.startswith("DynamoDB") else prefix.lower())
    return Call(service, "json" if target else "query", action, params)


# ---------------------------------------------------------------- errors in each service's protocol

# (status, code, message) per service and kind; `query_compatible` services also send x-amzn-query-error.
ERRORS: dict[str, dict[str, tuple[int, str, str]]] = {
    "sqs": {"throttle": (400, "RequestThrottled", "Rate exceeded"),
            "error": (500, "InternalError", "We encountered an internal error. Please try again."),
            "unavailable": (503, "ServiceUnavailable", "Service is unavailable. Try again later.")},
    "monitoring": {"throttle": (400, "Throttling", "Rate exceeded"),
                   "error": (500, "InternalServiceFault", "Internal service error"),
                   "unavailable": (503, "ServiceUnavailable", "Service is unavailable")},
    "dynamodb": {"throttle": (400, "ThrottlingException", "Rate of requests exceeds the allowed throughput."),
                 "error": (500, "InternalServerError", "Internal server error"),
                 "unavailable": (503, "ServiceUnavailable", "Service is unavailable")},
    "lambda": {"throttle": (429, "TooManyRequestsException", "Rate exceeded"),
               "error": (500, "ServiceException", "Lambda was unable to process the request"),
               "unavailable": (503, "ServiceException", "Service is unavailable")},
}
NAMESPACES = {"sqs": "com.amazonaws.sqs", "monitoring": "com.amazonaws.cloudwatch",
              "dynamodb": "com.amazonaws.dynamodb.v20120810"}
QUERY_COMPATIBLE = ("sqs", "monitoring")


def cbor_text(text: str) -> bytes:
    data = text.encode("utf-8")
    return cbor_head(3, len(data)) + data


def cbor_head(major: int, length: int) -> bytes:
    if length < 24:
        return bytes([major << 5 | length])
    if length < 256:
        return bytes([major << 5 | 24, length])
    return bytes([major << 5 | 25]) + length.to_bytes(2, "big")


def cbor_map(items: dict[str, str]) -> bytes:
    """A CBOR map of text to text: all an RPC v2 CBOR error body needs."""
    return cbor_head(5, len(items)) + b"".join(cbor_text(k) + cbor_text(v) for k, v in items.items())


def error_reply(call: Call, kind: str) -> Reply:
    """The answer `call.service` gives for a fault of `kind` ("throttle", "error", "unavailable")."""
    status, code, message = ERRORS.get(call.service, ERRORS["sqs"])[kind]
    headers = {"x-amzn-RequestId": REQUEST_ID}
    if call.service in QUERY_COMPATIBLE:
        headers["x-amzn-query-error"] = f"{code};{'Sender' if status < 500 else 'Receiver'}"
    shape = f"{NAMESPACES.get(call.service, 'com.amazonaws')}#{code}"
    if call.protocol == "rest-json":
        headers.update({"Content-Type": "application/json", "x-amzn-ErrorType": code})
        document = {"Type": "User" if status < 500 else "Service", "message": message}
        return status, headers, json.dumps(document).encode()
    if call.protocol == "cbor":
        headers.update({"Content-Type": "application/cbor", "smithy-protocol": "rpc-v2-cbor"})
        return status, headers, cbor_map({"__type": shape, "message": message})
    if call.protocol == "query":
        headers["Content-Type"] = "text/xml"
        xml = (f"<ErrorResponse><Error><Type>{'Sender' if status < 500 else 'Receiver'}</Type><Code>{code}</Code>"
               f"<Message>{message}</Message></Error><RequestId>{REQUEST_ID}</RequestId></ErrorResponse>")
        return status, headers, xml.encode()
    headers["Content-Type"] = "application/x-amz-json-1.0"
    return status, headers, json.dumps({"__type": shape, "message": message}).encode()


# ---------------------------------------------------------------- the proxy


@dataclass
class Rule:
    share: float  # of the matching calls that get a fault
    kinds: tuple[str, ...]  # one is drawn uniformly for each faulted call
    stall: tuple[float, float]  # seconds a stall holds the request: uniform in [low, high]
    left: int | None = None  # faults still to inject before the rule lapses (None: no limit)


@dataclass
class ChaosRequest(ProxiedRequest):
    """A request as the proxy saw it, with its service, queue and the fault it got (if any)."""

    service: str = ""
    queue: str | None = None
    fault: str | None = None


class ResetConnection(ConnectionResetError):
    """Raised out of the WSGI app after SO_LINGER 0 is set: pywsgi ignores an ECONNRESET, drops the
    connection without an answer, and the close sends the client a RST."""

    def __init__(self) -> None:
        super().__init__(errno.ECONNRESET, "reset by ChaosProxy")


class ChaosHandler(pywsgi.WSGIHandler):  # type: ignore[misc]
    """pywsgi's handler, with the client socket in the environ so a fault can reset it."""

    def get_environ(self) -> dict[str, Any]:
        environ: dict[str, Any] = super().get_environ()
        environ["chaos.socket"] = self.socket
        return environ


class ChaosProxy(FaultySqs):
    """`ChaosProxy(upstream_url, seed=N)`; `start()`/`up()` to listen; see the module docstring."""

    def __init__(self, upstream: str, seed: int = 0) -> None:
        self.rules: dict[str | None, Rule] = {}  # action (None: any other action) -> its rule
        self.outage_actions: tuple[str, ...] | None = None  # answered 500 while set (() = every action)
        self.seed = seed
        # One rng per action, so the n-th call of an action gets the same fault whatever the
        # interleaving with other actions (greenlets and the daemon's timing decide that).
        self.rngs: dict[str, random.Random] = {}
        self.seen: Counter[str] = Counter()  # action -> requests that reached the proxy
        self.fault_counts: Counter[tuple[str, str]] = Counter()  # (action, kind) -> faults injected
        self.requests: list[ChaosRequest] = []  # type: ignore[assignment]
        super().__init__(upstream)

    def _new_server(self) -> pywsgi.WSGIServer:
        return pywsgi.WSGIServer(("127.0.0.1", self.port), self._wsgi, log=None, error_log=None,
                                 spawn=gevent.pool.Pool(1000), handler_class=ChaosHandler)

    # ------------------------------------------------------------ what to break

    def set(self, share: float, kinds: Iterable[str] = KINDS, actions: Iterable[str] | None = None,
            stall: tuple[float, float] = (1.0, 2.0), times: int | None = None) -> None:
        """From now on `share` of the calls of each of `actions` (None: every action without a rule
        of its own) get a fault of one of `kinds`, drawn by the seeded rng of the action; with
        `times`, each action's rule lapses after that many faults."""
        kinds = tuple(kinds)
        unknown = set(kinds) - set(KINDS)
        if unknown or not kinds or not 0 <= share <= 1:
            raise ValueError(f"share must be in [0, 1] and kinds among {KINDS}: {share}, {kinds}")
        for action in (None,) if actions is None else tuple(actions):
            self.rules[action] = Rule(share, kinds, stall, times)

    def outage(self, actions: Iterable[str] | None = None, refuse: bool = False) -> None:
        """Total outage: every request (or every one of `actions`) answered with its protocol's 500,
        or with `refuse` the port closed (connections refused, open ones cut), until `heal()`."""
        if refuse:
            self.down()
        else:
            self.outage_actions = () if actions is None else tuple(actions)

    def heal(self) -> None:
        """No faults at all any more (rules, outage and FaultySqs faults), and listening again."""
        super().heal()
        self.rules.clear()
        self.outage_actions = None
        self.up()

    # ------------------------------------------------------------ what it saw

    def faults(self, action: str | None = None, kind: str | None = None) -> int:
        return sum(count for (seen_action, seen_kind), count in list(self.fault_counts.items())
                   if (action is None or seen_action == action) and (kind is None or seen_kind == kind))

    def by_queue(self, since: float = 0.0, until: float = float("inf")) -> Counter[str]:
        """Requests per SQS queue name that reached the proxy within [since, until] (monotonic)."""
        return Counter(r.queue for r in list(self.requests) if r.queue and since <= r.started <= until)

    def summary(self) -> dict[str, Any]:
        """{action: {"requests": n, "faults": {kind: n}}} for printing."""
        table: dict[str, Any] = {}
        for action, count in sorted(self.seen.items()):
            kinds = {kind: n for (a, kind), n in sorted(self.fault_counts.items()) if a == action}
            table[action] = {"requests": count, "faults": kinds}
        return table

    # ------------------------------------------------------------ one request

    def choose(self, call: Call) -> tuple[str | None, float]:
        """The fault for this call (or None) and, for stalls, how long."""
        outage = self.outage_actions
        if outage is not None and (not outage or call.action in outage):
            return OUTAGE, 0.0
        key: str | None = call.action if call.action in self.rules else None
        rule = self.rules.get(key)
        if rule is None:
            return None, 0.0
        rng = self.rngs.setdefault(call.action, random.Random(f"{self.seed}:{call.action}"))
        if rng.random() >= rule.share:
            return None, 0.0
        if rule.left is not None:
            rule.left -= 1
            if rule.left <= 0:
                del self.rules[key]
        kind = rng.choice(rule.kinds)
        return kind, rng.uniform(*rule.stall) if kind.startswith("stall") else 0.0

    def handle(self, environ: dict[str, Any], arrived: float) -> Reply:
        body = environ["wsgi.input"].read()
        headers = headers_from_environ(environ)
        call = classify(headers, environ.get("PATH_INFO", "/"), body, environ.get("QUERY_STRING", ""))
        record = ChaosRequest(call.action, call.params, arrived, service=call.service, queue=call.queue)
        self.requests.append(record)
        self.seen[call.action] += 1
        legacy = self.fault(call.action, call.params) if self.fault is not None else None  # FaultySqs.fail()
        if legacy is not None:
            self.faulted.append(record)
            record.ended = time.monotonic()
            return self._answer(record, legacy)
        kind, stall_seconds = self.choose(call)
        record.fault = kind
        if kind is not None:
            self.fault_counts[(call.action, kind)] += 1
            self.faulted.append(record)
        try:
            if kind == OUTAGE:
                return self._answer(record, error_reply(call, "error"))
            if kind in ERROR_KINDS:
                return self._answer(record, error_reply(call, kind))
            if kind in ("stall", "stall_reset"):
                gevent.sleep(stall_seconds)
            if kind in ("reset", "stall_reset"):
                self._reset(environ)
            rewrite = self.rewrite
            if rewrite is not None:
                body = rewrite(call.action, body)
            environ["wsgi.input"] = io.BytesIO(body)
            reply = self.forward(environ, headers, body)
            if kind == "reset_after":
                self._reset(environ)
            return self._answer(record, reply)
        finally:
            record.ended = time.monotonic()

    @staticmethod
    def _answer(record: ChaosRequest, reply: Reply) -> Reply:
        record.status = reply[0]
        return reply

    @staticmethod
    def _reset(environ: dict[str, Any]) -> None:
        sock = environ["chaos.socket"]
        try:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, LINGER_ZERO)
        except OSError:
            pass  # the client left already: nothing to reset
        raise ResetConnection()


@pytest.fixture(name="chaos")
def chaos_fixture(moto_endpoint: str) -> Iterator[ChaosProxy]:
    """A ChaosProxy (seed 20240607) in front of the session's moto, listening, with no fault set yet."""
    proxy = ChaosProxy(moto_endpoint, seed=20240607)
    proxy.up()
    yield proxy
    proxy.stop()


def print_summary(name: str, proxy: ChaosProxy) -> None:
    print(f"{name}: " + ", ".join(
        f"{action} {row['requests']} ({', '.join(f'{k} {n}' for k, n in row['faults'].items()) or 'no faults'})"
        for action, row in proxy.summary().items()))


__all__ = ["ERROR_KINDS", "KINDS", "OUTAGE", "SQS_ACTIONS", "SQS_RUNTIME_ACTIONS", "Call", "ChaosProxy",
           "ChaosRequest", "Rule", "chaos_fixture", "classify", "error_reply", "print_summary"]
