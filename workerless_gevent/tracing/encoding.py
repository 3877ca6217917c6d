"""The OTLP exporter's encoding step, specialised for a batch of delivery spans. The SDK's exporter keeps the
transport (endpoint, headers, TLS, compression, timeout and retries from OTEL_EXPORTER_OTLP_*); what it sends is
the same `ExportTraceServiceRequest`, byte for byte, built with the same generated classes (opentelemetry-proto).

Why: the SDK's `encode_spans` builds a protobuf object per attribute and per value and copies each one into its
parent, two copies of every span in all; for the daemon's nine-attribute span that was most of what a sampled
delivery cost. Filling the request in place, fields set where they live, takes about a third of the time.

The exporter module looks `encode_spans` up by name on every export (the one seam it has kept since 1.30), so
`install` points that name at a `SpanEncoder`. A batch this does not specialise (several resources or scopes, an
attribute value that is not a str, bool, int or float, a value protobuf refuses) goes to the SDK's `encode_spans`.

What repeats from span to span, its name, kind and status code and the attributes it begins with whose values
repeat (the system, the queue, the target, the status: `repeating`), is serialised once, by protobuf, as a
span of those fields alone: its head. Each span with that head merges it and then gets its own fields set.
Protobuf merges a scalar by taking it and a repeated field by appending, so the span is the one setting every
field would have made, in the same order. Setting an attribute through protobuf's Python binding costs three
times what merging it does, and a delivery span begins with seven of its nine."""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from types import ModuleType
from typing import Any

from opentelemetry.exporter.otlp.proto.common import trace_encoder
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.trace.v1.trace_pb2 import Span as PB2Span
from opentelemetry.proto.trace.v1.trace_pb2 import SpanFlags
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.trace import SpanContext, SpanKind

logger = logging.getLogger(__name__)

SDK_ENCODE = trace_encoder.encode_spans
KINDS = {kind: PB2Span.SpanKind.Value(f"SPAN_KIND_{kind.name}") for kind in SpanKind}
HAS_IS_REMOTE = SpanFlags.SPAN_FLAGS_CONTEXT_HAS_IS_REMOTE_MASK
IS_REMOTE = HAS_IS_REMOTE | SpanFlags.SPAN_FLAGS_CONTEXT_IS_REMOTE_MASK
VALUE_FIELDS = {str: "string_value", bool: "bool_value", int: "int_value", float: "double_value"}


MAX_HEADS = 4096  # serialised heads kept; past it the cache starts again
DOUBLE = VALUE_FIELDS[float]  # never in a head: -0.0 == 0.0 as a key, yet protobuf writes them apart

Item = tuple[str, str, object]  # an attribute: its key, its AnyValue field, its value


class NotSpecialised(Exception):
    """This batch is left to the SDK's encoder."""


def install(exporter_module: ModuleType, encoder: SpanEncoder) -> bool:
    """Point the exporter module's `encode_spans` at `encoder`; False (and the SDK's encoder left) if it has none."""
    current = getattr(exporter_module, "encode_spans", None)
    if current is not SDK_ENCODE and not isinstance(getattr(current, "__self__", None), SpanEncoder):
        logger.info("tracing: this OTLP exporter has no encode_spans to specialise; the SDK's encoder is used")
        return False
    setattr(exporter_module, "encode_spans", encoder.encode_spans)
    return True


