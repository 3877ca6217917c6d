"""The explorer's app: a real HTTP server on 127.0.0.1 that answers, fails, hangs or is overloaded as the schedule's
timeline says, fails its poison messages every time, and records every attempt to deliver a message and its
answer. It takes one message per POST (the aws-sqsd contract), a batch per POST (`{"Records": [...]}`, answered
with `batchItemFailures`), or a Lambda Invoke of the same event (the function's side: a function error, a throttle).
Like nginx (large_client_header_buffers 8k) and gunicorn (limit_request_field_size 8190), it refuses a request
with a header line over 8 KB (400), and records that. Its `plan` faults a share of the Invokes and POSTs."""

from __future__ import annotations

import json
import re
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import gevent
import gevent.pool
from gevent import pywsgi

from tests.support.http_app import Headers, headers_from_environ

from .faults import Fault, FaultPlan

HEADER_LINE_LIMIT = 8190  # bytes of "Name: value", as gunicorn's limit_request_field_size
HANG_SECONDS = 60.0  # longer than any delivery deadline: the daemon gives up first
MODES = ("answer", "fail", "hang", "overload", "slow")
INVOKE = re.compile(r"^/2015-03-31/functions/([^/]+)/invocations$")
Reply = tuple[int, dict[str, str], bytes]
FAULT_STATUS = {"throttle": 429, "overload": 429, "error": 500, "function_error": 500, "fail": 500}


@dataclass
class Delivery:
    """One attempt to deliver one message: a POST of it, or its record in a batch POST or an Invoke."""
    message_id: str
    serial: int  # the message's number in its schedule (from the body), -1 if the body is not ours
    key_header: str | None
    receive_count: str  # which receive of the message this attempt is from (header or record attribute)
    arrived: float
    arrived_at: float  # time.time(), to compare with a claim's deadline (epoch seconds)
    status: int = 0  # 0 until answered (a hang is never answered); a record named in batchItemFailures: 500
    answered: float = 0.0
    refused: str = ""  # why the app refused the request itself (a header line over the limit)
    via: str = "post"  # post | batch | invoke
    batch: int = 0  # the batch POST or Invoke it came in (numbered from 1), 0 alone
    position: int = 0  # its record's place in that batch

    @property
    def succeeded(self) -> bool:
        return 200 <= self.status < 300


def serial_of(body: str | bytes) -> int:
    try:
        document = json.loads(body)
    except ValueError:
        return -1
    return int(document.get("n", -1)) if isinstance(document, dict) else -1


def records_of(body: bytes) -> list[dict[str, Any]]:
    try:
        document = json.loads(body)
    except ValueError:
        return []
    records = document.get("Records") if isinstance(document, dict) else None
    return [record for record in records if isinstance(record, dict)] if isinstance(records, list) else []


class ExploreApp:
    def __init__(self, seed: int = 0) -> None:
        self.mode = "answer"
        self.slow_seconds = 0.2
        self.poison: set[int] = set()
        self.deliveries: list[Delivery] = []
        self.batches = 0
        self.plan = FaultPlan(seed)  # actions "Invoke" (Lambda) and "Post" (HTTP, one message or a batch)
        self.server = pywsgi.WSGIServer(("127.0.0.1", 0), self.wsgi, log=None, error_log=None,
                                        spawn=gevent.pool.Pool(500))
        self.server.start()
        self.url = f"http://127.0.0.1:{self.server.server_port}/"

    def stop(self) -> None:
        self.plan.ended.set()
        self.server.stop(timeout=0)

    def wsgi(self, environ: dict[str, Any], start_response: Callable[..., Any]) -> list[bytes]:
        headers = headers_from_environ(environ)
        body = environ["wsgi.input"].read()
        is_invoke = INVOKE.match(environ.get("PATH_INFO", "")) is not None
        if is_invoke or "x-aws-sqsd-msgcount" in headers:
            status, out, answer = self.batch(records_of(body), "invoke" if is_invoke else "batch")
        else:
            status, out, answer = self.one(headers, body)
        start_response(f"{status} {'OK' if status < 300 else 'Error'}",
                       [*out.items(), ("Content-Length", str(len(answer)))])
        return [answer]

    def one(self, headers: Headers, body: bytes) -> Reply:
        delivery = Delivery(headers.get("x-aws-sqsd-msgid", ""), serial_of(body),
                            headers.get("x-workerless-idempotency-key"), headers.get("x-aws-sqsd-receive-count", ""),
                            time.monotonic(), time.time())
        self.deliveries.append(delivery)
        status = self.refusal(delivery, headers) or self.status_now(self.plan.choose("Post"))
        if status == 200 and delivery.serial in self.poison:
            status = 500
        delivery.status, delivery.answered = status, time.monotonic()
        return status, {}, b""

    def batch(self, records: list[dict[str, Any]], via: str) -> Reply:
        """A batch POST or an Invoke: one Delivery per record; poison records named in batchItemFailures."""
        now, wall = time.monotonic(), time.time()
        self.batches += 1
        deliveries = [Delivery(str(record.get("messageId", "")), serial_of(str(record.get("body", ""))), None,
                               str(record.get("attributes", {}).get("ApproximateReceiveCount", "")), now, wall,
                               via=via, batch=self.batches, position=position)
                      for position, record in enumerate(records)]
        self.deliveries.extend(deliveries)
        fault = self.plan.choose("Invoke" if via == "invoke" else "Post")
        status = self.status_now(fault)
        failures = [d.message_id for d in deliveries if d.serial in self.poison]
        answered = time.monotonic()
        for delivery in deliveries:
            failed = status == 200 and delivery.message_id in failures
            delivery.status, delivery.answered = 500 if failed else status, answered
        return self.batch_reply(status, via, fault, failures)

    @staticmethod
    def batch_reply(status: int, via: str, fault: Fault | None, failures: list[str]) -> Reply:
        kind = fault.kind if fault is not None else ""
        if via == "invoke" and status == 429:
            return 429, {"x-amzn-ErrorType": "TooManyRequestsException"}, b'{"message": "Rate exceeded"}'
        if via == "invoke" and status == 500 and kind == "error":
            return 500, {"x-amzn-ErrorType": "ServiceException"}, b'{"message": "injected by the explorer"}'
        if via == "invoke" and status == 500:
            return 200, {"X-Amz-Function-Error": "Unhandled"}, b'{"errorMessage": "boom", "errorType": "Exception"}'
        answer = {"batchItemFailures": [{"itemIdentifier": message_id} for message_id in failures]}
        return status, {"Content-Type": "application/json"}, json.dumps(answer).encode()

    def refusal(self, delivery: Delivery, headers: Headers) -> int:
        # WSGI hands header values over as latin-1 text: one character per byte received
        longest = max((len(name) + 2 + len(value) for name, value in headers.items()), default=0)
        if longest > HEADER_LINE_LIMIT:
            delivery.refused = f"a header line of {longest} bytes"
            return 400
        return 0

    def status_now(self, fault: Fault | None) -> int:
        """The answer to an attempt arriving now, after whatever wait the mode or a fault asks for."""
        mode = self.mode
        if fault is not None:
            self.plan.hold(fault.delay)
            if fault.kind in FAULT_STATUS:
                return FAULT_STATUS[fault.kind]
        if mode == "hang":
            gevent.sleep(HANG_SECONDS)
        if mode == "slow":
            gevent.sleep(self.slow_seconds)
        if mode == "fail":
            return 500
        return 429 if mode == "overload" else 200
