"""A counting reverse proxy in front of moto: every AWS request a daemon makes, by action.

Point a subprocess at it with `AWS_ENDPOINT_URL=proxy.url`. Requests are forwarded unchanged
(Host included, so moto builds the same queue URLs the client would see) and recorded with their
action (`X-Amz-Target` suffix for JSON protocols, `Action` for query ones), their parameters,
and when they started and ended. `delays[action]` holds that action back, to widen races;
`hold(matches)` holds the matching requests until the returned event is set, to close one.
"""

from __future__ import annotations

import http.client
import json
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any
from urllib.parse import parse_qs, urlsplit

import gevent
import gevent.event

from .http_app import RecordingServer, Reply, headers_from_environ

HOLD_SECONDS = 60.0
HOP_BY_HOP = {"connection", "keep-alive", "transfer-encoding", "content-length", "te", "upgrade"}


@dataclass
class ProxiedRequest:
    action: str
    params: dict[str, Any]
    started: float  # time.monotonic() when the request reached the proxy
    ended: float | None = None  # when moto's answer came back
    status: int | None = None
    security_token: str | None = None  # the X-Amz-Security-Token the request was signed with


def action_of(headers: Any, body: bytes, query: str) -> tuple[str, dict[str, Any]]:
    target = headers.get("x-amz-target")
    if target:
        try:
            params = json.loads(body) if body else {}
        except ValueError:
            params = {}
        return target.rsplit(".", 1)[-1], params if isinstance(params, dict) else {}
    form = {k: v[0] for k, v in parse_qs(query).items()}
    if headers.get("content-type", "").startswith("application/x-www-form-urlencoded"):
        form.update({k: v[0] for k, v in parse_qs(body.decode("utf-8", "replace")).items()})
    return form.get("Action", "unknown"), form


class CountingProxy(RecordingServer):
    """`proxy.requests` lists every request; `count(action)` and `actions()` summarize them."""

    def __init__(self, upstream: str) -> None:
        super().__init__()
        self.upstream = upstream
        self.requests: list[ProxiedRequest] = []
        self.delays: dict[str, float] = {}  # action -> seconds to hold it before forwarding
        self.holds: list[tuple[Callable[[str, dict[str, Any]], bool], gevent.event.Event]] = []
        parts = urlsplit(upstream)
        self._host, self._port = parts.hostname or "127.0.0.1", parts.port or 80

    def handle(self, environ: dict[str, Any], arrived: float) -> Reply:
        body = environ["wsgi.input"].read()
        headers = headers_from_environ(environ)
        query = environ.get("QUERY_STRING", "")
        action, params = action_of(headers, body, query)
        record = ProxiedRequest(action, params, arrived, security_token=headers.get("x-amz-security-token"))
        self.requests.append(record)
        delay = self.delays.get(action, 0.0)
        if delay:
            gevent.sleep(delay)
        for matches, released in list(self.holds):
            if matches(action, params):
                released.wait(HOLD_SECONDS)
        try:
            status, out, answer = self.forward(environ, headers, body)
        finally:
            record.ended = time.monotonic()
        record.status = status
        return status, out, answer

    def hold(self, matches: Callable[[str, dict[str, Any]], bool]) -> gevent.event.Event:
        """Hold every request for which `matches(action, params)` is true until the event is set (or
        HOLD_SECONDS pass, so that a test which never sets it cannot hang a daemon for good)."""
        released = gevent.event.Event()
        self.holds.append((matches, released))
        return released

    def forward(self, environ: dict[str, Any], headers: Any, body: bytes) -> Reply:
        """Send the request upstream unchanged (hop-by-hop headers aside); moto's answer, or a 502."""
        query = environ.get("QUERY_STRING", "")
        path = environ.get("PATH_INFO", "/") + (f"?{query}" if query else "")
        forward = {k: v for k, v in headers.items() if k not in HOP_BY_HOP}
        # 20 s long polls plus slack: the proxy must never be what times out first
        connection = http.client.HTTPConnection(self._host, self._port, timeout=120)
        try:
            connection.request(environ["REQUEST_METHOD"], path, body=body, headers=forward)
            response = connection.getresponse()
            answer = response.read()
            status = response.status
            out = {k: v for k, v in response.getheaders() if k.lower() not in HOP_BY_HOP}
        except (OSError, http.client.HTTPException) as error:
            # moto dropped the connection (e.g. a long poll abandoned at stop): say so, quietly
            status, out, answer = 502, {"Content-Type": "text/plain"}, repr(error).encode()
        finally:
            connection.close()
        return status, out, answer

    def count(self, action: str | None = None, since: float = 0.0, until: float = float("inf")) -> int:
        """Requests (of one action, if given) that reached the proxy within [since, until]."""
        return len(self.between(since, until, action))

    def between(self, since: float, until: float, action: str | None = None) -> list[ProxiedRequest]:
        return [r for r in list(self.requests)
                if since <= r.started <= until and (action is None or r.action == action)]

    def actions(self) -> dict[str, int]:
        counts: dict[str, int] = {}
        for request in list(self.requests):
            counts[request.action] = counts.get(request.action, 0) + 1
        return counts

    def pending(self, action: str | None = None) -> list[ProxiedRequest]:
        """Requests still waiting for moto's answer (e.g. long polls in progress)."""
        return [r for r in list(self.requests) if r.ended is None and (action is None or r.action == action)]
