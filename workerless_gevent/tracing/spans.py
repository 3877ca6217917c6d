"""A span per delivery, kind CONSUMER, named `<queue> process`, as OpenTelemetry's messaging conventions
have it: a child of the message's own context (a Lambda batch: a link to each record's), with the queue,
the message, how long it waited in the queue, and how the delivery went. The span is the current one while
the delivery runs and settles, so that log lines carry its ids and the settler's retry or dead letter
becomes an event on it.

The SDK decides and records: its sampler (OTEL_TRACES_SAMPLER), its id generator, its resource, its span
limits, and its `ReadableSpan`, what the OTLP exporter encodes. What the daemon does not take from it is the
general-purpose `Span` an instrumentation library gets from `Tracer.start_span`: made for attributes of any
type set from any thread, it validates each attribute under a lock and copies them again at the end, about
two thirds of a sampled span's cost here. A delivery's span has one shape, values the daemon made, and one
greenlet: its attributes are a plain dict, and a span that is not sampled is only its ids."""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from opentelemetry import trace
from opentelemetry.context import Context
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import Event, ReadableSpan, SpanLimits
from opentelemetry.sdk.trace.id_generator import IdGenerator
from opentelemetry.sdk.trace.sampling import Decision, ParentBased, Sampler, SamplingResult, TraceIdRatioBased
from opentelemetry.sdk.util import BoundedList
from opentelemetry.sdk.util.instrumentation import InstrumentationScope
from opentelemetry.trace import Link, SpanContext, SpanKind, TraceFlags, TraceState

from ..message import Message
from ..targets import Outcome
from .attributes import OUTCOME_KEYS, SYSTEM, Attributes, attributes_of, limited, record_outcomes
from .context import EMPTY, parent_of, traceparent, xray_header
from .current import CURRENT, current, held

SAMPLED, NOT_SAMPLED = TraceFlags(TraceFlags.SAMPLED), TraceFlags(TraceFlags.DEFAULT)
NO_STATE = TraceState()
NO_LINKS: tuple[Link, ...] = ()  # a delivery of one message
CONSUMER, SAMPLE = SpanKind.CONSUMER, Decision.RECORD_AND_SAMPLE  # module globals: one lookup, not two
DROPPED = SamplingResult(Decision.DROP)  # a ratio sampler's answer to a parentless span above its bound
RATIO_LIMIT = TraceIdRatioBased.TRACE_ID_LIMIT  # the trace id's bits it compares: the low 64

Export = Callable[[ReadableSpan], None]  # export.SpanBuffer.on_end


@dataclass(slots=True, eq=False)
class Recorded:
    """What a sampled delivery's span records, from its start to its end."""

    name: str
    parent: SpanContext | None
    links: Sequence[Link]
    started_ns: int
    attributes: Attributes  # those whose values repeat (REPEATING), and at the end the outcome's
    own: Attributes  # this delivery's own (its message id, its wait) and the sampler's, after them
    is_batch: bool
    events: BoundedList[Event] | None = None


@dataclass(slots=True, eq=False)
class Delivery:
    """One delivery's span: its ids, which the app and the log lines get whether it is sampled or not, and
    what it records when it is (`recorded`)."""

    trace_id: int
    span_id: int
    trace_flags: TraceFlags
    trace_state: TraceState
    recorded: Recorded | None
    is_finished: bool = False  # current no more (current.py)

    def span_context(self) -> SpanContext:
        return SpanContext(self.trace_id, self.span_id, False, self.trace_flags, self.trace_state)


class DeliverySpan(ReadableSpan):
    """A finished delivery span, as the exporter reads it. The SDK's ReadableSpan works out what its limits
    dropped by asking whether each collection is one of its bounded ones, three ABC checks per span at
    export; here the counts are known when the span is made (`Tracing.span_of`), nearly always none."""

    dropped_attributes = 0
    dropped_events = 0
    dropped_links = 0


