"""The explorer's app: a real HTTP server on 127.0.0.1 that answers, fails, hangs or is overloaded as the schedule's
timeline says, fails its poison messages every time, and records every request (a delivery attempt) and its
answer. Like nginx (large_client_header_buffers 8k) and gunicorn (limit_request_field_size 8190), it refuses a
request with a header line over 8 KB (400), and records that."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import gevent
import gevent.pool
from gevent import pywsgi

from tests.support.http_app import headers_from_environ

HEADER_LINE_LIMIT = 8190  # bytes of "Name: value", as gunicorn's limit_request_field_size
HANG_SECONDS = 60.0  # longer than any delivery deadline: the daemon gives up first
MODES = ("answer", "fail", "hang", "overload", "slow")


@dataclass
class Delivery:
    message_id: str
    serial: int  # the message's number in its schedule (from the body), -1 if the body is not ours
    key_header: str | None
    receive_count: str  # X-Aws-Sqsd-Receive-Count: which receive of the message this delivery is from
    arrived: float
    arrived_at: float  # time.time(), to compare with a claim's deadline (epoch seconds)
    status: int = 0  # 0 until answered (a hang is never answered)
    answered: float = 0.0
    refused: str = ""  # why the app refused the request itself (a header line over the limit)

    @property
    def succeeded(self) -> bool:
        return 200 <= self.status < 300


def serial_of(body: bytes) -> int:
    try:
        document = json.loads(body)
    except ValueError:
        return -1
    return int(document.get("n", -1)) if isinstance(document, dict) else -1


class ExploreApp:
    def __init__(self) -> None:
        self.mode = "answer"
        self.slow_seconds = 0.2
        self.poison: set[int] = set()
        self.deliveries: list[Delivery] = []
        self.server = pywsgi.WSGIServer(("127.0.0.1", 0), self.wsgi, log=None, error_log=None,
                                        spawn=gevent.pool.Pool(500))
        self.server.start()
        self.url = f"http://127.0.0.1:{self.server.server_port}/"

    def stop(self) -> None:
        self.server.stop(timeout=0)

    def wsgi(self, environ: dict[str, Any], start_response: Callable[..., Any]) -> list[bytes]:
        headers = headers_from_environ(environ)
        body = environ["wsgi.input"].read()
        delivery = Delivery(headers.get("x-aws-sqsd-msgid", ""), serial_of(body),
                            headers.get("x-workerless-idempotency-key"), headers.get("x-aws-sqsd-receive-count", ""),
                            time.monotonic(), time.time())
        self.deliveries.append(delivery)
        status = self.answer(delivery, headers)
        delivery.status, delivery.answered = status, time.monotonic()
        start_response(f"{status} {'OK' if status < 300 else 'Error'}", [("Content-Length", "0")])
        return [b""]

    def answer(self, delivery: Delivery, headers: Any) -> int:
        # WSGI hands header values over as latin-1 text: one character per byte received
        longest = max((len(name) + 2 + len(value) for name, value in headers.items()), default=0)
        if longest > HEADER_LINE_LIMIT:
            delivery.refused = f"a header line of {longest} bytes"
            return 400
        mode = self.mode
        if mode == "hang":
            gevent.sleep(HANG_SECONDS)
        if mode == "slow":
            gevent.sleep(self.slow_seconds)
        if delivery.serial in self.poison or mode == "fail":
            return 500
        return 429 if mode == "overload" else 200
