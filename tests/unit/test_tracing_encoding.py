"""tracing/encoding.py against the SDK's own `encode_spans`: every span the daemon makes (and the shapes it
leaves to the SDK) serialises to the same bytes, and the installed exporter looks the encoder up where
`install` points it."""

from __future__ import annotations

from collections import deque
from collections.abc import Sequence

import pytest

pytest.importorskip("opentelemetry.exporter.otlp.proto.http")

from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans as sdk_encode_spans  # noqa: E402
from opentelemetry.exporter.otlp.proto.http import trace_exporter  # noqa: E402
from opentelemetry.sdk.resources import Resource  # noqa: E402
from opentelemetry.sdk.trace import Event, ReadableSpan, SpanLimits  # noqa: E402
from opentelemetry.sdk.trace.id_generator import RandomIdGenerator  # noqa: E402
from opentelemetry.sdk.trace.sampling import ALWAYS_ON, Sampler  # noqa: E402
from opentelemetry.sdk.util.instrumentation import InstrumentationScope  # noqa: E402
from opentelemetry.trace import Link, SpanContext, SpanKind, Status, StatusCode, TraceFlags, TraceState  # noqa: E402

from workerless_gevent.message import Message  # noqa: E402
from workerless_gevent.targets import Outcome, Result  # noqa: E402
from workerless_gevent.tracing import encoding  # noqa: E402
from workerless_gevent.tracing.attributes import REPEATING  # noqa: E402
from workerless_gevent.tracing.spans import Tracing  # noqa: E402

from tests.unit.samplers import Marking  # noqa: E402
from tests.unit.sqs_messages import make_message, string_attribute  # noqa: E402

PRODUCER = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
XRAY = "Root=1-5759e988-bd862e3fe1be46a994272793;Parent=53995c3f42cd8ad8;Sampled=1"
RESOURCE = Resource.create({"service.name": "orders-worker"})
SCOPE = InstrumentationScope("workerless", "1.2.3")
FAILED = Outcome(Result.FAILURE, "HTTP 500", "the app answered HTTP 500", status=500)
DONE = Outcome(Result.SUCCESS, "", "", status=200)
ENCODER = encoding.SpanEncoder(REPEATING)


def message(message_id: str, traceparent: str | None = None, xray: str | None = None) -> Message:
    return make_message("orders", message_id=message_id, receive_count=3,
                        attributes={"AWSTraceHeader": xray} if xray else None,
                        message_attributes={"traceparent": string_attribute(traceparent)} if traceparent else None)


def deliveries(sampler: Sampler = ALWAYS_ON, limits: SpanLimits | None = None) -> list[ReadableSpan]:
    """The daemon's spans, made as the slots and the settler make them: every shape a delivery has."""
    exported: list[ReadableSpan] = []
    made = Tracing(sampler, RandomIdGenerator(), RESOURCE, SCOPE, limits or SpanLimits(), exported.append)
    for sent, outcome in ((message("a", PRODUCER), DONE), (message("b"), DONE), (message("c", xray=XRAY), DONE),
                          (message("d", PRODUCER), FAILED)):
        delivery = made.start("orders", "default", [sent], is_batch=False)
        if outcome is FAILED:
            made.note(sent, "retry scheduled", {"workerless.retry_in_seconds": 30})
            made.note(sent, "dead letter sent", {"workerless.dead_letter_queue": "orders-dlq"})
        made.finish(delivery, [outcome])
    records = [message("e", PRODUCER), message("f"), message("g", xray=XRAY)]
    made.finish(made.start("orders", "resize", records, is_batch=True), [DONE, FAILED, DONE])
    return exported


def assert_same_bytes(spans: Sequence[ReadableSpan], encoder: encoding.SpanEncoder = ENCODER) -> None:
    assert encoder.encode_spans(spans).SerializePartialToString() == \
        sdk_encode_spans(spans).SerializePartialToString()


@pytest.mark.parametrize("spans", [
    pytest.param(deliveries(), id="deliveries"),
    pytest.param(deliveries(Marking({"sampled.by": "rule-7", "sampled.kept": True, "sampled.ratio": 0.25},
                                    TraceState([("vendor", "a1"), ("other", "b2")]))),
                 id="a-samplers-trace-state-and-attributes"),
    pytest.param(deliveries(limits=SpanLimits(max_span_attribute_length=4, max_span_attributes=3, max_events=1,
                                              max_links=1)), id="limits-dropping"),
    pytest.param(deliveries()[:1], id="one-span"),
])
def test_the_daemons_spans_are_encoded_in_place_to_the_sdks_bytes(spans: list[ReadableSpan]) -> None:
    assert ENCODER.specialised(spans) is not None
    assert_same_bytes(spans)


