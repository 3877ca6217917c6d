"""A span per delivery, kind CONSUMER, named `<queue> process`, as OpenTelemetry's messaging conventions
have it: a child of the message's own context (a Lambda batch: a link to each record's), with the queue,
the message, how long it waited in the queue, and how the delivery went. The span is the current one while
the delivery runs and settles, so that log lines carry its ids and the settler's retry or dead letter
becomes an event on it."""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass

from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.trace import Link, SpanKind, Status, StatusCode

from ..message import Message
from ..targets import Outcome, Result
from .context import EMPTY, outgoing_headers, parent_of

SYSTEM = {"messaging.system": "aws_sqs", "messaging.operation.type": "process", "messaging.operation.name": "process"}


@dataclass(slots=True)
class Delivery:
    span: trace.Span
    token: object  # the context attached while it runs
    is_batch: bool


class Tracing:
    """What the delivery slots and the settler ask of tracing (`delivery.slots.DeliveryTracer`)."""

    def __init__(self, tracer: trace.Tracer) -> None:
        self.tracer = tracer

    def start(self, queue: str, target: str, messages: list[Message], is_batch: bool) -> Delivery:
        """The delivery's span, current from now on; each HTTP message gets the headers that carry it."""
        if is_batch:
            links = [Link(trace.get_current_span(parent).get_span_context())
                     for message in messages if (parent := parent_of(message)) is not None]
            span = self.tracer.start_span(f"{queue} process", EMPTY, SpanKind.CONSUMER, links=links)
        else:
            span = self.tracer.start_span(f"{queue} process", parent_of(messages[0]) or EMPTY, SpanKind.CONSUMER)
            messages[0].trace_headers = outgoing_headers(span, messages[0])
        if span.is_recording():
            span.set_attributes(attributes_of(queue, target, messages, is_batch))
        return Delivery(span, otel_context.attach(trace.set_span_in_context(span)), is_batch)

    def finish(self, delivery: Delivery, outcomes: list[Outcome]) -> None:
        span = delivery.span
        try:
            if span.is_recording():
                record_outcomes(span, outcomes, delivery.is_batch)
            span.end()
        finally:
            otel_context.detach(delivery.token)  # type: ignore[arg-type]

    def note(self, message: Message, action: str, detail: dict[str, str | int]) -> None:
        """The settler's retry or dead letter, as an event on the delivery span (the current one)."""
        span = trace.get_current_span()
        if span.is_recording():
            span.add_event(action, {"messaging.message.id": message.message_id, **detail})


def attributes_of(queue: str, target: str, messages: list[Message], is_batch: bool) -> dict[str, str | int]:
    attributes: dict[str, str | int] = {**SYSTEM, "messaging.destination.name": queue, "workerless.target": target}
    first = messages[0]
    if is_batch:
        attributes["messaging.batch.message_count"] = len(messages)
    else:
        attributes["messaging.message.id"] = first.message_id
        attributes["workerless.receive_count"] = first.receive_count
    sent = [message.sent_at for message in messages if message.sent_at is not None]
    if sent:  # the oldest message of the delivery: from SQS's SentTimestamp to now
        attributes["workerless.queue_wait_ms"] = max(0, round((time.time() - min(sent)) * 1000))
    return attributes


def record_outcomes(span: trace.Span, outcomes: list[Outcome], is_batch: bool) -> None:
    """The app's status (or the function's error), and an ERROR status when a message did not succeed."""
    statuses = {outcome.status for outcome in outcomes if outcome.status}
    if len(statuses) == 1:
        span.set_attribute("http.response.status_code", statuses.pop())
    failed = [outcome for outcome in outcomes if outcome.result is not Result.SUCCESS]
    if is_batch:
        span.set_attribute("workerless.failed_count", len(failed))
    if failed:
        span.set_attribute("error.type", failed[0].error_type or failed[0].result.value)
        span.set_status(Status(StatusCode.ERROR, failed[0].error[:300]))


class TraceIds(logging.Filter):
    """`trace_id` and `span_id` on every log record made while a delivery span is current."""

    def filter(self, record: logging.LogRecord) -> bool:
        span_context = trace.get_current_span().get_span_context()
        if span_context.is_valid:
            record.trace_id = format(span_context.trace_id, "032x")
            record.span_id = format(span_context.span_id, "016x")
        return True