class SpanEncoder:
    """The SDK's `encode_spans`, specialised; it keeps the serialised heads of the spans it has met."""

    def __init__(self, repeating: frozenset[str]) -> None:
        self.repeating = repeating
        self.heads: dict[tuple[Any, ...], bytes] = {}

    def encode_spans(self, spans: Sequence[ReadableSpan]) -> ExportTraceServiceRequest:
        """The request the SDK's `encode_spans` makes of `spans`."""
        request = self.specialised(spans)
        return request if request is not None else SDK_ENCODE(spans)

    def specialised(self, spans: Sequence[ReadableSpan]) -> ExportTraceServiceRequest | None:
        """The request made in place; None for a batch left to the SDK."""
        first = next(iter(spans), None)
        if first is None or any(span.resource is not first.resource
                                or span.instrumentation_scope is not first.instrumentation_scope for span in spans):
            return None
        try:
            request = SDK_ENCODE([first])  # the resource and scope envelope, as the SDK writes it
            encoded = request.resource_spans[0].scope_spans[0].spans
            del encoded[:]
            add = encoded.add
            for span in spans:
                self.fill_span(add(), span)
        except (NotSpecialised, ValueError, TypeError):  # ValueError: an int protobuf cannot hold
            return None
        return request

    def fill_span(self, encoded: Any, span: ReadableSpan) -> None:
        context = span.get_span_context()
        if context is None:
            raise NotSpecialised
        status = span.status
        leading, rest = self.items_of(span.attributes)
        head_key = (span.name, span.kind, None if status is None else status.status_code, *leading)
        encoded.MergeFromString(self.heads.get(head_key) or self.head(head_key, leading))
        parent = span.parent
        encoded.trace_id = context.trace_id.to_bytes(16, "big")
        encoded.span_id = context.span_id.to_bytes(8, "big")
        if context.trace_state:
            encoded.trace_state = ",".join(f"{key}={value}" for key, value in context.trace_state.items())
        if parent is not None:
            encoded.parent_span_id = parent.span_id.to_bytes(8, "big")
        encoded.flags = flags_of(parent)
        encoded.start_time_unix_nano = span.start_time or 0
        encoded.end_time_unix_nano = span.end_time or 0
        if rest:
            add = encoded.attributes.add
            for key, field, value in rest:
                setattr(add(key=key).value, field, value)
        for event in span.events:
            added = encoded.events.add(name=event.name, time_unix_nano=event.timestamp,
                                       dropped_attributes_count=event.dropped_attributes)
            fill_attributes(added.attributes, event.attributes)
        for link in span.links:
            added = encoded.links.add(trace_id=link.context.trace_id.to_bytes(16, "big"),
                                      span_id=link.context.span_id.to_bytes(8, "big"),
                                      dropped_attributes_count=link.dropped_attributes, flags=flags_of(link.context))
            fill_attributes(added.attributes, link.attributes)
        if status is not None and status.description:
            encoded.status.message = status.description
        if span.dropped_attributes or span.dropped_events or span.dropped_links:
            encoded.dropped_attributes_count = span.dropped_attributes
            encoded.dropped_events_count = span.dropped_events
            encoded.dropped_links_count = span.dropped_links

    def items_of(self, attributes: Mapping[str, Any] | None) -> tuple[list[Item], list[Item]]:
        """The attributes in their order: those the span begins with whose values repeat, and the rest."""
        leading: list[Item] = []
        rest: list[Item] = []
        for key, value in (attributes or {}).items():
            field = VALUE_FIELDS.get(type(value))
            if field is None:
                raise NotSpecialised
            if rest or key not in self.repeating or field is DOUBLE:
                rest.append((key, field, value))
            else:
                leading.append((key, field, value))
        return leading, rest

    def head(self, head_key: tuple[Any, ...], leading: list[Item]) -> bytes:
        """The span's name, kind, status code (the status is written even when it is 0, as the SDK does) and
        leading attributes, as protobuf serialises a span of those alone."""
        name, kind, status_code = head_key[:3]
        alone = PB2Span(name=name, kind=KINDS[kind])
        if status_code is not None:
            alone.status.code = status_code.value
        for key, field, value in leading:
            setattr(alone.attributes.add(key=key).value, field, value)
        serialised: bytes = alone.SerializeToString()
        if len(self.heads) >= MAX_HEADS:
            self.heads.clear()
        self.heads[head_key] = serialised
        return serialised


def fill_attributes(encoded: Any, attributes: Mapping[str, Any] | None) -> None:
    if not attributes:
        return
    add = encoded.add
    for key, value in attributes.items():
        field = VALUE_FIELDS.get(type(value))
        if field is None:
            raise NotSpecialised
        setattr(add(key=key).value, field, value)


def flags_of(context: SpanContext | None) -> int:
    return IS_REMOTE if context is not None and context.is_remote else HAS_IS_REMOTE
