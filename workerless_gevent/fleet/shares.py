"""What a member reads from a limit's item and decides from it, without I/O: who is alive, the max-min
fair split of the limit among the members that want some, and how much this member may take now.

A member is alive while its `counter` keeps changing: an observer notes, on its own monotonic clock, when
it first saw each counter value, and counts the member dead once the value has stood for a whole lease.
No member reads another's clock (the Kinesis Client Library's rule), so skewed clocks cannot free a
share early: the holder stops using a share `margin` seconds before its own lease ends, and its last
renewal happened before any observer first saw its counter.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Member:
    """One member's entry in a limit's item."""
    share: float  # what it may use: the sum over the members never exceeds the limit
    want: float  # what it could use now
    counter: int  # +1 at every write of its own: how others tell it is alive
    in_flight: float = 0.0  # deliveries it had running at its last write (shown on the status page)
    host: str = ""


@dataclass(frozen=True, slots=True)
class View:
    """A limit's item as one request returned it."""
    version: int  # +1 at every write that raises a share or frees a dead member's
    members: Mapping[str, Member]
    exists: bool = True


EMPTY = View(0, {}, exists=False)


class Liveness:
    """When this member first saw each other member's counter, on its own monotonic clock."""

    def __init__(self, lease_seconds: float) -> None:
        self.lease_seconds = lease_seconds
        self.seen: dict[str, tuple[int, float]] = {}

    def observe(self, view: View, now: float) -> None:
        """`now` is when the answer arrived: never before the write it shows."""
        for member_id, member in view.members.items():
            known = self.seen.get(member_id)
            if known is None or known[0] != member.counter:
                self.seen[member_id] = (member.counter, now)
        for member_id in set(self.seen) - set(view.members):
            del self.seen[member_id]

    def dead(self, view: View, now: float, me: str) -> dict[str, int]:
        """The members whose counter has not moved for a lease, with that counter (the write's condition)."""
        return {member_id: counter for member_id, (counter, since) in self.seen.items()
                if member_id != me and member_id in view.members and now - since >= self.lease_seconds}


def fair_split(wants: Mapping[str, float], limit: float, whole: bool) -> dict[str, float]:
    """Max-min fair: every member gets its want or an equal part of what is left, whichever is smaller.
    Whole shares (a cap) hand the remainder out one by one in member order, so every member computes the same."""
    shares: dict[str, float] = {}
    left = float(limit)
    pending = sorted(wants, key=lambda member_id: (wants[member_id], member_id))
    while pending:
        equal = left / len(pending)
        if whole:
            equal = math.floor(equal)
        member_id = pending[0]
        if wants[member_id] <= equal:
            shares[member_id] = wants[member_id]
            left -= wants[member_id]
            pending.pop(0)
            continue
        for other in pending:
            shares[other] = equal
        left -= equal * len(pending)
        if whole:
            for other in sorted(pending)[:int(round(left))]:
                shares[other] += 1
        break
    return shares


def others_share(view: View, me: str, dead: Mapping[str, int]) -> float:
    return sum(member.share for member_id, member in view.members.items() if member_id != me and member_id not in dead)


def fair_share(view: View, me: str, want: float, limit: float, dead: Mapping[str, int], whole: bool) -> float:
    """This member's part of the fair split among the live members, counting its own want as it is now."""
    wants = {member_id: member.want for member_id, member in view.members.items()
             if member_id != me and member_id not in dead}
    wants[me] = want
    return fair_split(wants, limit, whole)[me]


def grant(view: View, me: str, fair: float, limit: float, dead: Mapping[str, int]) -> float:
    """How much this member may hold after a write conditioned on this view: its fair part, within what the
    live others leave of the limit (members above their part give it back at their own renewals)."""
    return max(0.0, min(fair, limit - others_share(view, me, dead)))
