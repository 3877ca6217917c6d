"""The status server: /healthz, /readyz, /metrics, /status and a small live page, in the daemon process."""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable, Iterable
from typing import Any, Protocol

import gevent.event
import gevent.pool
from gevent import pywsgi

from . import __version__
from .config import Config
from .errors import StartupError
from .metrics import COUNTERS, OVERALL, Registry
from .poller import Poller, Work
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
    poller: Poller
    stopping: gevent.event.Event

    @property
    def in_flight(self) -> set[Work]: ...

    def are_loops_alive(self) -> bool: ...


def count_in_flight(in_flight: Iterable[Work], queue_names: Iterable[str]) -> dict[str, float]:
    """Messages being delivered per queue, zero included: the reader behind the InFlight gauge."""
    counts = dict.fromkeys(queue_names, 0.0)
    for work in list(in_flight):
        counts[work.state.queue.name] = counts.get(work.state.queue.name, 0.0) + len(work.messages)
    return counts


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
    reasons = []
    now = time.monotonic()
    for state in view.poller.states:
        if state.failing_since is not None and now - state.failing_since >= view.config.unready_after:
            reasons.append(f"queue {state.queue.name}: receives failing for {now - state.failing_since:.0f}s "
                           f"({state.last_error})")
        paused = state.is_paused()
        if paused > 0:
            reasons.append(f"queue {state.queue.name}: target {state.queue.config.target} paused for "
                           f"{paused:.1f}s more")
    return reasons


def build_snapshot(view: DaemonView, started_at: float) -> dict[str, Any]:
    """The /status document; the page and the Prometheus gauges are drawn from it too."""
    healthy, health = check_health(view)
    not_ready = check_readiness(view)
    if healthy and not_ready:
        health = "not ready: " + "; ".join(not_ready)
    registry, config = view.registry, view.config
    messages = message_rows(view)
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
        "queues": queue_rows(view),
        "in_flight_count": len(messages),
        "in_flight": messages[:MAX_LISTED_MESSAGES],
        "totals": {name: registry.total(name) for name in COUNTERS},
        "failures": failures,
    }


def queue_rows(view: DaemonView) -> list[dict[str, Any]]:
    in_flight = count_in_flight(view.in_flight, (state.queue.name for state in view.poller.states))
    return [{
        "name": state.queue.name,
        "target": state.queue.config.target,
        "state": "ready" if state.is_ready else "idle",
        "buffered": len(state.buffer),
        "in_flight": int(in_flight.get(state.queue.name, 0)),
        "receive_failures": state.failures,
        "failing_seconds": round(time.monotonic() - state.failing_since, 1) if state.failing_since else 0.0,
        "paused_seconds": round(max(0.0, state.is_paused()), 1),
        "totals": {name: view.registry.total(name, state.queue.name) for name in COUNTERS},
    } for state in view.poller.states]


def message_rows(view: DaemonView) -> list[dict[str, Any]]:
    """Every message being delivered, oldest first; age counts from its receive."""
    now = time.time()
    rows: list[dict[str, Any]] = [{
        "id": message.message_id,
        "queue": work.state.queue.name,
        "target": work.state.queue.config.target,
        "age_seconds": round(max(0.0, now - message.received_at), 1),
        "receive_count": message.receive_count,
    } for work in list(view.in_flight) for message in work.messages]
    rows.sort(key=lambda entry: -float(entry["age_seconds"]))
    return rows


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
