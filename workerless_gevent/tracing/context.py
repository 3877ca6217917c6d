"""A message's trace context, as its producer left it (a `traceparent` message attribute, else SQS's
`AWSTraceHeader` system attribute in X-Ray's format), and the headers that carry a delivery span's own
context to the app: W3C `traceparent` (with the producer's `tracestate`), and `X-Amzn-Trace-Id` where the
message had one."""

from __future__ import annotations

from opentelemetry import trace
from opentelemetry.context import Context
from opentelemetry.propagators.aws.aws_xray_propagator import TRACE_HEADER_KEY, AwsXRayPropagator
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

from ..message import Message

W3C = TraceContextTextMapPropagator()
XRAY = AwsXRayPropagator()
EMPTY = Context()


def parent_of(message: Message) -> Context | None:
    """The producer's context, None when the message carries none that is valid."""
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


def outgoing_headers(span: trace.Span, message: Message) -> dict[str, str]:
    """The headers by which the app's spans become children of the delivery span: `traceparent` (and the
    producer's `tracestate`) written as the W3C propagator writes them, without its context and carrier
    round trip (a fifth of an unsampled span's cost), X-Ray's through its propagator."""
    span_context = span.get_span_context()
    if not span_context.is_valid:
        return {}
    headers = {"traceparent": f"00-{span_context.trace_id:032x}-{span_context.span_id:016x}-"
                              f"{span_context.trace_flags:02x}"}
    if span_context.trace_state:
        headers["tracestate"] = span_context.trace_state.to_header()
    if "AWSTraceHeader" in message.attributes:
        XRAY.inject(headers, trace.set_span_in_context(span, EMPTY))
    return headers
