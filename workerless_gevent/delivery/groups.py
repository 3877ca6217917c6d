"""A standard queue's message groups (a fair queue's tenants): each group's deliveries in flight, and, under
`max_concurrency_per_group`, the messages that wait in the daemon for their group's turn.

On a standard queue a `MessageGroupId` orders and serialises nothing (FIFO's groups are the poller's
`busy_groups`): a group's messages go in parallel like any others, up to the cap. A message over it is set
aside, not released: it stays leased (the heartbeat keeps it invisible, as any buffered message), so no
receive is spent on it, and the queue keeps receiving past it for the other tenants, within
MAX_WAITING_MESSAGES and MAX_WAITING_CHARACTERS. One that has waited close to SQS's 12-hour receipt limit, past
which its visibility cannot be extended, is handed back to be released (`take_overdue`)."""

from __future__ import annotations

import heapq
import time
from collections import deque
from dataclasses import dataclass

from ..message import Message
from ..rules import receipt_seconds_left

# Per queue, what may wait for its group's cap before the queue receives no more: each one is a message in
# memory and one entry of a ChangeMessageVisibilityBatch every visibility timeout less 5 s while it waits
# (10,000 with a 30 s timeout: 40 calls a second), and far under SQS's 120,000 in flight per queue.
MAX_WAITING_MESSAGES = 10_000
MAX_WAITING_CHARACTERS = 64 * 2**20  # of their bodies
TOP_GROUPS = 10  # groups the status page shows per queue: tenants are unbounded
OVERDUE_MARGIN_SECONDS = 300.0  # a waiting message is released this long before SQS's receipt limit
OVERDUE_CHECK_SECONDS = 60.0


@dataclass(frozen=True, slots=True)
class GroupRow:
    """One group as the status page shows it."""
    group: str
    in_flight: int  # deliveries holding some of its messages
    waiting: int  # messages waiting for its cap


class Groups:
    """One standard queue's groups; the poller alone uses it (`take`, `finish`, `take_waiting`)."""

    def __init__(self, max_concurrency_per_group: int | None) -> None:
        self.cap = max_concurrency_per_group
        self.in_flight: dict[str, int] = {}
        self.waiting: dict[str, deque[Message]] = {}
        self.waiting_count = 0
        self.waiting_characters = 0
        self.overdue_check_at = 0.0  # time.monotonic() of the next look for overdue waiting messages

    def is_full(self) -> bool:
        """So many messages wait for their groups that the queue should receive no more until some start."""
        return self.waiting_count >= MAX_WAITING_MESSAGES or self.waiting_characters >= MAX_WAITING_CHARACTERS

    def take(self, buffer: deque[Message], take_size: int) -> tuple[list[Message], tuple[str, ...], int]:
        """Up to `take_size` messages from the buffer's front, in order, for one delivery: its messages, the
        groups it counts once each, and how many messages it set aside because their group is at its cap."""
        taken: list[Message] = []
        counted: dict[str, None] = {}  # in order, and a lookup that stays cheap in a batch of thousands
        set_aside = 0
        cap = self.cap
        in_flight = self.in_flight
        while buffer and len(taken) < take_size:
            message = buffer.popleft()
            group = message.group_id
            if group is not None and group not in counted:
                if cap is not None and in_flight.get(group, 0) >= cap:
                    self._set_aside(group, message)
                    set_aside += 1
                    continue
                counted[group] = None
                in_flight[group] = in_flight.get(group, 0) + 1
                if group in self.waiting:  # its older waiting messages go in the same delivery, before newer ones
                    taken.append(message)
                    taken.extend(self._take_waiting(group, take_size - len(taken)))
                    continue
            taken.append(message)
        return taken, tuple(counted), set_aside

    def finish(self, groups: tuple[str, ...], buffer: deque[Message]) -> None:
        """A delivery that counted `groups` ended: each has room for one more, which its oldest waiting
        message takes (back at the buffer's front, ahead of what was received after it)."""
        for group in groups:
            count = self.in_flight.get(group, 0) - 1
            if count > 0:
                self.in_flight[group] = count
            else:
                self.in_flight.pop(group, None)
            if group in self.waiting:
                buffer.extendleft(self._take_waiting(group, 1))

    def take_waiting(self) -> list[Message]:
        """Every waiting message, for the caller to release (a stop, a reload that retires the queue)."""
        messages = [message for waiting in self.waiting.values() for message in waiting]
        self.waiting.clear()
        self.waiting_count = self.waiting_characters = 0
        return messages

    def take_overdue(self) -> list[Message]:
        """At most once a minute: the waiting messages close to SQS's receipt limit, for the caller to release
        (received again, they get a new 12 hours); each group's oldest wait at its front."""
        if not self.waiting or time.monotonic() < self.overdue_check_at:
            return []
        self.overdue_check_at = time.monotonic() + OVERDUE_CHECK_SECONDS
        now = time.time()
        overdue: list[Message] = []
        for group, waiting in list(self.waiting.items()):
            while waiting and receipt_seconds_left(waiting[0].received_at, now) < OVERDUE_MARGIN_SECONDS:
                overdue.extend(self._take_waiting(group, 1))
        return overdue

    def _take_waiting(self, group: str, most: int) -> list[Message]:
        waiting = self.waiting[group]
        taken = [waiting.popleft() for _ in range(min(most, len(waiting)))]
        if not waiting:
            del self.waiting[group]
        self.waiting_count -= len(taken)
        self.waiting_characters -= sum(len(message.body) for message in taken)
        return taken

    def rows(self) -> tuple[GroupRow, ...]:
        """The TOP_GROUPS groups with the most deliveries in flight and messages waiting."""
        names = set(self.in_flight) | set(self.waiting)
        top = heapq.nlargest(TOP_GROUPS, names, key=lambda name: (self.in_flight.get(name, 0) + self._waiting(name),
                                                                  name))
        return tuple(GroupRow(name, self.in_flight.get(name, 0), self._waiting(name)) for name in top)

    def _waiting(self, group: str) -> int:
        waiting = self.waiting.get(group)
        return len(waiting) if waiting else 0

    def _set_aside(self, group: str, message: Message) -> None:
        self.waiting.setdefault(group, deque()).append(message)
        self.waiting_count += 1
        self.waiting_characters += len(message.body)
