"""tracing/spans.py with the SDK's own samplers and limits: what is recorded, what is cut, and what an
unsampled delivery still carries. (The e2e suite, tests/e2e/test_tracing.py, sends them to a collector.)"""

from __future__ import annotations

import logging
from collections.abc import Sequence

import gevent
import gevent.event
import pytest

pytest.importorskip("opentelemetry.sdk")

from opentelemetry.context import Context  # noqa: E402
from opentelemetry.sdk.resources import Resource  # noqa: E402
from opentelemetry.sdk.trace import ReadableSpan, SpanLimits  # noqa: E402
from opentelemetry.sdk.trace.id_generator import IdGenerator, RandomIdGenerator  # noqa: E402
from opentelemetry.sdk.trace.sampling import (  # noqa: E402
    ALWAYS_OFF, ALWAYS_ON, Decision, ParentBased, ParentBasedTraceIdRatio, Sampler, SamplingResult,
    TraceIdRatioBased)
from opentelemetry.sdk.util.instrumentation import InstrumentationScope  # noqa: E402
from opentelemetry.trace import Link, SpanKind  # noqa: E402
from opentelemetry.util.types import Attributes  # noqa: E402

from workerless_gevent.message import Message  # noqa: E402
from workerless_gevent.targets import Outcome, Result  # noqa: E402
from workerless_gevent.tracing.current import TraceIds, current  # noqa: E402
from workerless_gevent.tracing.spans import Delivery, Tracing  # noqa: E402

from tests.unit.samplers import Marking  # noqa: E402

SAMPLE = Decision.RECORD_AND_SAMPLE
PRODUCER = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"


class RecordOnly(Sampler):
    def should_sample(self, parent_context: Context | None, trace_id: int, name: str, kind: SpanKind | None = None,
                      attributes: Attributes = None, links: Sequence[Link] | None = None,
                      trace_state: object = None) -> SamplingResult:
        return SamplingResult(Decision.RECORD_ONLY)

    def get_description(self) -> str:
        return "RecordOnly"


class Given(RandomIdGenerator):
    """The trace ids a test chooses, in turn."""

    def __init__(self, trace_ids: Sequence[int]) -> None:
        self.trace_ids = iter(trace_ids)

    def generate_trace_id(self) -> int:
        return next(self.trace_ids)


def tracing(sampler: Sampler, limits: SpanLimits | None = None,
            ids: IdGenerator | None = None) -> tuple[Tracing, list[ReadableSpan]]:
    exported: list[ReadableSpan] = []
    made = Tracing(sampler, ids or RandomIdGenerator(), Resource.create({"service.name": "t"}),
                   InstrumentationScope("workerless", "0"), limits or SpanLimits(), exported.append)
    return made, exported


def message(traceparent: str | None = None, message_id: str = "m-1") -> Message:
    attributes = {"traceparent": {"DataType": "String", "StringValue": traceparent}} if traceparent else {}
    return Message(queue="orders", message_id=message_id, receipt_handle="r", body="{}", md5_of_body="",
                   attributes={"ApproximateReceiveCount": "2", "SentTimestamp": "1700000000000"},
                   message_attributes=attributes, received_at=0.0, visible_until=0.0)


def test_a_sampled_delivery_is_exported_with_its_attributes_parent_and_error() -> None:
    made, exported = tracing(ALWAYS_ON)
    sent = message(PRODUCER)
    delivery = made.start("orders", "default", [sent], is_batch=False)
    assert current() is delivery
    made.finish(delivery, [Outcome(Result.FAILURE, "HTTP 500", "the app answered HTTP 500", status=500)])
    assert current() is None
    (span,) = exported
    assert span.name == "orders process" and span.kind is SpanKind.CONSUMER
    assert span.parent is not None and format(span.parent.span_id, "016x") == "b7ad6b7169203331"
    assert span.attributes is not None
    assert dict(span.attributes) | {"workerless.queue_wait_ms": 0} == {
        "messaging.system": "aws_sqs", "messaging.operation.type": "process", "messaging.operation.name": "process",
        "messaging.destination.name": "orders", "workerless.target": "default", "messaging.message.id": "m-1",
        "workerless.receive_count": 2, "workerless.queue_wait_ms": 0, "http.response.status_code": 500,
        "error.type": "HTTP 500"}
    assert span.status.description == "the app answered HTTP 500"
    assert sent.trace_headers == {"traceparent": f"00-0af7651916cd43dd8448eb211c80319c-{span.context.span_id:016x}-01"}


@pytest.mark.parametrize("sampler", [ALWAYS_OFF, RecordOnly()], ids=["always_off", "record_only"])
def test_a_delivery_not_sampled_is_not_exported_but_carries_its_ids(sampler: Sampler) -> None:
    made, exported = tracing(sampler)
    sent = message(PRODUCER)
    delivery = made.start("orders", "default", [sent], is_batch=False)
    made.note(sent, "retry scheduled", {"workerless.retry_in_seconds": 5})  # nothing to record it on
    made.finish(delivery, [Outcome(Result.SUCCESS, "", "", status=200)])
    assert exported == []
    assert sent.trace_headers == {"traceparent": f"00-0af7651916cd43dd8448eb211c80319c-{delivery.span_id:016x}-00"}