class Tracing:
    """What the delivery slots and the settler ask of tracing (`delivery.slots.DeliveryTracer`)."""

    def __init__(self, sampler: Sampler, ids: IdGenerator, resource: Resource, scope: InstrumentationScope,
                 limits: SpanLimits, export: Export) -> None:
        self.sampler = sampler
        self.root_sampler = root_of(sampler)
        self.ratio_bound = ratio_bound(self.root_sampler)
        self.new_trace_id, self.new_span_id = ids.generate_trace_id, ids.generate_span_id
        self.resource = resource
        self.scope = scope
        self.limits = limits
        self.export = export
        self.names: dict[str, str] = {}
        self.base_attributes: dict[tuple[str, str], Attributes] = {}  # per queue and target

    def start(self, queue: str, target: str, messages: list[Message], is_batch: bool) -> Delivery:
        """The delivery's span, current from now on; each HTTP message gets the headers that carry it."""
        first = messages[0]
        trace_id: int | None = None
        delivery: Delivery | None = None
        if (self.ratio_bound is not None and not is_batch and "traceparent" not in first.message_attributes
                and "AWSTraceHeader" not in first.attributes):  # no context: parent_of's own first check, inline
            # Parentless under the SDK's ratio sampler: above its bound (99 in 100 at a 1 % ratio) the sampler's
            # own comparison drops it, and the delivery is its ids, the headers what outgoing_headers would write.
            trace_id = self.new_trace_id()
            if trace_id & RATIO_LIMIT >= self.ratio_bound:
                delivery = Delivery(trace_id, self.new_span_id(), NOT_SAMPLED, NO_STATE, None)
                first.trace_headers = {"traceparent": traceparent(trace_id, delivery.span_id, 0)}
        if delivery is None:
            delivery = self.decided(queue, target, messages, is_batch, trace_id)
            if not is_batch:
                first.trace_headers = outgoing_headers(delivery, first)
        (CURRENT.get() or held()).delivery = delivery  # until its finish, or the greenlet's next
        return delivery

    def decided(self, queue: str, target: str, messages: list[Message], is_batch: bool,
                trace_id: int | None) -> Delivery:
        """The span as the SDK's sampler decides it, given the message's context (a batch: its links)."""
        name = self.names.get(queue) or self.names.setdefault(queue, f"{queue} process")
        parent_context: Context | None = None
        parent: SpanContext | None = None
        links: Sequence[Link] = NO_LINKS
        first = messages[0]
        if is_batch:
            links = [Link(trace.get_current_span(context).get_span_context())
                     for message in messages if (context := parent_of(message)) is not None]
        else:
            parent_context = parent_of(first)
            if parent_context is not None:
                parent = trace.get_current_span(parent_context).get_span_context()
        if parent is not None:
            trace_id = parent.trace_id
        elif trace_id is None:
            trace_id = self.new_trace_id()
        # The SDK's sampler, as Tracer.start_span asks it (no attributes are known yet); parentless: the empty
        # context, never the greenlet's, which the daemon does not set, and a parent-based sampler's root.
        if parent_context is not None:
            sampling = self.sampler.should_sample(parent_context, trace_id, name, CONSUMER, None, links)
        elif self.ratio_bound is not None and trace_id & RATIO_LIMIT >= self.ratio_bound:
            sampling = DROPPED  # a batch, or a context not valid: as the ratio sampler decides, above its bound
        else:
            sampling = self.root_sampler.should_sample(EMPTY, trace_id, name, CONSUMER, None, links)
        span_id = self.new_span_id()
        # Not sampled (most deliveries under a ratio sampler): the ids and no more. RECORD_ONLY too: the SDK's
        # batching exports sampled spans only, and the daemon has no other span processor to record for.
        if sampling.decision is not SAMPLE:
            return Delivery(trace_id, span_id, NOT_SAMPLED, sampling.trace_state or NO_STATE, None)
        base = self.base_attributes.get((queue, target)) or self.base_attributes.setdefault(
            (queue, target), {**SYSTEM, "messaging.destination.name": queue, "workerless.target": target})
        attributes, own = attributes_of(base, messages, is_batch)
        if sampling.attributes:
            own.update(sampling.attributes)
        return Delivery(trace_id, span_id, SAMPLED, sampling.trace_state or NO_STATE,
                        Recorded(name, parent, links, time.time_ns(), attributes, own, is_batch))

    def finish(self, delivery: Delivery, outcomes: list[Outcome]) -> None:
        try:
            recorded = delivery.recorded
            if recorded is not None:
                self.export(self.span_of(delivery, recorded, outcomes))
        finally:
            delivery.is_finished = True

    def span_of(self, delivery: Delivery, recorded: Recorded, outcomes: list[Outcome]) -> DeliverySpan:
        """The finished span, within the SDK's limits, with what they dropped counted."""
        attributes = recorded.attributes
        status = record_outcomes(attributes, outcomes, recorded.is_batch)
        own = recorded.own
        if not OUTCOME_KEYS.isdisjoint(own):  # the outcome was set last: it wins over a sampler's, as on the SDK's span
            own = {key: value for key, value in own.items() if key not in OUTCOME_KEYS or key not in attributes}
        attributes.update(own)
        limits = self.limits
        kept = limited(attributes, limits.max_span_attribute_length, limits.max_span_attributes)
        links = self.bounded_links(recorded.links)
        span = DeliverySpan(recorded.name, delivery.span_context(), recorded.parent, self.resource, kept,
                            recorded.events or (), links, CONSUMER, status=status,
                            start_time=recorded.started_ns, end_time=time.time_ns(), instrumentation_scope=self.scope)
        if len(kept) < len(attributes):
            span.dropped_attributes = len(attributes) - len(kept)
        if recorded.events is not None and recorded.events.dropped:
            span.dropped_events = recorded.events.dropped
        if len(links) < len(recorded.links):
            span.dropped_links = len(recorded.links) - len(links)
        return span

    def batch_headers(self) -> dict[str, str]:
        """The current delivery span's, for an HTTP target's batch POST (the records keep their own contexts)."""
        delivery = current()
        return batch_headers(delivery) if delivery is not None else {}

    def note(self, message: Message, action: str, detail: dict[str, str | int]) -> None:
        """The settler's retry or dead letter, as an event on the delivery span (the current one)."""
        delivery = current()
        recorded = delivery.recorded if delivery is not None else None
        if recorded is None:
            return
        if recorded.events is None:
            recorded.events = BoundedList(self.limits.max_events)
        event_attributes: Attributes = {"messaging.message.id": message.message_id, **detail}
        recorded.events.append(Event(action, limited(event_attributes, self.limits.max_attribute_length,
                                                     self.limits.max_event_attributes), time.time_ns()))

    def bounded_links(self, links: Sequence[Link]) -> Sequence[Link] | BoundedList[Link]:
        if not links or self.limits.max_links is None or len(links) <= self.limits.max_links:
            return links
        return BoundedList.from_seq(self.limits.max_links, links)


