"""Receiving for the poller: short receives for the free slots (several at once on a busy queue, and
enough ahead to cover one round trip at the recent pace), and what lands from them and from the watchers.
A queue whose receives come back empty goes to its watcher (`watchers.py`); a run of failures is counted
and logged by `receive_failures.py`. Each queue's receive side is a `Receiving` (`receive_state.py`), which
only the receiver writes; what it receives lands in that record's buffer, from which the poller takes."""

from __future__ import annotations

import logging
import math
import random
import time
from collections.abc import Callable

import gevent
import gevent.event
import gevent.pool

from ..errors import AWS_ERRORS
from ..logs import fields
from ..message import Message
from ..metrics import OVERALL, Count
from ..supervision import log_unexpected
from .queue import SqsQueue
from .receive_failures import note_failure, note_success
from .receive_state import Receiving
from .watchers import Watchers

logger = logging.getLogger(__name__)

MAX_RECEIVES_PER_QUEUE = 32  # 320 messages per round trip: 6,400 a second at 50 ms
AHEAD_PER_SLOT = 8  # the most deliveries per slot that receives ahead count on during one round trip
FILL_RETRY_SECONDS = 0.5  # while a batching window fills: the pause after an empty receive
SMOOTHING = 0.1  # weight of the newest sample in the moving averages of receive time and delivery pace

Admit = Callable[[SqsQueue, list[Message]], list[Message]]
Release = Callable[[list[Message]], None]


