"""Waiting for an HTTP target's app: with `ready_path` set, nothing is received for the target's queues
until GET of that path answers 2xx (apps often start slower than the daemon, and their first messages
would fail and count toward max_retries). Checked every second while the daemon runs: an app that
stops answering for FAILURES_TO_CLOSE checks in a row is waited for again, as a readiness probe does."""

from __future__ import annotations

import logging
import time
import urllib.parse
from collections.abc import Callable

import gevent.event

from .. import __version__
from ..config.model import HttpTargetConfig
from ..logs import fields
from ..wire.http import Connections, host_header, tls_context
from ..wire.watchdog import DeadlineExceeded

logger = logging.getLogger(__name__)

CHECK_SECONDS = 1.0
TIMEOUT_SECONDS = 2.0  # each GET, connect included
FAILURES_TO_CLOSE = 3  # once ready, one slow answer under load must not stop the deliveries
WARN_EVERY_SECONDS = 60.0  # while waiting: a WARNING this often, not one per check


class AppReadiness:
    """One target's gate; `remaining_seconds` is read like the target's `Pause`, and `on_ready` wakes the
    slots waiting behind it."""

    def __init__(self, config: HttpTargetConfig, on_ready: Callable[[], None], ca_bundle: str | None = None) -> None:
        """The same host, port, scheme, trust and headers (an Authorization, say) as the deliveries."""
        url = urllib.parse.urlsplit(config.url)
        path = urllib.parse.quote(config.ready_path or "/", safe="!$%&'()*+,/:;=?@[]~")
        scheme = url.scheme or "http"
        host, port = url.hostname or "127.0.0.1", url.port or (443 if scheme == "https" else 80)
        self.target = config.name
        self.url = f"{scheme}://{host_header(host, port, scheme)}{path}"
        self.on_ready = on_ready
        self.connections = Connections(host, port, limit=1, connect_timeout=min(TIMEOUT_SECONDS, config.connect_timeout),
                                       read_timeout=TIMEOUT_SECONDS, keep_body=False,
                                       tls=tls_context(ca_bundle) if scheme == "https" else None,
                                       keepalive_idle=config.keepalive_idle)
        headers = "".join(f"{name}: {value}\r\n" for name, value in config.headers.items())
        self.request = (f"GET {path} HTTP/1.1\r\nHost: {host_header(host, port, scheme)}\r\n"
                        f"User-Agent: aws-sqsd/{__version__} (workerless)\r\n{headers}\r\n").encode("latin-1")
        self.is_ready = False
        self.failures = 0  # failed checks in a row
        self.last_error = ""
        self.last_error_at = 0.0  # its time.time()
        self.waiting_since = time.monotonic()
        self.warned_at = self.waiting_since

    def remaining_seconds(self) -> float:
        """As `Pause.remaining_seconds`: above zero while the app is not ready (the next check is that far)."""
        return 0.0 if self.is_ready else CHECK_SECONDS

    @property
    def state(self) -> str:
        return "ready" if self.is_ready else "waiting"

    def run(self, stopped: gevent.event.Event) -> None:
        """The checking loop, supervised by the daemon; it ends once `stopped` is set."""
        logger.info("target=%s waiting for the app: nothing is received for its queues until GET %s answers 2xx",
                    self.target, self.url, extra=fields(target=self.target))
        try:
            while not stopped.is_set():
                self.note(self.check(), time.monotonic())
                stopped.wait(CHECK_SECONDS)
        finally:
            self.connections.close()

    def check(self) -> str:
        """What went wrong with one GET, or "" for a 2xx answer."""
        try:
            reply = self.connections.exchange(self.request, deadline=time.monotonic() + TIMEOUT_SECONDS)
        except DeadlineExceeded:
            return f"no answer within {TIMEOUT_SECONDS:g}s"
        except OSError as error:
            return f"{type(error).__name__}: {error}" if str(error) else type(error).__name__
        except Exception as error:  # a malformed answer is a not-ready app, never a dead loop
            return f"{type(error).__name__}: {error}"
        return "" if 200 <= reply.status < 300 else f"HTTP {reply.status}"

    def note(self, problem: str, now: float) -> None:
        """One check's result: open the gate at the first 2xx, close it after FAILURES_TO_CLOSE failures."""
        if not problem:
            self.failures = 0
            if not self.is_ready:
                self.is_ready = True
                logger.info("target=%s app ready after %.1fs: GET %s answered 2xx; receiving for its queues",
                            self.target, now - self.waiting_since, self.url, extra=fields(target=self.target))
                self.on_ready()
            return
        self.failures += 1
        self.last_error = f"GET {self.url}: {problem}"
        self.last_error_at = time.time()
        if self.is_ready and self.failures >= FAILURES_TO_CLOSE:
            self.is_ready = False
            self.waiting_since = self.warned_at = now
            logger.warning("target=%s app not ready: %s (%d checks in a row); nothing is received for its queues "
                           "until it answers 2xx", self.target, self.last_error, self.failures,
                           extra=fields(target=self.target))
        elif not self.is_ready and now - self.warned_at >= WARN_EVERY_SECONDS:
            self.warned_at = now
            logger.warning("target=%s app still not ready after %.0fs: %s; nothing is received for its queues",
                           self.target, now - self.waiting_since, self.last_error, extra=fields(target=self.target))
