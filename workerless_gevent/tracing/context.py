"""A message's trace context, as its producer left it (a `traceparent` message attribute, else SQS's
`AWSTraceHeader` system attribute in X-Ray's format), and the headers that carry a delivery span's own
context to the app: W3C `traceparent` (with the producer's `tracestate`), and `X-Amzn-Trace-Id` where the
message had one (`spans.outgoing_headers`)."""

from __future__ import annotations

from opentelemetry import trace
from opentelemetry.context import Context
from opentelemetry.trace import SpanContext
from opentelemetry.propagators.aws.aws_xray_propagator import TRACE_HEADER_KEY, AwsXRayPropagator
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

from ..message import Message

W3C = TraceContextTextMapPropagator()
XRAY = AwsXRayPropagator()
EMPTY = Context()


def parent_of(message: Message) -> Context | None:
    """The producer's context, None when the message carries none that is valid."""
    if "traceparent" not in message.message_attributes and "AWSTraceHeader" not in message.attributes:
        return None  # most messages: nothing to read
    traceparent = message.string_attribute("traceparent")
    if traceparent:
        carrier = {"traceparent": traceparent, "tracestate": message.string_attribute("tracestate") or ""}
        context = W3C.extract(carrier, EMPTY)
        if trace.get_current_span(context).get_span_context().is_valid:
            return context
    aws_trace = message.attributes.get("AWSTraceHeader")
    if aws_trace:
        context = XRAY.extract({TRACE_HEADER_KEY: aws_trace}, EMPTY)
        if trace.get_current_span(context).get_span_context().is_valid:
            return context
    return None


def xray_header(span_context: SpanContext) -> dict[str, str]:
    """X-Amzn-Trace-Id for a delivery span, as X-Ray's propagator writes it."""
    headers: dict[str, str] = {}
    XRAY.inject(headers, trace.set_span_in_context(trace.NonRecordingSpan(span_context), EMPTY))
    return headers


def traceparent(trace_id: int, span_id: int, flags: int) -> str:
    """W3C's version 00 header; the ids in hex through bytes, a third of the time of the format spec `032x`."""
    return f"00-{trace_id.to_bytes(16, 'big').hex()}-{span_id.to_bytes(8, 'big').hex()}-{'01' if flags & 1 else '00'}"
