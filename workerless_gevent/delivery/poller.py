"""Chooses work for free delivery slots: a fresh strategy order per slot, FIFO-aware takes from the
queues' buffers; the receiving behind the buffers is `receiving.Receiver`'s.

A queue is skipped for a slot while its target is paused, while it or its target is at its
in-flight cap, while the target's rate allows no delivery yet (`flow.TargetFlow`), and while a
batching window (`max_batching_window`) is still filling its batch; lower queues may take the slot meanwhile, and no
receive is made for work that cannot start.

A queue is *ready* while its last receive returned messages and *idle* once one came back empty.
An idle queue gets exactly one watcher greenlet that long-polls it until something arrives, so
a new message wakes the daemon at once and idle cost is one request per queue per `poll_for`.
At a stop its last long poll is let end, not cut (SQS would still answer it, and hide what it hands
out): what it brings is released as it lands (`stop`, `wait_for_receives`).
"""

from __future__ import annotations

import logging
import math
import random
import time
from collections.abc import Collection, Sequence
from dataclasses import dataclass

import gevent
import gevent.event

from ..message import Message
from ..metrics import Count
from .ordering import Strategy
from .queue import SqsQueue
from .queue_state import QueueRow, QueueState, queue_row, take_buffered
from .receiving import Admit, Receiver, Release, moving_average

logger = logging.getLogger(__name__)

POLL_SLACK_SECONDS = 2.0  # at stop, how long after its poll_for SQS's answer to a long poll may still come


@dataclass(slots=True, eq=False)
class Work:
    state: QueueState
    messages: list[Message]
    started_at: float = 0.0  # by the target flow's clock
    groups: tuple[str, ...] = ()  # a standard queue's groups (tenants) it counts under their in-flight counts
    is_finished: bool = False  # the poller was told it ended (once: it frees groups and places under caps)


