"""Finished spans on their way to the collector: a bounded buffer that `on_end` only appends to, and one loop
that exports it in batches. A collector that is down or slow holds up the loop, never a delivery; past the
buffer's size spans are dropped, counted (`SpansDropped`), and said once per interval in a WARNING. The
exporter's HTTP session reads the environment once (`SettledSession`)."""

from __future__ import annotations

import logging
import os
import time
from collections import deque
from typing import Any

import gevent
import gevent.event
import requests
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult

from ..metrics import OVERALL, Count

logger = logging.getLogger(__name__)

# a session the SDK's exporter makes itself from a plugin these name (an AWS SigV4 signer, for one)
CREDENTIAL_PROVIDERS = ("OTEL_PYTHON_EXPORTER_OTLP_HTTP_CREDENTIAL_PROVIDER",
                        "OTEL_PYTHON_EXPORTER_OTLP_HTTP_TRACES_CREDENTIAL_PROVIDER")


class SettledSession(requests.Session):
    """requests' Session for the OTLP exporter, with what requests reads from the environment at every request,
    the proxy variables (HTTPS_PROXY, NO_PROXY: the whole environment walked twice) and REQUESTS_CA_BUNDLE, read
    at the first export and kept: the daemon's environment does not change while it runs. A third of an export's
    CPU here, more in a pod whose environment holds its cluster's service variables."""

    def __init__(self) -> None:
        super().__init__()
        self.settled: dict[tuple[Any, ...], dict[str, Any]] = {}

    def merge_environment_settings(self, url: str, proxies: Any, stream: Any, verify: Any,
                                   cert: Any) -> dict[str, Any]:
        if proxies:  # a request's own proxies (the exporter passes none): merged each time, as requests does
            return super().merge_environment_settings(url, proxies, stream, verify, cert)
        key = (url, stream, verify, tuple(cert) if isinstance(cert, list) else cert)
        settled = self.settled.get(key)
        if settled is None:
            settled = self.settled[key] = super().merge_environment_settings(url, proxies, stream, verify, cert)
        return {**settled, "proxies": dict(settled["proxies"])}


def exporter_session() -> requests.Session | None:
    """None where the SDK's exporter is to make its own session (a credential provider is named)."""
    return None if any(os.environ.get(name) for name in CREDENTIAL_PROVIDERS) else SettledSession()


class SpanBuffer:
    """The SDK's batching, on a gevent loop the daemon supervises, with its drops counted and reported."""

    def __init__(self, exporter: SpanExporter, count: Count, *, max_queue_size: int, batch_size: int,
                 delay_seconds: float, report_seconds: float) -> None:
        self.exporter = exporter
        self.count = count
        self.spans: deque[ReadableSpan] = deque()
        self.max_queue_size = max_queue_size
        self.batch_size = batch_size
        self.delay_seconds = delay_seconds
        self.report_seconds = report_seconds
        self.is_full = gevent.event.Event()
        self.dropped = 0  # since the last WARNING
        self.failed = 0  # batches the collector did not take since the last WARNING
        self.exporting = 0  # spans of the batches on their way to the collector
        self.reported_at = time.monotonic()

    def on_end(self, span: ReadableSpan) -> None:
        if len(self.spans) >= self.max_queue_size:
            self.dropped += 1
            self.count(OVERALL, "SpansDropped", 1)
            return
        self.spans.append(span)
        if len(self.spans) >= self.batch_size:
            self.is_full.set()

    def run(self, stopped: gevent.event.Event) -> None:
        """As the SDK's batching: every `delay_seconds` one batch, however few spans it has, and full batches
        as soon as they are full, until the daemon has stopped. The spans that end while a batch is on its way
        wait for their batch to fill or for the timer: sent at once, they made a POST of a few spans after every
        POST, and a POST costs the exporter about as much CPU as encoding eighty spans."""
        while not stopped.is_set():
            is_timed = not self.is_full.wait(self.delay_seconds)
            self.is_full.clear()
            self.export_waiting(at_least_one=is_timed)
            self.report()

    def export_waiting(self, at_least_one: bool = False, is_final: bool = False) -> None:
        """Full batches; with `at_least_one`, the first batch even if it is not full; at stop, all."""
        while len(self.spans) >= self.batch_size or (self.spans and (at_least_one or is_final)):
            at_least_one = False
            batch = [self.spans.popleft() for _ in range(min(self.batch_size, len(self.spans)))]
            self.exporting += len(batch)
            try:
                if self.exporter.export(batch) is not SpanExportResult.SUCCESS:
                    self.failed += 1
                    self.count(OVERALL, "SpanExportFailures", 1)
            except gevent.Timeout:  # the stop's time ran out (flush_final): not exported, still buffered
                self.spans.extendleft(reversed(batch))
                raise
            finally:
                self.exporting -= len(batch)

    def report(self, is_final: bool = False) -> None:
        """At most one WARNING per interval about what did not reach the collector (and one at stop)."""
        if not (self.dropped or self.failed) or (time.monotonic() - self.reported_at < self.report_seconds
                                                 and not is_final):
            return
        logger.warning("tracing: %d span batches not taken by the OTLP collector and %d spans dropped (buffer of %d "
                       "full) in the last %.0fs; deliveries go on", self.failed, self.dropped, self.max_queue_size,
                       time.monotonic() - self.reported_at)
        self.dropped = self.failed = 0
        self.reported_at = time.monotonic()

    def flush_final(self, timeout_seconds: float) -> None:
        """At stop: what is buffered goes out within `timeout_seconds` (what the stop's deadline leaves); what is
        left then, or still on its way (the export loop's batch too), is said."""
        with gevent.Timeout(timeout_seconds, False):
            self.export_waiting(is_final=True)
        self.report(is_final=True)
        if left := len(self.spans) + self.exporting:  # the export loop's batch too: a stalled collector holds it
            logger.warning("tracing: %d spans not taken by the OTLP collector within the %.1fs the stop had left for "
                           "them (still buffered, or on their way without an answer)", left, timeout_seconds)