class Receiver:
    """The receives of every queue; the poller asks for them (`receive_for`, `receive_ahead`) and is woken
    (`wake`) when messages land or a queue goes idle."""

    def __init__(self, *, batch_size: int, poll_for_seconds: int, sleep_seconds: float, rng: random.Random,
                 stopping: gevent.event.Event, admit: Admit, count: Count, wake: gevent.event.Event) -> None:
        self.batch_size = batch_size
        self.stopping = stopping
        self.admit = admit
        self.count = count
        self.wake = wake
        self.watchers = Watchers(receive=self._receive, poll_for_seconds=poll_for_seconds, sleep_seconds=sleep_seconds,
                                 rng=rng, stopping=stopping, count=count, wake=wake)
        self.receivers = gevent.pool.Group()  # the short receives on their way
        self.release: Release | None = None  # set at stop: what lands from then on goes there, not to a buffer

    def retire(self, state: Receiving) -> None:
        """Its queue left the poller: no new receive, and its watcher ends after its current long poll."""
        state.is_retired = True

    def stop(self, release: Release) -> None:
        """At stop: what a receive still on its way brings back goes to `release` as it lands. No slot takes
        it from a buffer any more, and holding it until the stop ends would hide it meanwhile."""
        self.release = release

    def abandon(self, states: list[Receiving], why: str) -> None:
        """Kill the receives still on their way, and name what that costs: SQS still answers each one, and
        hides what it hands out for the visibility timeout (`Poller.wait_for_receives` lets them land first)."""
        for state in states:
            if unanswered := state.receives + int(state.is_polling()):
                logger.warning("queue=%s %d receives still unanswered at stop, abandoned (%s): the up to %d messages "
                               "SQS hands them stay invisible until their visibility timeout (%ds)", state.queue.name,
                               unanswered, why, unanswered * self.batch_size, state.queue.config.visibility_timeout,
                               extra=fields(queue=state.queue.name))
        self.receivers.kill(block=True, timeout=2)
        gevent.killall([state.watcher for state in states if state.watcher is not None], block=True, timeout=2)
        for state in states:
            state.watcher = None

    def receive_for(self, state: Receiving, free_slots: int) -> bool:
        """Start receives on an emptied ready queue, one per batch the free slots can take at once
        (one round trip per batch would cap a queue at 10 messages per SQS latency); True while
        any is in flight."""
        if not state.is_ready or state.buffer or state.watcher is not None or state.is_held():
            return False  # a buffer held back by busy FIFO groups is the one batch we keep
        wanted = min(state.receive_width, -(-free_slots * state.take_size // self.batch_size))
        while state.receives < wanted:
            self._start_receive(state)
        return state.receives > 0

    def receive_ahead(self, state: Receiving, free_slots: int, busy_slots: int, pace_seconds: float) -> None:
        """On a standard queue with a backlog, keep enough receives on their way that the buffer never
        runs dry: messages for the other free slots, and for the deliveries that will end while a receive
        is on its way (Little's law: the recent pace of deliveries times the receive round trip; on a
        real network that is several receives in flight, not one). `pace_seconds`: the time between two of
        the queue's deliveries ending, as the poller sees it."""
        if not state.is_ready or state.watcher is not None or state.is_fifo or state.is_held():
            return
        slots = free_slots + busy_slots
        soon = min(state.receive_seconds / pace_seconds, AHEAD_PER_SLOT * slots)
        wanted = (free_slots + soon) * state.take_size
        coming = len(state.buffer) + state.receives * self.batch_size
        while coming < wanted and state.receives < state.receive_width:
            self._start_receive(state)
            coming += self.batch_size

    def fill(self, state: Receiving, wanted_messages: int) -> float:
        """While a batching window is open: receive until the batch could be full. After a receive came
        back empty, wait FILL_RETRY_SECONDS before the next (SQS answers a short receive empty now and then
        even with a backlog); after a failed one, stop (the watcher's back-off takes over at the window's
        end). Returns how long until it may try again, 0 when receives are on their way or not needed."""
        if not state.is_ready or state.watcher is not None or state.short_failures:
            return 0.0
        if (held := state.hold_seconds()) > 0:
            return held
        if state.is_full():
            return 0.0  # a delivery that ends makes room, and wakes the poller
        retry = state.last_empty_at + FILL_RETRY_SECONDS - time.monotonic()
        if retry > 0 and not state.receives:
            return retry
        coming = len(state.buffer) + state.receives * self.batch_size
        while coming < wanted_messages and state.receives < state.receive_width:
            self._start_receive(state)
            coming += self.batch_size
        return 0.0

    def hand_over(self, state: Receiving, messages: list[Message]) -> None:
        """Messages admitted after their receive (their claims retried in place) land as a receive's would."""
        if self.release is not None:
            self.release(messages)
        else:
            state.buffer.extend(messages)
        self.wake.set()

    def _start_receive(self, state: Receiving) -> None:
        state.receives += 1
        self.receivers.spawn(self._receive_now, state)

    def _receive_now(self, state: Receiving) -> None:
        started = time.monotonic()
        failed = False
        try:
            messages = self._receive(state, 0)
            state.receive_seconds = moving_average(state.receive_seconds, time.monotonic() - started)
            note_success(state)
            state.short_failures = 0
        except AWS_ERRORS as error:
            # One failure (after the wire's own retries) on a busy queue is a blip: keep receiving. Two in a
            # row hand the queue to its watcher, which backs off.
            failed = True
            state.short_failures += 1
            note_failure(state, error)
            if state.short_failures == 1:
                logger.info("queue=%s receive failed, trying again: %s", state.queue.name, state.last_error,
                            extra=fields(queue=state.queue.name))
            else:
                # The watcher's first back-off is the WARNING (with how long it has failed), not this.
                logger.debug("queue=%s receive failed, watching it instead: %s", state.queue.name, state.last_error,
                             extra=fields(queue=state.queue.name))
                state.failing_since = state.failing_since or time.monotonic()
            messages = []
        except Exception as error:  # the watcher takes over, with its backoff
            self.count(OVERALL, "InternalErrors")
            log_unexpected(logger, f"queue={state.queue.name} receive", error, **fields(queue=state.queue.name))
            messages = []
        finally:
            state.receives -= 1
        # Full batches mean a backlog: widen to more receives at once. A short one halves the width (real
        # SQS answers short receives with fewer messages now and then, backlog or not); an empty one
        # narrows it back to one.
        if len(messages) >= self.batch_size:
            state.receive_width = min(MAX_RECEIVES_PER_QUEUE, state.receive_width * 2)
        else:
            state.receive_width = max(1, state.receive_width // 2) if messages else 1
        if not messages and not (failed and state.short_failures == 1):
            state.is_ready = False  # no more receives on it; the last one in flight decides what next
        if not state.receives and not state.is_ready and state.watcher is None:
            if state.buffer:
                state.is_ready = True  # another receive brought messages: try again once they are taken
            elif not self.stopping.is_set() and not state.is_retired:
                self.watchers.start(state)
        self.wake.set()

    def _receive(self, state: Receiving, wait_seconds: int) -> list[Message]:
        messages = state.queue.receive(self.batch_size, wait_seconds)
        if not messages:
            state.last_empty_at = time.monotonic()
        admitted = self.admit(state.queue, messages)
        if self.release is not None:
            self.release(admitted)
        else:
            state.buffer.extend(admitted)
        return messages


def moving_average(average: float, sample: float) -> float:
    """Exponentially smoothed; an average of 0 or infinity means no sample yet."""
    if average == 0 or average == math.inf:
        return sample
    return average + SMOOTHING * (sample - average)
