"""A real local HTTP app (gevent pywsgi on 127.0.0.1, port 0) that records what it is sent.

It stands in for the worker application behind the aws-sqsd contract. Behaviour is set per test:
a `respond(request)` function and a `delay` that overlaps concurrent requests (gevent.sleep).
"""

from __future__ import annotations

import ssl
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from http import HTTPStatus
from typing import Any, Callable, TypeVar

import gevent
from gevent import pywsgi

from .wait import wait_until


class Headers(Mapping[str, str]):
    """Case-insensitive, read-only header map; keys are kept in lower case."""

    def __init__(self, items: dict[str, str]) -> None:
        self._items = {key.lower(): value for key, value in items.items()}

    def __getitem__(self, key: str) -> str:
        return self._items[key.lower()]

    def __iter__(self) -> Iterator[str]:
        return iter(self._items)

    def __len__(self) -> int:
        return len(self._items)

    def __repr__(self) -> str:
        return f"Headers({self._items!r})"


def headers_from_environ(environ: dict[str, Any]) -> Headers:
    """Rebuild request headers from a WSGI environ (names come back lower-case, '-'-separated)."""
    items = {
        key[5:].replace("_", "-"): value
        for key, value in environ.items()
        if key.startswith("HTTP_")
    }
    for key in ("CONTENT_TYPE", "CONTENT_LENGTH"):
        if environ.get(key):
            items[key.replace("_", "-")] = environ[key]
    return Headers(items)


@dataclass(frozen=True)
class RecordedRequest:
    method: str
    path: str
    query: str
    headers: Headers
    body: bytes
    arrived: float  # time.monotonic() when the request reached the app


Reply = tuple[int, dict[str, str], bytes]
T = TypeVar("T")


def status_line(status: int) -> str:
    try:
        return f"{status} {HTTPStatus(status).phrase}"
    except ValueError:
        return f"{status} Unknown"


class RecordingServer:
    """pywsgi server on an ephemeral port that tracks how many requests it handles at once."""

    def __init__(self, ssl_context: ssl.SSLContext | None = None) -> None:
        """With `ssl_context`, the server speaks HTTPS (see tests/support/tls.py for a certificate)."""
        self.max_concurrent = 0
        self.in_flight = 0
        self.scheme = "https" if ssl_context is not None else "http"
        tls = {"ssl_context": ssl_context} if ssl_context is not None else {}
        self._server = pywsgi.WSGIServer(("127.0.0.1", 0), self._wsgi, log=None, **tls)

    def start(self) -> None:
        self._server.start()

    def stop(self) -> None:
        self._server.stop(timeout=1)

    @property
    def url(self) -> str:
        return f"{self.scheme}://127.0.0.1:{self._server.server_port}"

    def _wsgi(self, environ: dict[str, Any], start_response: Callable[..., Any]) -> list[bytes]:
        status, headers, body = self.counted(self.handle, environ)
        header_list = [(k, v) for k, v in headers.items() if k.lower() != "content-length"]
        header_list.append(("Content-Length", str(len(body))))
        start_response(status_line(status), header_list)
        return [body]

    def counted(self, handle: Callable[[dict[str, Any], float], T], environ: dict[str, Any]) -> T:
        """Run `handle(environ, arrival time)` while counting it in `in_flight` and `max_concurrent`."""
        self.in_flight += 1
        self.max_concurrent = max(self.max_concurrent, self.in_flight)
        try:
            return handle(environ, time.monotonic())
        finally:
            self.in_flight -= 1

    def handle(self, environ: dict[str, Any], arrived: float) -> Reply:
        raise NotImplementedError


class HttpApp(RecordingServer):
    """The HTTP target. Set `respond` (request -> (status, headers, body)) and `delay` seconds."""

    def __init__(self, ssl_context: ssl.SSLContext | None = None) -> None:
        super().__init__(ssl_context)
        self.requests: list[RecordedRequest] = []
        self.respond: Callable[[RecordedRequest], Reply] = lambda req: (200, {}, b"")
        self.delay: float = 0.0
        self.answered_at: dict[int, float] = {}  # id(request) -> time.monotonic() when its reply was made

    def set_status(
        self, status: int, headers: dict[str, str] | None = None, body: bytes = b""
    ) -> None:
        """Answer every request with the same reply."""
        reply = (status, dict(headers or {}), body)
        self.respond = lambda req: reply

    def handle(self, environ: dict[str, Any], arrived: float) -> Reply:
        reply: Reply = self.handle_request(environ, arrived)[1]
        return reply

    def handle_request(self, environ: dict[str, Any], arrived: float) -> tuple[RecordedRequest, Any]:
        """Record the request on arrival, wait out `delay`, then ask `respond` for the reply."""
        request = RecordedRequest(
            method=environ["REQUEST_METHOD"],
            path=environ.get("PATH_INFO", ""),
            query=environ.get("QUERY_STRING", ""),
            headers=headers_from_environ(environ),
            body=environ["wsgi.input"].read(),
            arrived=arrived,
        )
        self.requests.append(request)  # recorded on arrival, before the delay
        if self.delay:
            gevent.sleep(self.delay)
        reply = self.respond(request)
        self.answered_at[id(request)] = time.monotonic()
        return request, reply

    def wait_for_requests(self, n: int, timeout: float = 10.0) -> list[RecordedRequest]:
        """Wait until at least `n` requests have arrived; return all of them."""
        wait_until(
            lambda: len(self.requests) >= n,
            timeout,
            message=lambda: f"expected {n} requests, got {len(self.requests)}",
        )
        return list(self.requests)