def root_of(sampler: Sampler) -> Sampler:
    """The sampler a parentless span is decided by: a parent-based sampler (the SDK's default) looks for a parent
    and, finding none, asks its root; the daemon knows when there is none and asks the root itself. A sampler that
    decides otherwise (any other, or one that overrides should_sample) is asked itself."""
    root = getattr(sampler, "_root", None)
    if type(sampler).should_sample is ParentBased.should_sample and isinstance(root, Sampler):
        return root
    return sampler


def ratio_bound(sampler: Sampler) -> int | None:
    """The SDK's ratio sampler's bound (traceidratio, or parentbased_traceidratio's root), None for any other: a
    parentless span at or above it is dropped by the sampler's own comparison, without the SamplingResult it
    builds, a third of what tracing adds to an unsampled delivery; below it the sampler is asked."""
    return sampler.bound if type(sampler) is TraceIdRatioBased else None


def batch_headers(delivery: Delivery) -> dict[str, str]:
    """The `traceparent` (and trace state) of the span: a batch's headers, where each record carries its own
    context; a single message's add X-Ray's (`outgoing_headers`)."""
    headers = {"traceparent": traceparent(delivery.trace_id, delivery.span_id, delivery.trace_flags)}
    if delivery.trace_state is not NO_STATE and delivery.trace_state:
        headers["tracestate"] = delivery.trace_state.to_header()
    return headers


def outgoing_headers(delivery: Delivery, message: Message) -> dict[str, str]:
    """The headers by which the app's spans become children of the delivery span: `traceparent` (and the
    trace state) as the W3C propagator writes them, X-Ray's (where the message had one) through its propagator."""
    headers = batch_headers(delivery)
    if "AWSTraceHeader" in message.attributes:
        headers.update(xray_header(delivery.span_context()))
    return headers
