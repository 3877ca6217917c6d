"""A standard queue's message groups (a fair queue's tenants): each group's deliveries in flight, and, under
`max_concurrency_per_group`, the messages that wait in the daemon for their group's turn.

On a standard queue a `MessageGroupId` orders and serialises nothing (FIFO's groups are the poller's
`busy_groups`): a group's messages go in parallel like any others, up to the cap. A message over it is set
aside, not released: it stays leased (the heartbeat keeps it invisible, as any buffered message), so no
receive is spent on it, and the queue keeps receiving past it for the other tenants, within
MAX_WAITING_MESSAGES and MAX_WAITING_BYTES."""

from __future__ import annotations

import heapq
from collections import deque
from dataclasses import dataclass

from ..message import Message

# Per queue, what may wait for its group's cap before the queue receives no more: each one is a message in
# memory and one entry of a ChangeMessageVisibilityBatch every visibility timeout less 5 s while it waits
# (10,000 with a 30 s timeout: 40 calls a second), and far under SQS's 120,000 in flight per queue.
MAX_WAITING_MESSAGES = 10_000
MAX_WAITING_BYTES = 64 * 2**20
TOP_GROUPS = 10  # groups the status page shows per queue: tenants are unbounded


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
        self.waiting_bytes = 0

    def is_full(self) -> bool:
        """So many messages wait for their groups that the queue should receive no more until some start."""
        return self.waiting_count >= MAX_WAITING_MESSAGES or self.waiting_bytes >= MAX_WAITING_BYTES

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
            waiting = self.waiting.get(group)
            if waiting:
                message = waiting.popleft()
                if not waiting:
                    del self.waiting[group]
                self.waiting_count -= 1
                self.waiting_bytes -= len(message.body)
                buffer.appendleft(message)

    def take_waiting(self) -> list[Message]:
        """Every waiting message, for the caller to release (a stop, a reload that retires the queue)."""
        messages = [message for waiting in self.waiting.values() for message in waiting]
        self.waiting.clear()
        self.waiting_count = self.waiting_bytes = 0
        return messages

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
        self.waiting_bytes += len(message.body)
