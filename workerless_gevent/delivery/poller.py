"""Chooses work for free delivery slots: a fresh strategy order per slot, FIFO-aware takes from the
queues' buffers; the receiving behind the buffers is `receiving.Receiver`'s.

A queue is skipped for a slot while its target is paused, while it or its target is at its
in-flight cap, while the target's rate allows no delivery yet (`flow.TargetFlow`), and while a
Lambda batching window is still filling its batch; lower queues may take the slot meanwhile, and no
receive is made for work that cannot start.

A queue is *ready* while its last receive returned messages and *idle* once one came back empty.
An idle queue gets exactly one watcher greenlet that long-polls it until something arrives, so
a new message wakes the daemon at once and idle cost is one request per queue per `poll_for`.

A queue's state, in the words the logs, the metrics and the status page share (QueueRow.state):
*starting* until its first receive completes, then *ready* or *idle*; *failing* while its receives
fail; *paused* while its target takes no work (a Retry-After, a throttle, an app not ready yet);
*draining* once a reload took it out of the poller, until its deliveries have ended.
"""

from __future__ import annotations

import math
import random
import time
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import gevent
import gevent.event

from ..message import Message
from .flow import SharedLimit, TargetFlow
from .ordering import Strategy
from .queue import SqsQueue
from .receiving import Admit, Count, Receiver, moving_average


QUEUE_STATES = ("starting", "ready", "idle", "failing", "paused", "draining")


@dataclass(eq=False)
class QueueState:
    queue: SqsQueue
    take_size: int  # messages per delivery: 1 for HTTP, the batch size for Lambda
    is_paused: Callable[[], float]  # seconds until the queue's target accepts work again
    buffer: deque[Message] = field(default_factory=deque)
    is_ready: bool = True
    watcher: gevent.Greenlet | None = None
    busy_groups: set[str] = field(default_factory=set)
    failures: int = 0  # failed long polls in a row
    short_failures: int = 0  # failed short receives in a row
    failing_since: float | None = None  # time.monotonic() of the first of the receive failures in a row
    warnings_logged: int = 0  # WARNING lines about the current run of failures
    last_error: str = ""  # of the latest failed receive
    last_error_at: float = 0.0  # its time.time()
    receiving: int = 0  # short receives in flight
    receive_width: int = 1  # how many may be in flight at once
    receive_seconds: float = 0.0  # moving average of a short receive's round trip
    is_drained: bool = False
    has_received: bool = False  # a receive of it has completed: it is no longer starting
    is_retired: bool = False  # a reload took it out of the poller: no new receive, no watcher
    flow: TargetFlow | None = None  # the target's in-flight limit and rate, shared by its queues
    window_seconds: float = 0.0  # a Lambda batching window: how long to wait to fill take_size
    in_flight: int = 0  # deliveries from this queue now
    last_empty_at: float = -math.inf  # time.monotonic() of its latest receive that came back empty
    fleet_gates: tuple[SharedLimit, ...] = ()  # its fleet-wide limits (fleet/): shares leased across daemons

    def wait_seconds(self) -> float:
        """0 when a delivery from this queue may start now; infinity while capped (a finish wakes)."""
        cap = self.queue.config.max_concurrency
        if cap is not None and self.in_flight >= cap:
            return math.inf
        seconds = self.is_paused()
        if self.flow is not None and seconds <= 0:
            seconds = self.flow.wait_seconds()
        if seconds <= 0 and self.fleet_gates:  # asked only when nothing local holds the queue back
            has_work = self.has_work()
            seconds = max(gate.wait_seconds(has_work) for gate in self.fleet_gates)
        return seconds

    def has_work(self) -> bool:
        """It has messages buffered, or its last receive brought some (or it has not received yet)."""
        return bool(self.buffer) or (self.is_ready and not self.is_retired)

    def room(self, free_slots: int) -> int:
        """How many deliveries from this queue could start now: within the caps, and the rate's tokens."""
        cap = self.queue.config.max_concurrency
        room = free_slots if cap is None else min(free_slots, cap - self.in_flight)
        if self.flow is not None:
            room = min(room, self.flow.room())
            if self.flow.bucket is not None:
                room = min(room, max(1, int(self.flow.bucket.tokens)))
        for gate in self.fleet_gates:
            room = min(room, max(1, gate.room()))
        return max(0, room)

    def pace_seconds(self) -> float:
        """The shortest time between two deliveries its target's rate allows (0 without a rate)."""
        return 1 / self.flow.bucket.rate if self.flow is not None and self.flow.bucket is not None else 0.0

    def window_left_seconds(self) -> float:
        """While a batching window fills a batch: how long it stays open; else 0."""
        if not self.window_seconds or not self.buffer or len(self.buffer) >= self.take_size:
            return 0.0
        return self.window_seconds - (time.time() - self.buffer[0].received_at)

    @property
    def weight(self) -> int:
        return self.queue.config.weight


