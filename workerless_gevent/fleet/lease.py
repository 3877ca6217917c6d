"""One fleet limit's membership: the loop that keeps this member's share in the limit's DynamoDB item.

A member with work waiting joins (its want recorded, a share if one is free); while it has work it writes
about three times per lease, each write renewing its lease and publishing its want; the answer (the whole
item) tells it the others' wants, so it raises its share toward the max-min fair split when the others
leave room, and lowers it when its part shrank, once its own deliveries have dropped below the new part.
A member with nothing in flight and nothing waiting leaves (one write) and then makes no request at all.
If its writes fail, the gate stops starting work when the lease ends on this clock (minus a margin).
"""

from __future__ import annotations

import logging
import math
import random
import time
from collections.abc import Callable

import gevent
import gevent.event

from ..errors import AWS_ERRORS, describe_error
from ..rules import backoff_seconds
from .gate import FleetGate
from .shares import EMPTY, Liveness, Member, View, fair_share, grant
from .table import LimitItem, Written

logger = logging.getLogger(__name__)

TICK_SECONDS = 0.25  # how often the loop looks at the gate between writes (no request unless one is due)
CONFLICT_RETRIES = 3  # writes in a row after a conflict (each conflict answer is the fresh item)


class Lease:
    def __init__(self, gate: FleetGate, item: LimitItem, lease_seconds: float, host: str, rng: random.Random,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.gate = gate
        self.item = item
        self.lease_seconds = lease_seconds
        self.margin_seconds = max(1.0, 0.2 * lease_seconds)  # stop using a share this long before its lease ends
        self.renew_seconds = lease_seconds / 3
        self.host = host
        self.rng = rng
        self.clock = clock
        self.liveness = Liveness(lease_seconds)
        self.view: View = EMPTY  # the item as the last answer showed it
        self.counter: int | None = None  # this member's entry's counter; None while not a member
        self.last_counter = 0  # counters never repeat within this process, across leaves and joins
        self.published = 0.0  # the share in this member's entry
        self.written_at = clock()  # when demand was last taken
        self.failures = 0
        self.last_error = ""
        self.requests = 0
        self.winding_down = gevent.event.Event()  # the daemon is stopping: renew for what runs, never join or grow

    @property
    def is_whole(self) -> bool:
        return self.gate.kind == "concurrency"

    def run(self, stopping: gevent.event.Event) -> None:
        while not stopping.is_set():
            if not self.is_write_due():
                if self.counter is None:  # not a member: no request until work waits for this limit
                    gevent.wait([self.gate.demand, stopping], count=1,
                                timeout=TICK_SECONDS if self.gate.has_work() else None)
                else:
                    stopping.wait(TICK_SECONDS)
                continue
            try:
                self.write()
            except AWS_ERRORS as error:
                self.note_failure(error)
                stopping.wait(backoff_seconds(self.failures, self.rng, self.renew_seconds, base_seconds=0.25,
                                              floor=0.5))

    def is_write_due(self) -> bool:
        now = self.clock()
        if self.counter is None:
            return self.gate.wants_more() and not self.winding_down.is_set()
        since = now - self.written_at
        if since >= self.renew_seconds:
            return True
        return since >= self.renew_seconds / 4 and (self.could_grow() or self.could_give_back())

    def could_grow(self) -> bool:
        """Work waits, and the last answer showed free room toward this member's fair part."""
        if not self.gate.wants_more() or self.published >= self.gate.local_most:
            return False
        me = self.item.member_id
        dead = self.liveness.dead(self.view, self.clock(), me)
        part = fair_share(self.view, me, self.gate.local_most, self.gate.limit, dead, self.is_whole)
        room = grant(self.view, me, part, self.gate.limit, dead)
        return (math.floor(room) if self.is_whole else room) > self.published

    def could_give_back(self) -> bool:
        """A share this member is lowering has drained below its new part, and another member wants more."""
        me = self.item.member_id
        return (self.published > self.gate.allowance >= self.gate.in_flight
                and any(member.want > member.share for member_id, member in self.view.members.items() if member_id != me))

    def write(self) -> None:
        """Publish what this member wants now, and take or give back share; a conflict's answer is the fresh item."""
        now = self.clock()
        want = self.gate.take_demand(now - self.written_at)
        if self.winding_down.is_set():  # what still runs keeps its share until it ends; nothing more is asked
            want = float(self.gate.in_flight) if self.gate.kind == "concurrency" else 0.0
        self.written_at = now
        for _ in range(CONFLICT_RETRIES):
            if self.write_once(want):
                return

    def write_once(self, want: float) -> bool:
        """One conditional write; True when it landed (or nothing needed writing)."""
        sent = self.clock()
        me = self.item.member_id
        if not self.view.exists:
            self.request(self.item.read)
            if not self.view.exists:
                self.requests += 1
                self.item.create(self.gate.limit_id)
                self.view = View(0, {})
        dead = self.liveness.dead(self.view, sent, me)
        if self.counter is not None and want <= 0 and self.gate.in_flight == 0:
            return self.landed(self.request(lambda: self.item.leave(self.counter or 0)), sent, 0.0, 0.0)
        if self.counter is None and want <= 0:
            return True
        part = fair_share(self.view, me, want, self.gate.limit, dead, self.is_whole)
        granted = grant(self.view, me, part, self.gate.limit, dead)
        if self.is_whole:
            granted = math.floor(granted)
        self.last_counter += 1
        if self.counter is None or granted > self.published:
            mine = Member(granted, want, self.last_counter, self.gate.in_flight, self.host)
            written = self.request(lambda: self.item.raise_share(mine, self.counter, self.view.version, dead))
            return self.landed(written, sent, granted, self.part_after(written, want, granted))
        # A lowered cap is published once this member's own deliveries are below it; a lowered rate at once
        # (the bucket already holds no more than the new burst).
        publish = min(self.published, max(part, float(self.gate.in_flight)) if self.is_whole else part)
        mine = Member(publish, want, self.last_counter, self.gate.in_flight, self.host)
        written = self.request(lambda: self.item.renew(mine, self.counter or 0, dead))
        return self.landed(written, sent, publish, self.part_after(written, want, min(part, publish)))

    def part_after(self, written: Written, want: float, allowance: float) -> float:
        """What this member may use after a write: no more than its fair part in the item the write returned,
        which shows members that joined since the item the write was computed from (they get their part sooner)."""
        me = self.item.member_id
        dead = self.liveness.dead(written.view, self.clock(), me)
        return min(allowance, fair_share(written.view, me, want, self.gate.limit, dead, self.is_whole))

    def request(self, call: Callable[[], Written | View]) -> Written:
        self.requests += 1
        answer = call()
        written = answer if isinstance(answer, Written) else Written(True, answer)
        self.view = written.view
        self.liveness.observe(written.view, self.clock())
        self.gate.failing = ""
        if self.failures:
            logger.info("fleet limit %s: DynamoDB answers again after %d failed requests", self.gate.limit_id,
                        self.failures)
            self.failures = 0
        return written

    def landed(self, written: Written, sent: float, published: float, allowance: float) -> bool:
        mine = written.view.members.get(self.item.member_id)
        if written.landed and mine is not None:
            self.counter, self.published = mine.counter, mine.share
            self.gate.confirm(min(allowance, mine.share), sent + self.lease_seconds - self.margin_seconds)
            return True
        if mine is None:  # left, or freed by others after a lapse: nothing is ours
            self.counter, self.published = None, 0.0
            self.gate.drop()
            return written.landed
        # A conflict: someone raised a share, or an earlier write of ours landed unseen. Keep what the item says.
        self.counter, self.published = mine.counter, mine.share
        self.gate.allowance = min(self.gate.allowance, mine.share)
        return False

    def note_failure(self, error: BaseException) -> None:
        self.failures += 1
        self.last_error = self.gate.failing = describe_error(error)
        left = self.gate.valid_until - self.clock()
        if self.failures == 1:
            logger.warning("fleet limit %s: cannot write its share (%s); %s", self.gate.limit_id, self.last_error,
                           f"the lease ends in {left:.1f}s" if left > 0 else "nothing starts under it meanwhile")
        else:
            logger.debug("fleet limit %s: write failed again: %s", self.gate.limit_id, self.last_error)

    def leave(self) -> None:
        """At stop, once deliveries have ended: free this member's share at once instead of after a lease."""
        self.winding_down.set()
        for _ in range(CONFLICT_RETRIES):  # the loop's own renewal may land first: then the counter moved
            if self.counter is None:
                return
            self.landed(self.request(lambda: self.item.leave(self.counter or 0)), self.clock(), 0.0, 0.0)
