"""The status server: /healthz, /readyz, /metrics, /status and a small live page, in the daemon process.

It renders plain rows the delivery side publishes (`poller.QueueRow`, `slots.MessageRow`) and the
metrics registry; it never reads a queue's or a slot's live fields."""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable
from typing import Any, Protocol

import gevent.event
import gevent.pool
from gevent import pywsgi

from .. import __version__
from ..config.model import Config
from ..delivery.flow import TargetRow
from ..delivery.poller import QueueRow
from ..delivery.slots import MessageRow
from ..errors import StartupError
from ..metrics import COUNTERS, OVERALL, Registry
from .status_page import render_page

logger = logging.getLogger(__name__)

MAX_CONNECTIONS = 20  # an operator's browser and a scraper, not a public service
MAX_LISTED_MESSAGES = 500  # keeps /status and the page small at high concurrency
WATCH_SECONDS = 2.0  # how often the server's accept loop is checked
StartResponse = Callable[..., Any]
# The classic text format, which every Prometheus version scrapes (the library defaults to 1.0.0).
METRICS_CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"


class DaemonView(Protocol):
    """What the status server may read from the daemon; it never changes any of it."""

    config: Config
    registry: Registry
    stopping: gevent.event.Event

    def queue_rows(self) -> list[QueueRow]: ...

    def message_rows(self) -> list[MessageRow]: ...

    def target_rows(self) -> list[TargetRow]: ...

    def are_loops_alive(self) -> bool: ...


def check_health(view: DaemonView) -> tuple[bool, str]:
    """Liveness: the hub answers (this runs) and every supervised loop is alive, SQS outage or not."""
    if view.stopping.is_set():
        return False, "stopping"
    if not view.are_loops_alive():
        return False, "a background loop has died"
    return True, "ok"


def check_readiness(view: DaemonView) -> list[str]:
    """Why the daemon should get no traffic now (empty when ready): stopping, a queue whose receives
    have failed for `unready_after` seconds or more, or a queue whose target is paused."""
    if view.stopping.is_set():
        return ["stopping"]
    return readiness_reasons(view.queue_rows(), view.config.unready_after)


def readiness_reasons(rows: list[QueueRow], unready_after: float) -> list[str]:
    reasons = []
    for row in rows:
        if row.failing_seconds and row.failing_seconds >= unready_after:
            reasons.append(f"queue {row.name}: receives failing for {row.failing_seconds:.0f}s ({row.last_error})")
        if row.paused_seconds > 0:
            reasons.append(f"queue {row.name}: target {row.target} paused for {row.paused_seconds:.1f}s more")
    return reasons


def build_snapshot(view: DaemonView, started_at: float) -> dict[str, Any]:
    """The /status document; the page and the Prometheus gauges are drawn from it too."""
    healthy, health = check_health(view)
    rows = view.queue_rows()
    not_ready = ["stopping"] if view.stopping.is_set() else readiness_reasons(rows, view.config.unready_after)
    if healthy and not_ready:
        health = "not ready: " + "; ".join(not_ready)
    registry, config = view.registry, view.config
    messages = [{"id": row.id, "queue": row.queue, "target": row.target, "age_seconds": round(row.age_seconds, 1),
                 "receive_count": row.receive_count} for row in view.message_rows()]
    failures = [{"type": error_type or "unknown", "count": count, "latest_error": error}
                for error_type, (count, error) in sorted(registry.failure_types.items(), key=lambda item: -item[1][0])]
    return {
        "name": config.name,
        "version": __version__,
        "healthy": healthy,
        "health": health,
        "ready": not not_ready,
        "not_ready": not_ready,
        "stopping": view.stopping.is_set(),
        "uptime_seconds": round(time.monotonic() - started_at, 1),
        "concurrency": config.concurrency,
        "strategy": config.polling.strategy,
        "queues": queue_rows(rows, messages, registry),
        "targets": [{"name": row.name, "limit": row.limit, "max_concurrency": row.max_concurrency,
                     "rate_limit": row.rate_limit, "in_flight": row.in_flight} for row in view.target_rows()],
        "in_flight_count": len(messages),
        "in_flight": messages[:MAX_LISTED_MESSAGES],
        "totals": {name: registry.total(name) for name in COUNTERS},
        "failures": failures,
    }


