"""One queue as the poller sees it (`QueueState`: may a delivery from it start, how many, what it holds) and
as everything else is shown it (`QueueRow`, plain values).

A queue's state, in the words the logs, the metrics and the status page share (QueueRow.state):
*starting* until its first receive completes, then *ready* or *idle*; *failing* while its receives
fail; *paused* while its target takes no work (a Retry-After, a throttle, an app not ready yet);
*draining* once a reload took it out of the poller, until its deliveries have ended.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Protocol

from ..message import Message
from .flow import SharedLimit, TargetFlow
from .groups import GroupRow, Groups
from .queue import SqsQueue
from .receive_state import Receiving


QUEUE_STATES = ("starting", "ready", "idle", "failing", "paused", "draining")


RETIRED_PAUSE_SECONDS = 3600.0  # what a retired queue tells the slots that drew their order before it left


class ReceiveHold(Protocol):
    """What holds a queue's receives back while a store its deliveries need is not usable (the idempotency
    table's `idempotency.health.StoreHold`): the poller, the receiver and the queue's watcher ask it before each
    receive. It holds receives only: what the queue has buffered is still delivered."""

    def hold_seconds(self) -> float:
        """Until the queue may receive again (0: now)."""
        ...

    def hold_reason(self) -> str:
        """Why it is held, for the status page and /readyz ('' while it is not)."""
        ...


@dataclass(eq=False)
class QueueState:
    """One queue as the poller chooses: what it was built with, its receive side (`receiving`, the
    `Receiver`'s), and what only the poller writes: its deliveries, FIFO groups in flight (a standard queue's
    groups, tenants, in `groups`), and retirement."""
    queue: SqsQueue
    take_size: int  # messages per delivery: the target's batch_size (1 for the aws-sqsd contract)
    paused_seconds: Callable[[], float]  # until the queue's target accepts work again (<= 0: it does)
    flow: TargetFlow | None = None  # the target's in-flight limit and rate, shared by its queues
    window_seconds: float = 0.0  # a batching window (max_batching_window): how long to wait to fill take_size
    takes_one_group: bool = False  # FIFO: a delivery holds one message group's messages (an HTTP target's batch)
    fleet_gates: tuple[SharedLimit, ...] = ()  # its fleet-wide limits (fleet/): shares leased across daemons
    receive_hold: ReceiveHold | None = None  # holds its receives back (the idempotency table's, while it fails)
    receiving: Receiving = field(init=False)
    busy_groups: set[str] = field(default_factory=set)  # FIFO groups in flight
    groups: Groups | None = field(init=False)  # a standard queue's groups (None on a FIFO queue)
    in_flight: int = 0  # deliveries from this queue now
    is_retired: bool = False  # a reload took it out of the poller (`Poller.retire`)

    def __post_init__(self) -> None:
        self.receiving = Receiving(self.queue, self.take_size)
        self.groups = None if self.queue.config.is_fifo else Groups(self.queue.config.max_concurrency_per_group)
        if self.groups is not None and self.groups.cap is not None:  # set-aside messages bound what it receives
            self.receiving.is_full = self.groups.is_full
        if self.receive_hold is not None:  # its watcher asks it too, not only the poller
            self.receiving.hold_seconds = self.receive_hold.hold_seconds

    def wait_seconds(self) -> float:
        """0 when a delivery from this queue may start now; infinity while capped (a finish wakes)."""
        if self.is_retired:
            return RETIRED_PAUSE_SECONDS
        cap = self.queue.config.max_concurrency
        if cap is not None and self.in_flight >= cap:
            return math.inf
        seconds = self.paused_seconds()
        if self.flow is not None and seconds <= 0:
            seconds = self.flow.wait_seconds()
        if seconds > 0:
            return seconds
        # when nothing local holds it back: the fleet's gates, and a hold (which holds receives, not what was
        # received: a buffer is delivered, keyless messages as usual, claimed ones before their claims lapse)
        if self.fleet_gates:
            has_work = self.has_work()
            seconds = max(gate.wait_seconds(has_work) for gate in self.fleet_gates)
        if self.receive_hold is not None and not self.receiving.buffer:
            seconds = max(seconds, self.receive_hold.hold_seconds())
        return seconds

    def has_work(self) -> bool:
        """It has messages buffered, or its last receive brought some (or it has not received yet)."""
        receiving = self.receiving
        return self.has_buffered() or (receiving.is_ready and not self.is_retired)

    def has_buffered(self) -> bool:
        """Messages received and not delivered yet: in its buffer, or waiting for their group's cap."""
        return bool(self.receiving.buffer) or (self.groups is not None and self.groups.waiting_count > 0)

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

    def window_left_seconds(self) -> float:
        """While a batching window fills a batch: how long it stays open; else 0."""
        buffer = self.receiving.buffer
        if not self.window_seconds or not buffer or len(buffer) >= self.take_size:
            return 0.0
        return self.window_seconds - (time.time() - buffer[0].received_at)

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
    # paused for another reason than its target: a fleet-wide limit's lease lapsed, or its receives are held
    # (the idempotency table failing)
    paused_reason: str = ""
    groups: tuple[GroupRow, ...] = ()  # a standard queue's busiest groups (tenants): in flight and waiting
    waiting: int = 0  # messages waiting for their group's max_concurrency_per_group (in `buffered` too)


def take_buffered(states: Sequence[QueueState]) -> list[Message]:
    """Empty the buffers of these queues: their messages, for the caller to release."""
    buffered: list[Message] = []
    for state in states:
        buffered.extend(state.receiving.buffer)
        state.receiving.buffer.clear()
        if state.groups is not None:
            buffered.extend(state.groups.take_waiting())
    return buffered


def queue_row(state: QueueState, now: float) -> QueueRow:
    receiving = state.receiving
    paused = max(0.0, state.paused_seconds())
    held_back = next((reason for gate in state.fleet_gates if (reason := gate.lapsed_reason())), "")
    if not held_back and state.receive_hold is not None:
        held_back = state.receive_hold.hold_reason()
    failing = receiving.failures > 0 or receiving.failing_since is not None
    if state.is_retired:
        word = "draining"
    elif failing:
        word = "failing"
    elif paused or held_back:
        word = "paused"
    elif not receiving.has_received:
        word = "starting"
    else:
        word = "ready" if receiving.is_ready else "idle"
    groups = state.groups
    waiting = groups.waiting_count if groups is not None else 0
    return QueueRow(state.queue.name, state.queue.config.target, word, len(receiving.buffer) + waiting,
                    receiving.failures, now - receiving.failing_since if receiving.failing_since is not None else 0.0,
                    receiving.last_error, receiving.last_error_at, 0.0 if state.is_retired else paused, held_back,
                    groups.rows() if groups is not None else (), waiting)
