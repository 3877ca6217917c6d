"""The status server: /healthz, /readyz, /metrics, /status and a small live page, in the daemon process.

It serves the document `snapshot.build_snapshot` draws from the rows the daemon publishes and the
metrics registry."""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable
from typing import Any

import gevent.event
import gevent.pool
from gevent import pywsgi

from ..errors import StartupError
from ..metrics import OVERALL
from .history import History
from .snapshot import DaemonView, DeliveryRates, build_snapshot, check_health, check_readiness
from .status_page import render_page

logger = logging.getLogger(__name__)

MAX_CONNECTIONS = 20  # an operator's browser and a scraper, not a public service
WATCH_SECONDS = 2.0  # how often the server's accept loop is checked
StartResponse = Callable[..., Any]
# The classic text format, which every Prometheus version scrapes (the library defaults to 1.0.0).
METRICS_CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"


class StatusServer:
    """gevent pywsgi on `listen`; the socket is bound at construction so a busy port fails the start."""

    def __init__(self, listen: str, view: DaemonView) -> None:
        host, _, port = listen.rpartition(":")
        self.view = view
        self.started_at = time.monotonic()
        self.rates = DeliveryRates(view.registry)
        self.history = History(view.registry, lambda: view.config.concurrency)  # the page's charts
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
            self.rates.sample()  # so that the first look at the page already has deliveries per second
            self.history.sample()
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
        """The snapshot and, under `series`, the last 15 minutes the charts draw."""
        document = build_snapshot(self.view, self.started_at, self.rates)
        document["series"] = self.history.document()
        return document

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