def queue_rows(rows: list[QueueRow], messages: list[dict[str, Any]], registry: Registry) -> list[dict[str, Any]]:
    in_flight = dict.fromkeys((row.name for row in rows), 0)
    for message in messages:
        in_flight[message["queue"]] = in_flight.get(message["queue"], 0) + 1
    return [{
        "name": row.name,
        "target": row.target,
        "state": row.state,
        "buffered": row.buffered,
        "in_flight": in_flight.get(row.name, 0),
        "receive_failures": row.receive_failures,
        "failing_seconds": round(row.failing_seconds, 1),
        "paused_seconds": round(row.paused_seconds, 1),
        "totals": {name: registry.total(name, row.name) for name in COUNTERS},
    } for row in rows]


class StatusServer:
    """gevent pywsgi on `listen`; the socket is bound at construction so a busy port fails the start."""

    def __init__(self, listen: str, view: DaemonView) -> None:
        host, _, port = listen.rpartition(":")
        self.view = view
        self.started_at = time.monotonic()
        self.exposition: Callable[[], bytes] | None = None  # built at the first scrape: prometheus-client costs 7 ms to import
        self.server = self.bind((host, int(port)), listen)

    def bind(self, address: tuple[str, int], listen: str) -> pywsgi.WSGIServer:
        server = pywsgi.WSGIServer(address, self.app, log=None, error_log=logger, spawn=gevent.pool.Pool(MAX_CONNECTIONS))
        try:
            server.init_socket()
        except OSError as error:
            raise StartupError(f"status server cannot listen on {listen}: {error.strerror or error}") from None
        return server

    def keep_serving(self, stopped: gevent.event.Event) -> None:
        """Supervision of the server's accept loop: gevent closes a server for good after an error it
        deems fatal, and the probes would then fail while the daemon works; listen again instead."""
        while not stopped.wait(WATCH_SECONDS):
            if self.server.closed and not stopped.is_set():
                address = self.server.address[:2]
                logger.error("status server on %s:%s stopped listening; listening again", *address)
                self.view.registry.count(OVERALL, "InternalErrors")
                self.server = self.bind(address, f"{address[0]}:{address[1]}")
                self.server.start()

    @property
    def url(self) -> str:
        host, port = self.server.address[:2]
        return f"http://{host}:{port}"

    def start(self) -> None:
        self.server.start()
        logger.info("status server listening on %s", self.url)

    def stop(self) -> None:
        self.server.stop(timeout=1)

    def snapshot(self) -> dict[str, Any]:
        return build_snapshot(self.view, self.started_at)

    def app(self, environ: dict[str, Any], start_response: StartResponse) -> list[bytes]:
        if environ.get("REQUEST_METHOD") not in ("GET", "HEAD"):
            return respond(start_response, "405 Method Not Allowed", "text/plain", b"GET only\n")
        path = environ.get("PATH_INFO", "/")
        if path == "/healthz":
            healthy, reason = check_health(self.view)
            status = "200 OK" if healthy else "503 Service Unavailable"
            return respond(start_response, status, "text/plain; charset=utf-8", reason.encode() + b"\n")
        if path == "/readyz":
            reasons = check_readiness(self.view)
            body = json.dumps({"ready": not reasons, "reasons": reasons}).encode() + b"\n"
            return respond(start_response, "503 Service Unavailable" if reasons else "200 OK", "application/json", body)
        if path == "/metrics":
            if self.exposition is None:
                from .prometheus import build_exposition

                self.exposition = build_exposition(self.view.registry, self.snapshot)
            return respond(start_response, "200 OK", METRICS_CONTENT_TYPE, self.exposition())
        if path == "/status":
            body = json.dumps(self.snapshot(), indent=1).encode()
            return respond(start_response, "200 OK", "application/json", body)
        if path in ("/", "/index.html"):
            return respond(start_response, "200 OK", "text/html; charset=utf-8", render_page(self.snapshot()).encode())
        return respond(start_response, "404 Not Found", "text/plain", b"try /, /status, /metrics, /healthz or /readyz\n")


def respond(start_response: StartResponse, status: str, content_type: str, body: bytes) -> list[bytes]:
    start_response(status, [("Content-Type", content_type), ("Content-Length", str(len(body))),
                            ("Cache-Control", "no-store")])
    return [body]
