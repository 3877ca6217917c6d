"""What the poller asks of a fleet limit, locally and without I/O: may a delivery start now? The answer
comes from the share this member's lease loop (`lease.py`) last confirmed, and only while that lease is
valid on this member's clock. Meanwhile the gate notes the demand the loop reports at its next write."""

from __future__ import annotations

import math
import time
from collections.abc import Callable

import gevent.event

from ..delivery.flow import Clock, TokenBucket


class FleetGate:
    """One fleet-wide limit as this member sees it: a cap (whole deliveries in flight) or a rate (per second)."""

    def __init__(self, limit_id: str, kind: str, limit: float, local_most: float, wake: Callable[[], None],
                 clock: Clock = time.monotonic) -> None:
        self.limit_id = limit_id  # e.g. "queue/payments/concurrency", "target/billing/rate"
        self.kind = kind  # "concurrency" or "rate"
        self.limit = limit
        self.local_most = local_most  # the most this member could use (its own caps), what it asks for when busy
        self.wake = wake  # the poller's: a share arrived
        self.clock = clock
        self.allowance = 0.0  # the share confirmed by the last write, or less while giving some back
        self.valid_until = -math.inf
        self.bucket = TokenBucket(1.0, clock) if kind == "rate" else None
        self.in_flight = 0
        self.peak = 0  # most in flight since the loop last read the demand
        self.starts = 0  # deliveries started since then
        self.is_hungry = False  # work waited for this limit since then
        self.waited = False  # work waited since the last start (FleetWaits)
        self.waits = 0
        self.failing = ""  # the lease loop's last error while its writes fail; "" once one lands
        self.demand = gevent.event.Event()  # set when work waits and the loop might do something about it
        # Whether a queue under this limit has messages or may have (set by the engine): the poller sleeps while
        # every queue is held back, so the loop asks this rather than waiting for the poller to ask the gate.
        self.has_work: Callable[[], bool] = lambda: False

    def usable(self) -> float:
        """The share, while its lease is valid on this clock; 0 after."""
        return self.allowance if self.clock() < self.valid_until else 0.0

    def wait_seconds(self, has_work: bool) -> float:
        """0 when a delivery may start under this limit now; infinity while at the share (a finish or a new
        share wakes the poller). `has_work`: the queue asking has messages or may have (a waiting member asks)."""
        usable = self.usable()
        if self.bucket is None:
            seconds = 0.0 if self.in_flight < usable else math.inf
        elif usable <= 0:
            self.bucket.tokens, self.bucket.updated = 0.0, self.clock()  # a lapsed lease leaves no tokens behind
            seconds = math.inf
        else:
            seconds = self.bucket.wait_seconds()
        if seconds > 0 and has_work:
            self.waited = True
            if not self.is_hungry:
                self.is_hungry = True
                self.demand.set()
        return seconds

    def room(self) -> int:
        """How many deliveries could start now under this limit."""
        if self.bucket is None:
            return max(0, int(self.usable()) - self.in_flight)
        return max(0, int(self.bucket.tokens)) if self.usable() > 0 else 0

    def start(self) -> bool:
        """A delivery starts under this limit; True when it had to wait for the fleet's share."""
        self.in_flight += 1
        self.starts += 1
        self.peak = max(self.peak, self.in_flight)
        if self.bucket is not None:
            self.bucket.take()
        waited, self.waited = self.waited, False
        if waited:
            self.waits += 1
        return waited

    def finish(self) -> None:
        self.in_flight = max(0, self.in_flight - 1)  # the poller's finish wakes the slots

    def wants_more(self) -> bool:
        """Work waited for this limit since the last write, or waits now."""
        if self.is_hungry:
            return True
        usable = self.usable()
        held_back = self.in_flight >= usable if self.bucket is None else usable <= 0 or self.bucket.tokens < 1
        return held_back and self.has_work()

    def take_demand(self, seconds: float) -> float:
        """What this member asks for at a write, from what happened since the last one (`seconds` ago); resets."""
        hungry = self.wants_more()
        if self.bucket is None:
            want = self.local_most if hungry else float(max(self.peak, self.in_flight))
        else:
            measured = self.starts / seconds if seconds > 0 else 0.0
            want = self.local_most if hungry else (min(self.local_most, measured * 1.25) if self.starts else 0.0)
        self.is_hungry, self.peak, self.starts = False, self.in_flight, 0
        self.demand.clear()
        return min(want, self.limit)

    def confirm(self, share: float, valid_until: float) -> None:
        """The lease loop's last write landed: `share` holds until `valid_until` on this clock."""
        grew = share > self.usable()
        self.allowance, self.valid_until = share, valid_until
        if self.bucket is not None and share > 0:
            self.bucket.set_rate(share, max(1.0, share))
        if grew:
            self.wake()

    def lapsed_reason(self) -> str:
        """Why nothing starts under this limit when it is not the others' shares: the lease lapsed."""
        if self.failing and self.usable() <= 0:
            return f"fleet limit {self.limit_id}: lease lapsed, DynamoDB failing ({self.failing})"
        return ""

    def drop(self) -> None:
        """The share is gone (left the fleet's item, or found removed): start nothing more under it."""
        self.allowance, self.valid_until = 0.0, -math.inf