@dataclass(frozen=True, slots=True)
class QueueRow:
    """One queue as the status page, /readyz, Prometheus and the stop summary see it: plain values."""
    name: str
    target: str
    state: str  # starting, ready, idle, failing, paused or draining (see the module's docstring)
    buffered: int
    receive_failures: int  # failed long polls in a row
    failing_seconds: float  # since the first of the receive failures in a row; 0 when the last one worked
    last_error: str  # of the latest failed receive
    last_error_at: float  # its time.time(), 0 if none
    paused_seconds: float  # until its target accepts work again
    paused_reason: str = ""  # paused for another reason than its target: a fleet-wide limit's lease lapsed


@dataclass(slots=True, eq=False)
class Work:
    state: QueueState
    messages: list[Message]
    started_at: float = 0.0  # by the target flow's clock
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
        self.count = count or (lambda queue, name: None)
        self.receiver = Receiver(batch_size=batch_size, poll_for_seconds=poll_for_seconds, sleep_seconds=sleep_seconds,
                                 rng=rng, stopping=stopping, admit=admit, count=self.count,
                                 wake=self.wake, pace=lambda: self.finish_interval)
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
            waits = [state.wait_seconds() for state in order]
            for index, (state, wait) in enumerate(zip(order, waits)):
                if wait > 0:
                    continue
                room = state.room(free_slots)
                window_left = state.window_left_seconds()
                if window_left > 0:  # lower queues may use the slot while the batch fills
                    retry = self.receiver.fill(state, state.take_size)
                    waits[index] = min(window_left, retry) if retry > 0 else window_left
                    continue
                work = self._take(state)
                if work is not None:
                    self.receiver.receive_ahead(state, room - 1, busy_slots, state.pace_seconds())
                    return self._start(work)
                if self.receiver.receive_for(state, room):
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
        if state.flow is None:
            return work
        started_at, waited = state.flow.start()
        if waited:
            self.count(state.queue.name, "RateLimited")
        return Work(state, work.messages, started_at)

    def finish(self, work: Work, failed_groups: set[str], overloaded: bool = False) -> list[Message]:
        """A delivery ended: free its FIFO groups and its place under the caps (an overload shrinks the
        target's limit); return buffered messages of failed groups to release."""
        state = work.state
        state.in_flight = max(0, state.in_flight - 1)
        for gate in state.fleet_gates:
            gate.finish()
        if state.flow is not None:
            state.flow.finish(work.started_at, overloaded)
        for message in work.messages:
            if message.group_id is not None:
                state.busy_groups.discard(message.group_id)
        released = [message for message in state.buffer if message.group_id in failed_groups] if failed_groups else []
        for message in released:
            state.buffer.remove(message)
        now = time.monotonic()
        if self.last_finish:
            interval = min(1.0, max(1e-6, now - self.last_finish))  # a pause is no pace: it must not linger
            self.finish_interval = moving_average(self.finish_interval, interval)
        self.last_finish = now
        self.wake.set()
        return released

    def stop(self, cancel_watchers: bool = True, wait_seconds: float = 5.0) -> list[Message]:
        """Hand back every buffered message so the caller can release it.

        Killing a watcher mid long-poll can lose the reply to a receive SQS still completes, and
        hide its messages for a visibility timeout; so while deliveries drain, watchers may finish
        their poll (the loop ends since stopping is set) and what they got is handed back later.
        """
        self.receiver.stop(self.states, cancel_watchers, wait_seconds)
        buffered: list[Message] = []
        for state in self.states:
            if cancel_watchers:
                state.watcher = None
            buffered.extend(state.buffer)
            state.buffer.clear()
        return buffered

    def rows(self) -> list[QueueRow]:
        """A snapshot of every queue, in configuration order."""
        now = time.monotonic()
        return [queue_row(state, now) for state in self.states]

    def is_drained(self) -> bool:
        """Every queue has come back empty from a long poll since it last had messages."""
        return all(state.is_drained and not state.buffer for state in self.states)

    def _take(self, state: QueueState) -> Work | None:
        # FIFO: a group already in flight elsewhere is skipped whole, which keeps its order.
        taken: list[Message] = []
        claimed: set[str] = set()
        for message in list(state.buffer):
            group = message.group_id
            if group is not None and group not in claimed:
                if group in state.busy_groups:
                    continue
                state.busy_groups.add(group)
                claimed.add(group)
            taken.append(message)
            state.buffer.remove(message)
            if len(taken) >= state.take_size:
                break
        return Work(state, taken) if taken else None


def queue_row(state: QueueState, now: float) -> QueueRow:
    paused = max(0.0, state.is_paused())
    lapsed = next((reason for gate in state.fleet_gates if (reason := gate.lapsed_reason())), "")
    failing = state.failures > 0 or state.failing_since is not None
    if state.is_retired:
        word = "draining"
    elif failing:
        word = "failing"
    elif paused or lapsed:
        word = "paused"
    elif not state.has_received:
        word = "starting"
    else:
        word = "ready" if state.is_ready else "idle"
    return QueueRow(state.queue.name, state.queue.config.target, word, len(state.buffer), state.failures,
                    now - state.failing_since if state.failing_since is not None else 0.0, state.last_error,
                    state.last_error_at, 0.0 if state.is_retired else paused, lapsed)
