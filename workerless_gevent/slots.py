"""The delivery slots: `concurrency` long-lived greenlets, each taking work from the poller, delivering it
to its queue's target and settling every message (handler), then coming back for more."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

import gevent
import gevent.event
import gevent.lock
import gevent.pool

from .config import Config
from .handler import Handler
from .heartbeat import Leases
from .logs import fields
from .metrics import OVERALL, Registry
from .poller import Poller, Work
from .setup import Parts
from .supervision import log_greenlet_failure
from .targets import Outcome

logger = logging.getLogger(__name__)


class Slots:
    """The slots and the work they hold; the daemon starts them (`dispatch`) and, at stop, waits for them."""

    def __init__(self, config: Config, parts: Parts, poller: Poller, handler: Handler, leases: Leases,
                 registry: Registry, stopping: gevent.event.Event, on_limit: Callable[[str], None]) -> None:
        self.config = config
        self.parts = parts
        self.poller = poller
        self.handler = handler
        self.leases = leases
        self.registry = registry
        self.stopping = stopping
        self.on_limit = on_limit  # called once --max-messages have been started
        self.taking = gevent.lock.Semaphore(1)  # held by the one free slot that is waiting for work
        self.pool = gevent.pool.Group()
        self.in_flight: set[Work] = set()
        self.started_messages = 0

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
            self.started_messages += len(work.messages)
            if self.config.max_messages and self.started_messages >= self.config.max_messages:
                self.on_limit(f"--max-messages={self.config.max_messages} reached")
            return work

    def abandon(self, work: Work) -> None:
        """After a bug mid-delivery: what was not settled is visible again at once, and its FIFO groups
        are freed with the rest of them released, as after a failure."""
        try:
            groups = {message.group_id for message in work.messages if message.group_id is not None}
            unsettled = [message for message in work.messages if not message.settled]
            self.handler.release(unsettled + self.poller.finish(work, groups))
        except Exception:
            logger.error("queue=%s releasing after a failed delivery failed", work.state.queue.name, exc_info=True,
                         extra=fields(queue=work.state.queue.name))
        finally:
            self.in_flight.discard(work)

    def deliver(self, work: Work) -> None:
        queue = work.state.queue
        target = self.parts.targets[queue.config.target]
        for message in work.messages:
            self.leases.limit(message, target.hard_deadline_seconds + 5)
        started = time.monotonic()
        try:
            outcomes = target.deliver(self.parts.queue_infos[queue.name], work.messages)
        except Exception as error:  # a bug in a target must neither kill the daemon nor lose the messages
            logger.error("queue=%s target=%s delivery raised", queue.name, target.name, exc_info=True,
                         extra=fields(queue=queue.name, target=target.name))
            outcomes = [Outcome.failure("InternalError", repr(error))] * len(work.messages)
        elapsed_ms = (time.monotonic() - started) * 1000
        failed_groups = set()
        for message, outcome in zip(work.messages, outcomes):
            self.registry.observe(queue.name, "DeliveryTime", elapsed_ms)
            self.handler.settle(queue, message, outcome, target.name)
            if not outcome.is_success and message.group_id is not None:
                failed_groups.add(message.group_id)
        self.handler.release(self.poller.finish(work, failed_groups))
        self.in_flight.discard(work)