def span(resource: Resource = RESOURCE, attributes: dict[str, object] | None = None,
         parent: SpanContext | None = None, status: Status = Status(StatusCode.OK)) -> ReadableSpan:
    context = SpanContext(0x0AF7651916CD43DD8448EB211C80319C, 0x53995C3F42CD8AD8, False, TraceFlags(1))
    return ReadableSpan("orders process", context, parent, resource, attributes or {"a": "b"},  # type: ignore[arg-type]
                        [Event("e", {"n": 1}, 5)], [Link(context, {"l": "x"})], SpanKind.CONSUMER,
                        status=status, start_time=1, end_time=2, instrumentation_scope=SCOPE)


def no_status() -> ReadableSpan:
    return ReadableSpan("n", SpanContext(1, 2, False, TraceFlags(1)), status=None)  # type: ignore[arg-type]


def a_mapping_as_trace_state() -> ReadableSpan:
    return ReadableSpan("n", SpanContext(1, 2, False, TraceFlags(1), {"k": "v"}))  # type: ignore[arg-type]


@pytest.mark.parametrize("spans", [
    pytest.param([span(parent=SpanContext(1, 2, False, TraceFlags(1)))], id="a-parent-in-this-process"),
    pytest.param([no_status()], id="no-status"),
    pytest.param([a_mapping_as_trace_state()], id="a-mapping-as-trace-state"),
    pytest.param(deque([span(), span()]), id="a-deque"),
])
def test_other_spans_of_one_resource_and_scope_are_encoded_in_place_too(spans: Sequence[ReadableSpan]) -> None:
    assert ENCODER.specialised(spans) is not None
    assert_same_bytes(spans)


@pytest.mark.parametrize("spans", [
    pytest.param([span(), span(Resource.create({"service.name": "other"}))], id="two-resources"),
    pytest.param([span(attributes={"ids": ["a", "b"]})], id="a-sequence-value"),
    pytest.param([span(attributes={"raw": b"\x00\x01"})], id="a-bytes-value"),
    pytest.param([span(attributes={"huge": 2 ** 70})], id="an-int-past-int64"),
    pytest.param([], id="no-spans"),
])
def test_what_is_not_specialised_is_left_to_the_sdk(spans: list[ReadableSpan]) -> None:
    assert ENCODER.specialised(spans) is None
    assert_same_bytes(spans)


def test_the_installed_exporter_encodes_here() -> None:
    try:
        assert encoding.install(trace_exporter, ENCODER)
        assert getattr(trace_exporter, "encode_spans") == ENCODER.encode_spans
        assert encoding.install(trace_exporter, encoding.SpanEncoder(REPEATING)), "installing twice is harmless"
    finally:
        setattr(trace_exporter, "encode_spans", encoding.SDK_ENCODE)


def test_a_head_merged_from_its_serialised_form_keeps_each_attributes_place_and_kind() -> None:
    """Values equal as keys but not on the wire (True, 1 and 1.0; 0.0 and -0.0) each keep their own bytes; a
    repeating attribute after one that does not repeat keeps its place; so in a batch encoded again from the
    heads kept, with statuses of each code."""
    encoder = encoding.SpanEncoder(frozenset({"status", "kept", "ratio"}))
    shapes: list[dict[str, object]] = [
        {"status": True, "kept": "yes", "id": "m-1", "wait": 5},
        {"status": 1, "kept": "yes", "id": "m-2", "wait": 6},
        {"ratio": 0.0, "status": 1, "id": "m-3"},
        {"ratio": -0.0, "status": 1, "id": "m-4"},
        {"id": "m-5", "status": 1.0, "kept": 1},
        {"kept": "yes", "status": "1"},
        {}]
    spans = [span(attributes=shape, status=status) for shape in shapes
             for status in (Status(StatusCode.OK), Status(StatusCode.ERROR, "HTTP 500"), Status(StatusCode.UNSET))]
    for _ in range(2):
        assert encoder.specialised(spans) is not None
        assert_same_bytes(spans, encoder)
    leading = [item for head in encoder.heads for item in head[3:]]
    assert ("status", "bool_value", True) in leading and ("status", "int_value", 1) in leading
    assert ("kept", "string_value", "yes") in leading and not any(key == "ratio" for key, _, _ in leading)
    assert not any(key == "status" and field == "double_value" for key, field, _ in leading)


def test_the_serialised_heads_kept_are_bounded() -> None:
    encoder = encoding.SpanEncoder(frozenset({"messaging.destination.name"}))
    spans = [span(attributes={"messaging.destination.name": f"queue-{index}"})
             for index in range(encoding.MAX_HEADS + 10)]
    assert_same_bytes(spans, encoder)
    assert 0 < len(encoder.heads) <= encoding.MAX_HEADS