def test_the_sdks_limits_cut_values_and_count_what_they_drop() -> None:
    made, exported = tracing(ALWAYS_ON, SpanLimits(max_span_attribute_length=4, max_span_attributes=3,
                                                   max_events=1))
    sent = message()
    delivery = made.start("orders", "default", [sent], is_batch=False)
    made.note(sent, "retry scheduled", {"workerless.retry_in_seconds": 5})
    made.note(sent, "retry scheduled", {"workerless.retry_in_seconds": 6})
    made.finish(delivery, [Outcome(Result.SUCCESS, "", "", status=200)])
    (span,) = exported
    assert span.attributes is not None
    # as the SDK's own attributes evict the oldest: the last three, the delivery's own after its outcome
    assert list(span.attributes) == ["http.response.status_code", "messaging.message.id", "workerless.queue_wait_ms"]
    assert span.attributes["http.response.status_code"] == 200 and span.attributes["messaging.message.id"] == "m-1"
    assert span.dropped_attributes == 6 and span.dropped_events == 1 and len(span.events) == 1
    assert span.parent is None and span.dropped_links == 0


def test_a_batch_is_one_span_linked_to_each_records_context() -> None:
    made, exported = tracing(ALWAYS_ON)
    records = [message(PRODUCER, "a"), message(None, "b")]
    made.finish(made.start("orders", "fn", records, is_batch=True), [Outcome(Result.SUCCESS, "", "")] * 2)
    (span,) = exported
    assert [format(link.context.span_id, "016x") for link in span.links] == ["b7ad6b7169203331"]
    assert span.attributes is not None and span.attributes["messaging.batch.message_count"] == 2
    assert all(record.trace_headers is None for record in records)


class Halving(ParentBased):
    """A parent-based sampler of its own, which samples no parentless span whatever its root says."""

    def should_sample(self, parent_context: Context | None, trace_id: int, name: str, kind: SpanKind | None = None,
                      attributes: Attributes = None, links: Sequence[Link] | None = None,
                      trace_state: object = None) -> SamplingResult:
        return SamplingResult(Decision.DROP)


def test_a_parentless_delivery_is_decided_as_the_parent_based_sampler_decides_it() -> None:
    """The daemon asks a parent-based sampler's root for a parentless delivery: the same decisions, span by span;
    a message with a parent still asks the sampler itself; a sampler that decides otherwise is asked itself."""
    sampler = ParentBased(TraceIdRatioBased(0.5))
    made, exported = tracing(sampler)
    decided = []
    for index in range(200):
        delivery = made.start("orders", "default", [message(message_id=f"m-{index}")], is_batch=False)
        expected = sampler.should_sample(Context(), delivery.trace_id, "orders process", SpanKind.CONSUMER)
        decided.append((delivery.recorded is not None, expected.decision is Decision.RECORD_AND_SAMPLE))
        made.finish(delivery, [Outcome(Result.SUCCESS, "", "", status=200)])
    assert all(made_it == expected for made_it, expected in decided)
    assert 50 < sum(made_it for made_it, _ in decided) < 150
    made, exported = tracing(ParentBased(ALWAYS_OFF))
    made.finish(made.start("orders", "default", [message(PRODUCER)], is_batch=False), [])
    assert len(exported) == 1, "a sampled parent is followed, not the root"
    made, exported = tracing(Halving(ALWAYS_ON))
    made.finish(made.start("orders", "default", [message()], is_batch=False), [])
    assert exported == []


def test_under_a_ratio_sampler_a_message_with_a_context_is_its_producers_child() -> None:
    """A rate of 0 samples no new trace: a message carrying a sampled context, in either header, still joins it."""
    xray = "Root=1-5759e988-bd862e3fe1be46a994272793;Parent=53995c3f42cd8ad8;Sampled=1"
    w3c, only_xray = message(PRODUCER), message()
    only_xray.attributes["AWSTraceHeader"] = xray
    made, exported = tracing(ParentBasedTraceIdRatio(0.0))
    for sent, trace_id in ((w3c, 0x0AF7651916CD43DD8448EB211C80319C), (only_xray, 0x5759E988BD862E3FE1BE46A994272793)):
        delivery = made.start("orders", "default", [sent], is_batch=False)
        assert (delivery.trace_id, delivery.recorded is not None) == (trace_id, True)
        assert sent.trace_headers is not None and sent.trace_headers["traceparent"].startswith(f"00-{trace_id:032x}-")
        made.finish(delivery, [Outcome(Result.SUCCESS, "", "", status=200)])
    assert only_xray.trace_headers is not None and "5759e988-bd862e3fe1be46a994272793" in only_xray.trace_headers[
        "X-Amzn-Trace-Id"]
    assert [span.parent.span_id for span in exported if span.parent] == [0xB7AD6B7169203331, 0x53995C3F42CD8AD8]


