"""The delivery slots: `concurrency` long-lived greenlets, each taking work from the poller, delivering it
to its queue's target and handing the outcomes to the settler, then coming back for more."""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

import gevent
import gevent.event
import gevent.lock
import gevent.pool

from ..config.model import Config
from ..logs import fields
from ..message import Message
from ..metrics import OVERALL, Registry
from ..supervision import log_greenlet_failure
from ..targets import Outcome, QueueInfo, Target
from .outcomes import Settler
from .payloads import Prepared, Preparer
from .poller import Poller, Work
from .utilization import Utilization

logger = logging.getLogger(__name__)

TRACING_WARNING_SECONDS = 60.0


class DeliveryTracer(Protocol):
    """[tracing]'s side of a delivery (`tracing.spans.Tracing`): a span from start to settled."""

    def start(self, queue: str, target: str, messages: list[Message], is_batch: bool) -> Any: ...

    def finish(self, delivery: Any, outcomes: list[Outcome]) -> None: ...


@dataclass(frozen=True, slots=True)
class MessageRow:
    """One message being delivered, as the status page lists it."""
    id: str
    queue: str
    target: str
    age_seconds: float  # since its receive
    receive_count: int


class Slots:
    """The slots and the work they hold; the daemon starts them (`dispatch`) and, at stop, waits for them."""

    def __init__(self, config: Config, targets: Mapping[str, Target], queue_infos: Mapping[str, QueueInfo],
                 preparer: Preparer, poller: Poller, settler: Settler, registry: Registry,
                 stopping: gevent.event.Event, on_limit: Callable[[str], None]) -> None:
        self.config = config
        self.targets = targets
        self.queue_infos = queue_infos
        self.preparer = preparer  # SNS envelopes unwrapped and S3 payloads fetched before a delivery
        self.poller = poller
        self.settler = settler
        self.registry = registry
        self.stopping = stopping
        self.on_limit = on_limit  # called once --max-messages have been started
        self.taking = gevent.lock.Semaphore(1)  # held by the one free slot that is waiting for work
        self.pool = gevent.pool.Group()
        self.in_flight: set[Work] = set()
        self.started_messages = 0
        self.utilization = Utilization(config.concurrency, config.metrics_interval)  # one slot per work
        self.tracer: DeliveryTracer | None = None  # with [tracing]
        self.tracing_warned_at = -math.inf  # time.monotonic() of the latest WARNING of a failing tracer

    def in_flight_by_queue(self, queue_names: Iterable[str]) -> dict[str, float]:
        """Messages being delivered per queue, zero included: the reader behind the InFlight gauge."""
        counts = dict.fromkeys(queue_names, 0.0)
        for work in list(self.in_flight):
            counts[work.state.queue.name] = counts.get(work.state.queue.name, 0.0) + len(work.messages)
        return counts

    def message_rows(self) -> list[MessageRow]:
        """Every message being delivered, oldest first."""
        now = time.time()
        rows = [MessageRow(message.message_id, work.state.queue.name, work.state.queue.config.target,
                           max(0.0, now - message.received_at), message.receive_count)
                for work in list(self.in_flight) for message in work.messages]
        rows.sort(key=lambda row: -row.age_seconds)
        return rows

    def dispatch(self) -> None:
        """One long-lived greenlet per delivery slot; returns once stopping (the slots finish on their own)."""
        for _ in range(self.config.concurrency):
            self.pool.spawn(self.run_slot).link_exception(log_greenlet_failure)
        self.stopping.wait()

    def run_slot(self) -> None:
        """A free slot takes work, delivers it, and comes back; a bug on the way costs neither the slot
        nor the messages."""
        while not self.stopping.is_set():
            try:
                work = self.take_work()
            except Exception:
                self.registry.count(OVERALL, "InternalErrors")
                logger.error("taking work failed unexpectedly; trying again in 1s", exc_info=True)
                self.stopping.wait(1.0)
                continue
            if work is None:
                return
            try:
                self.deliver(work)
            except Exception:
                self.registry.count(OVERALL, "InternalErrors")
                logger.error("queue=%s delivery failed unexpectedly", work.state.queue.name, exc_info=True,
                             extra=fields(queue=work.state.queue.name))
                self.abandon(work)

    def take_work(self) -> Work | None:
        """One free slot at a time asks the poller, which picks the queue in a fresh strategy order for
        each and receives only for free slots."""
        with self.taking:
            if self.stopping.is_set():
                return None
            work = self.poller.wait_for_work(self.config.concurrency - len(self.in_flight), len(self.in_flight))
            if work is None:
                return None
            self.in_flight.add(work)
            self.utilization.set_busy(len(self.in_flight))
            self.started_messages += len(work.messages)
            if self.config.max_messages and self.started_messages >= self.config.max_messages:
                self.on_limit(f"--max-messages={self.config.max_messages} reached")
            return work

    def abandon(self, work: Work) -> None:
        """After a bug mid-delivery: the settler makes what was not settled visible again."""
        try:
            self.settler.abandon(work)
        except Exception:
            logger.error("queue=%s releasing after a failed delivery failed", work.state.queue.name, exc_info=True,
                         extra=fields(queue=work.state.queue.name))
        finally:
            self.let_go(work)

    def let_go(self, work: Work) -> None:
        """The slot holds the work no longer: settled, or abandoned."""
        self.in_flight.discard(work)
        self.utilization.set_busy(len(self.in_flight))

    def deliver(self, work: Work) -> None:
        queue = work.state.queue
        target = self.targets[queue.config.target]
        prepared: Prepared | None = None
        started = time.monotonic()
        tracer, traced = self.tracer, None
        outcomes: list[Outcome] = []
        try:
            # SNS envelopes unwrapped, S3 payloads fetched: under the receive's lease, before the target's deadline
            prepared = self.preparer.prepare(queue.config, work.messages)
            messages = work.messages if prepared is None else prepared.messages()
            info = self.queue_infos[queue.name]
            self.settler.start(work, target.deadline_seconds(info, messages) + 5)
            started = time.monotonic()
            if tracer is not None:  # current until the work is settled: its log lines carry the span's ids
                traced = self.start_span(tracer, queue.name, target.name, messages or work.messages,
                                         target.messages_per_delivery > 1 or len(messages) > 1)
            if prepared is None:
                outcomes = target.deliver(info, messages)
            else:
                outcomes = prepared.deliver(target, info)
        except Exception as error:  # a bug in a target must neither kill the daemon nor lose the messages
            logger.error("queue=%s target=%s delivery raised", queue.name, target.name, exc_info=True,
                         extra=fields(queue=queue.name, target=target.name))
            outcomes = [Outcome.failure("InternalError", repr(error))] * len(work.messages)
        elapsed_ms = (time.monotonic() - started) * 1000
        self.settler.settle(work, outcomes, target.name)
        try:  # the work is settled: what follows can fail, but never abandon it
            if prepared is not None:
                self.preparer.finish(queue.config, prepared, outcomes)
            for _ in work.messages:
                self.registry.observe(queue.name, "DeliveryTime", elapsed_ms)
        except Exception:
            self.registry.count(OVERALL, "InternalErrors")
            logger.error("queue=%s after settling a delivery", queue.name, exc_info=True, extra=fields(queue=queue.name))
        finally:
            if traced is not None:
                assert tracer is not None
                self.finish_span(tracer, queue.name, traced, outcomes)
            self.let_go(work)

    def start_span(self, tracer: DeliveryTracer, queue: str, target: str, messages: list[Message],
                   is_batch: bool) -> Any:
        """Tracing fails open: a tracer that raises (a plugin sampler, an exporter's bug) leaves the delivery
        untraced, never failed."""
        try:
            return tracer.start(queue, target, messages, is_batch)
        except Exception as error:
            self.note_tracing_failure(queue, error)
            return None

    def finish_span(self, tracer: DeliveryTracer, queue: str, traced: Any, outcomes: list[Outcome]) -> None:
        try:
            tracer.finish(traced, outcomes)
        except Exception as error:
            self.note_tracing_failure(queue, error)

    def note_tracing_failure(self, queue: str, error: Exception) -> None:
        """Counted each time; one WARNING per TRACING_WARNING_SECONDS."""
        self.registry.count(OVERALL, "InternalErrors")
        now = time.monotonic()
        if now - self.tracing_warned_at >= TRACING_WARNING_SECONDS:
            self.tracing_warned_at = now
            logger.warning("queue=%s tracing failed, delivering untraced (one warning per %.0fs): %s: %s", queue,
                           TRACING_WARNING_SECONDS, type(error).__name__, error, exc_info=True,
                           extra=fields(queue=queue))
