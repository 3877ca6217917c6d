"""tracing/export.py's SpanBuffer batches as the SDK's batching does: full batches at once, one batch (however
small) when the timer fires, and all at stop; the spans that end while a batch is on its way wait for theirs."""

from __future__ import annotations

from collections.abc import Sequence

import gevent
import gevent.event
import pytest

pytest.importorskip("opentelemetry.sdk")

from opentelemetry.sdk.trace import ReadableSpan  # noqa: E402
from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult  # noqa: E402

from tests.support import wait_until  # noqa: E402
from workerless_gevent.tracing.export import SpanBuffer  # noqa: E402

HOUR = 3600.0


class HeldExporter(SpanExporter):
    """Takes each batch and, while `is_held`, keeps it on its way (as a POST waits for the collector)."""

    def __init__(self) -> None:
        self.batches: list[int] = []
        self.is_held = False
        self.released = gevent.event.Event()
        self.is_exporting = False

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        self.batches.append(len(spans))
        if self.is_held:
            self.is_exporting = True
            self.released.wait(30)
            self.is_exporting = False
        return SpanExportResult.SUCCESS


def buffer_of(exporter: HeldExporter, batch_size: int, delay_seconds: float) -> SpanBuffer:
    return SpanBuffer(exporter, lambda *_: None, max_queue_size=100, batch_size=batch_size,
                      delay_seconds=delay_seconds, report_seconds=HOUR)


def end(buffer: SpanBuffer, count: int) -> None:
    for _ in range(count):
        buffer.on_end(ReadableSpan("orders process"))


def test_spans_that_end_while_a_batch_is_on_its_way_wait_for_their_own_batch_to_fill() -> None:
    exporter = HeldExporter()
    exporter.is_held = True
    buffer, stopped = buffer_of(exporter, batch_size=5, delay_seconds=HOUR), gevent.event.Event()
    loop = gevent.spawn(buffer.run, stopped)
    try:
        end(buffer, 5)
        wait_until(lambda: exporter.is_exporting, timeout=10, message="the first batch on its way")
        end(buffer, 2)
        exporter.is_held = False
        exporter.released.set()
        wait_until(lambda: not exporter.is_exporting, timeout=10, message="the first batch taken")
        end(buffer, 3)
        wait_until(lambda: sum(exporter.batches) == 10, timeout=10, message="ten spans exported")
        assert exporter.batches == [5, 5]
    finally:
        stopped.set()
        loop.kill()


def test_the_timer_sends_one_batch_however_few_spans_it_has() -> None:
    exporter = HeldExporter()
    buffer, stopped = buffer_of(exporter, batch_size=512, delay_seconds=0.05), gevent.event.Event()
    loop = gevent.spawn(buffer.run, stopped)
    try:
        end(buffer, 3)
        wait_until(lambda: exporter.batches == [3], timeout=10, message="the three spans exported")
    finally:
        stopped.set()
        loop.kill()


def test_at_stop_every_span_goes_out_in_batches() -> None:
    exporter = HeldExporter()
    buffer = buffer_of(exporter, batch_size=5, delay_seconds=HOUR)
    end(buffer, 12)
    buffer.flush_final(timeout_seconds=10)
    assert exporter.batches == [5, 5, 2] and not buffer.spans


def test_at_stop_a_collector_that_does_not_answer_costs_the_time_left_and_what_is_left_is_said(
    caplog: pytest.LogCaptureFixture,
) -> None:
    exporter = HeldExporter()
    exporter.is_held = True  # never released: a collector that takes the POST and never answers
    buffer = buffer_of(exporter, batch_size=5, delay_seconds=HOUR)
    end(buffer, 7)
    flush = gevent.spawn(buffer.flush_final, 0.2)
    flush.join(timeout=10)
    assert flush.dead and flush.successful()
    assert exporter.batches == [5] and len(buffer.spans) == 7  # the batch cut short is buffered again
    assert "7 spans not taken by the OTLP collector within the 0.2s the stop had left" in caplog.text