def test_each_greenlet_has_its_own_current_delivery_and_its_log_records_its_ids() -> None:
    """Slots run deliveries side by side: each greenlet's log records carry its own delivery's ids, and none once
    it has finished."""
    made, _ = tracing(ParentBasedTraceIdRatio(0.5))
    started, other_started = gevent.event.Event(), gevent.event.Event()
    logged: list[tuple[object, object]] = []

    def log_is(delivery: Delivery | None) -> None:
        record = logging.LogRecord("t", logging.INFO, __file__, 1, "m", None, None)
        TraceIds().filter(record)
        ids = None if delivery is None else (f"{delivery.trace_id:032x}", f"{delivery.span_id:016x}")
        logged.append(((getattr(record, "trace_id", None), getattr(record, "span_id", None)), ids or (None, None)))

    def slot(first: bool) -> None:
        if not first:
            started.wait(5)
        delivery = made.start("orders", "default", [message()], is_batch=False)
        (started if first else other_started).set()
        if first:
            other_started.wait(5)  # the other slot's delivery has started meanwhile
        log_is(delivery)
        gevent.sleep(0)
        made.finish(delivery, [Outcome(Result.SUCCESS, "", "", status=200)])
        log_is(None)

    gevent.joinall([gevent.spawn(slot, True), gevent.spawn(slot, False)], timeout=10, raise_error=True)
    assert len(logged) == 4 and all(got == expected for got, expected in logged), logged
    assert len({expected for _, expected in logged}) == 3 and current() is None


def test_the_outcome_wins_over_a_samplers_attribute_of_the_same_name() -> None:
    """As on the SDK's span, where the outcome is set after the sampler's attributes; the sampler's still win over
    what the daemon set at the start, and the ones only it has are kept."""
    made, exported = tracing(Marking({"error.type": "from-sampler", "sampled.by": "rule-7",
                                      "messaging.system": "sampler's"}))
    for outcome in (Outcome(Result.FAILURE, "HTTP 500", "the app answered HTTP 500", status=500),
                    Outcome(Result.SUCCESS, "", "", status=200)):
        made.finish(made.start("orders", "default", [message()], is_batch=False), [outcome])
    failed, succeeded = (dict(span.attributes or {}) for span in exported)
    assert failed["error.type"] == "HTTP 500" and failed["http.response.status_code"] == 500
    assert succeeded["error.type"] == "from-sampler" and succeeded["http.response.status_code"] == 200
    assert failed["sampled.by"] == succeeded["sampled.by"] == "rule-7"
    assert failed["messaging.system"] == succeeded["messaging.system"] == "sampler's"


class Odd(TraceIdRatioBased):
    """A ratio sampler of its own, which samples the odd trace ids whatever its bound."""

    def should_sample(self, parent_context: Context | None, trace_id: int, name: str, kind: SpanKind | None = None,
                      attributes: Attributes = None, links: Sequence[Link] | None = None,
                      trace_state: object = None) -> SamplingResult:
        return SamplingResult(Decision.RECORD_AND_SAMPLE if trace_id % 2 else Decision.DROP)


@pytest.mark.parametrize("sampler", [TraceIdRatioBased(0.01), ParentBasedTraceIdRatio(0.25), TraceIdRatioBased(0.0),
                                     TraceIdRatioBased(1.0), Odd(0.5)],
                         ids=["ratio", "parentbased", "none", "all", "own"])
def test_a_ratio_samplers_parentless_decisions_are_its_own_at_the_bound(sampler: Sampler) -> None:
    """The daemon drops a parentless span above a ratio sampler's bound itself: each decision is the sampler's, at
    the bound and either side of it, with the trace id's high 64 bits set or not, and over random ids; for a
    message with no context, one whose context is not valid, and a batch."""
    bound = getattr(sampler, "_root", sampler).bound
    high = 0xFFFF_FFFF_FFFF_FFFF << 64
    edges = [max(bound - 1, 1), bound or 1, bound + 1, high | max(bound - 1, 1), high | bound, high | (bound + 1),
             (1 << 64) - 1, high | ((1 << 64) - 1)]
    chosen = edges + [RandomIdGenerator().generate_trace_id() for _ in range(300)]
    made, exported = tracing(sampler, ids=Given(chosen))
    sampled_count = 0
    for index, trace_id in enumerate(chosen):
        sent = message("00-not-a-valid-context-01" if index % 3 == 1 else None)
        is_batch = index % 3 == 2
        delivery = made.start("orders", "default", [sent], is_batch=is_batch)
        assert delivery.trace_id == trace_id
        sampled = sampler.should_sample(Context(), trace_id, "orders process", SpanKind.CONSUMER).decision is SAMPLE
        assert (delivery.recorded is not None) is sampled, hex(trace_id)
        flag = "01" if sampled else "00"
        assert sent.trace_headers == (None if is_batch else
                                      {"traceparent": f"00-{trace_id:032x}-{delivery.span_id:016x}-{flag}"})
        made.finish(delivery, [Outcome(Result.SUCCESS, "", "", status=200)])
        sampled_count += sampled
    assert len(exported) == sampled_count