class Poller:
    def __init__(self, states: Sequence[QueueState], strategy: Strategy, *, batch_size: int, poll_for_seconds: int,
                 sleep_seconds: float, rng: random.Random, stopping: gevent.event.Event, admit: Admit,
                 count: Count | None = None) -> None:
        self.states = list(states)  # a reload assigns a new list, never changes this one
        self.strategy = strategy
        self.rng = rng
        self.stopping = stopping
        self.wake = gevent.event.Event()
        self.count = count or (lambda queue, name, amount=1: None)
        self.receiver = Receiver(batch_size=batch_size, poll_for_seconds=poll_for_seconds, sleep_seconds=sleep_seconds,
                                 rng=rng, stopping=stopping, admit=admit, count=self.count,
                                 wake=self.wake)
        self.tick = 0
        self.last_finish = 0.0
        self.finish_interval = math.inf  # moving average of the time between two deliveries ending

    def wait_for_work(self, free_slots: int = 1, busy_slots: int = 0) -> Work | None:
        """Block until some queue, in a fresh strategy order, has work; None once stopping.

        The order is drawn once per call and kept while the slot waits: redrawing at every wake-up would
        let a queue whose messages are on their way lose the slot to any queue with a buffer, and bend
        the weights toward the queues that are drained least."""
        states = self.states
        order = self.strategy(states, self.tick, self.rng)
        self.tick += 1
        while not self.stopping.is_set():
            self.wake.clear()
            if self.states is not states:  # a reload replaced the queues (it assigns a new list): draw again
                states = self.states
                order = self.strategy(states, self.tick, self.rng)
            waits = list(map(QueueState.wait_seconds, order))
            for index, (state, wait) in enumerate(zip(order, waits)):
                if wait > 0:
                    continue
                # A queue that may start a delivery has room for at least one: one free slot needs no sum.
                room = 1 if free_slots == 1 else state.room(free_slots)
                window_left = state.window_left_seconds() if state.window_seconds else 0.0
                if window_left > 0:  # lower queues may use the slot while the batch fills
                    retry = self.receiver.fill(state.receiving, state.take_size)
                    waits[index] = min(window_left, retry) if retry > 0 else window_left
                    continue
                work = self._take(state)
                if work is not None:
                    # A rate limit paces the queue's deliveries more slowly than the daemon's pace may say.
                    bucket = state.flow.bucket if state.flow is not None else None
                    pace = self.finish_interval if bucket is None else max(self.finish_interval, 1 / bucket.rate)
                    self.receiver.receive_ahead(state.receiving, room - 1, busy_slots, pace)
                    return self._start(work)
                if self.receiver.receive_for(state.receiving, room):
                    break  # its messages are on their way: queues after it wait, so priority holds
            timeouts = [seconds for seconds in waits if 0 < seconds < math.inf]
            gevent.wait([self.wake, self.stopping], count=1, timeout=min(timeouts) if timeouts else None)
        return None

    def _start(self, work: Work) -> Work:
        state = work.state
        state.in_flight += 1
        for gate in state.fleet_gates:
            if gate.start():
                self.count(gate.limit_id, "FleetWaits")
        if state.flow is not None:
            work.started_at, waited = state.flow.start()
            if waited:
                self.count(state.queue.name, "RateLimited")
        return work

    def finish(self, work: Work, failed_groups: set[str], overloaded: bool = False) -> list[Message]:
        """A delivery ended: free its FIFO groups and its place under the caps (an overload shrinks the
        target's limit); return buffered messages of failed groups (or waiting for their group near the receipt
        limit) to release."""
        state = work.state
        if state.in_flight > 0:
            state.in_flight -= 1
        for gate in state.fleet_gates:
            gate.finish()
        if state.flow is not None:
            state.flow.finish(work.started_at, overloaded)
        if work.groups and state.groups is not None:  # the next of each group's waiting messages may go
            state.groups.finish(work.groups, state.receiving.buffer)
        if state.busy_groups:  # FIFO groups are claimed by `_take` only
            for message in work.messages:
                group = message.fifo_group
                if group is not None:
                    state.busy_groups.discard(group)
        buffer = state.receiving.buffer
        released = [message for message in buffer if message.fifo_group in failed_groups] if failed_groups else []
        for message in released:
            buffer.remove(message)
        if state.groups is not None and state.groups.waiting:  # near SQS's receipt limit: received again, later
            released += state.groups.take_overdue()
        now = time.monotonic()
        if self.last_finish:
            interval = min(1.0, max(1e-6, now - self.last_finish))  # a pause is no pace: it must not linger
            self.finish_interval = moving_average(self.finish_interval, interval)
        self.last_finish = now
        self.wake.set()
        return released

    def hand_over(self, queue: SqsQueue, messages: list[Message]) -> bool:
        """Messages of `queue` admitted after their receive (the settler's `hand_over`): into its buffer, or at a
        stop to the stop's release; False if the queue is no longer in the poller (the caller releases them)."""
        state = next((state for state in self.states if state.queue is queue), None)
        if state is None:
            return False
        self.receiver.hand_over(state.receiving, messages)
        return True

    def stop(self, release: Release) -> list[Message]:
        """Hand back every buffered message for the caller to release; what the receives still on their way
        bring back goes to `release` as it lands (`wait_for_receives` waits for them)."""
        self.receiver.stop(release)
        return take_buffered(self.states)

    def wait_for_receives(self, also: Sequence[QueueState], since: float, limit_seconds: float,
                          forced: gevent.event.Event) -> None:
        """At a stop requested at `since` (time.monotonic()): let the receives on their way (`also`'s too) land,
        then abandon the rest. SQS still answers a long poll cut on our side, and hides what it hands out: each
        may end (poll_for and some slack, within `limit_seconds`); short receives get `limit_seconds` (the stop's
        deadline less its flushes' share). `forced` (a second signal) ends the wait at once."""
        receivings = [state.receiving for state in (*self.states, *also)]
        polls_until = since + min(self.receiver.watchers.poll_for_seconds + POLL_SLACK_SECONDS, limit_seconds)
        receives_until = since + limit_seconds
        is_logged = False
        while not forced.is_set():
            now = time.monotonic()
            watchers = (receiving.watcher for receiving in receivings) if now < polls_until else ()
            polls = [watcher for watcher in watchers if watcher is not None and not watcher.dead]
            receivers = self.receiver.receivers if now < receives_until else ()
            receives = [receive for receive in receivers if not receive.dead]
            if not polls and not receives:
                break
            if not is_logged:
                is_logged = True
                longest = max(polls_until if polls else now, receives_until if receives else now) - now
                logger.info("stop: waiting up to %.0fs for %d long polls and %d receives on their way; what they "
                            "bring is released as it lands", longest, len(polls), len(receives))
            until = min(end for end in (polls_until, receives_until) if end > now)
            gevent.wait([*polls, *receives, forced], count=1, timeout=until - now)
        why = "a second stop signal" if forced.is_set() else f"{time.monotonic() - since:.0f}s after the stop"
        self.receiver.abandon(receivings, why)

    def retire(self, names: Collection[str]) -> list[QueueState]:
        """Take queues out: nothing more is received from them or taken from their buffers (the caller
        releases those); a slot waiting for work draws its order again from the new list."""
        retired = [state for state in self.states if state.queue.name in names]
        for state in retired:
            state.is_retired = True
            self.receiver.retire(state.receiving)
        self.states = [state for state in self.states if not state.is_retired]
        return retired

    def rows(self) -> list[QueueRow]:
        """A snapshot of every queue, in configuration order."""
        now = time.monotonic()
        return [queue_row(state, now) for state in self.states]

    def is_drained(self) -> bool:
        """Every queue has come back empty from a long poll since it last had messages."""
        return all(state.receiving.is_drained and not state.has_buffered() for state in self.states)

    def _take(self, state: QueueState) -> Work | None:
        groups = state.groups
        if groups is not None:  # a standard queue: its groups are tenants, under their cap if it has one
            messages, counted, set_aside = groups.take(state.receiving.buffer, state.take_size)
            if set_aside:
                self.count(state.queue.name, "GroupWaits", set_aside)
            return Work(state, messages, groups=counted) if messages else None
        # FIFO: a group already in flight elsewhere is skipped whole, which keeps its order (an HTTP batch takes
        # one group: a POST holds one group's messages, in order).
        buffer = state.receiving.buffer
        taken: list[Message] = []
        # Messages without a group go in order: no copy of a buffer that receives ahead may have filled with
        # hundreds, and the same result as the loop below.
        while buffer and buffer[0].fifo_group is None:
            taken.append(buffer.popleft())
            if len(taken) >= state.take_size:
                return Work(state, taken)
        if not buffer:
            return Work(state, taken) if taken else None
        claimed: set[str] = set()
        for message in list(buffer):
            group = message.fifo_group
            if group is not None and group not in claimed:
                if group in state.busy_groups or (claimed and state.takes_one_group):
                    continue
                state.busy_groups.add(group)
                claimed.add(group)
            taken.append(message)
            buffer.remove(message)
            if len(taken) >= state.take_size:
                break
        return Work(state, taken) if taken else None
