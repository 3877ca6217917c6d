"""Flow control: how many deliveries a target may have in flight and how fast they may start.

A target's in-flight limit starts at its `max_concurrency` (else the daemon's `concurrency`). An
overload (429 or 503 without Retry-After, a Lambda throttle) halves it, never below 1, once per
round: deliveries already on their way when it shrank cannot tell us more. Each window of
successes as large as the limit adds one back, up to where it started (AIMD, as TCP does). A
`rate_limit` is a token bucket holding `rate_limit` tokens at most (the burst); each delivery
takes one. A Lambda batch is one delivery.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from typing import Protocol

from ..config.model import Config, TargetConfig

Clock = Callable[[], float]


class SharedLimit(Protocol):
    """A limit shared with other daemons (`fleet.gate.FleetGate`), asked like a target's flow."""

    limit_id: str

    def wait_seconds(self, has_work: bool) -> float: ...

    def room(self) -> int: ...

    def start(self) -> bool: ...

    def finish(self) -> None: ...

    def lapsed_reason(self) -> str: ...


class TokenBucket:
    def __init__(self, rate: float, clock: Clock = time.monotonic) -> None:
        self.rate = rate
        self.burst = max(1.0, rate)
        self.tokens = self.burst
        self.clock = clock
        self.updated = clock()

    def wait_seconds(self) -> float:
        """0 when a token is there now, else how long until the next one."""
        self._refill()
        return 0.0 if self.tokens >= 1 else (1 - self.tokens) / self.rate

    def take(self) -> None:
        self._refill()
        self.tokens -= 1

    def set_rate(self, rate: float, burst: float) -> None:
        """A new rate from now on; tokens beyond the new burst are gone."""
        self._refill()
        self.rate, self.burst = rate, burst
        self.tokens = min(self.tokens, burst)

    def _refill(self) -> None:
        now = self.clock()
        self.tokens = min(self.burst, self.tokens + (now - self.updated) * self.rate)
        self.updated = now


class TargetFlow:
    def __init__(self, name: str, ceiling: int, rate: float | None = None, adaptive: bool = True,
                 clock: Clock = time.monotonic) -> None:
        self.name = name
        self.ceiling = ceiling
        self.limit = ceiling
        self.adaptive = adaptive
        self.bucket = TokenBucket(rate, clock) if rate else None
        self.clock = clock
        self.in_flight = 0
        self.successes = 0  # toward the next step up
        self.shrunk_at = -math.inf
        self.was_rate_limited = False  # a slot waited for a token since the last start

    def wait_seconds(self) -> float:
        """0 when a delivery may start now; infinity while at the limit (a finish wakes the poller)."""
        if self.in_flight >= self.limit:
            return math.inf
        if self.bucket is None:
            return 0.0
        seconds = self.bucket.wait_seconds()
        self.was_rate_limited = self.was_rate_limited or seconds > 0
        return seconds

    def room(self) -> int:
        return max(0, self.limit - self.in_flight)

    def start(self) -> tuple[float, bool]:
        """A delivery starts: returns its start time, and whether it waited for the rate limit."""
        self.in_flight += 1
        if self.bucket is not None:
            self.bucket.take()
        waited, self.was_rate_limited = self.was_rate_limited, False
        return self.clock(), waited

    def finish(self, started_at: float, overloaded: bool) -> bool:
        """A delivery ended; returns True when this overload shrank the limit. Any other answer, failures
        included, counts toward growing it back: the target took the delivery."""
        in_flight_with_it = self.in_flight
        self.in_flight = max(0, self.in_flight - 1)
        if overloaded and self.adaptive:
            if started_at < self.shrunk_at:
                return False  # it started before the last cut: it reports the old limit's overload
            self.limit = max(1, min(self.limit, in_flight_with_it) // 2)
            self.shrunk_at = self.clock()
            self.successes = 0
            return True
        if self.limit < self.ceiling:
            self.successes += 1
            if self.successes >= self.limit:
                self.limit += 1
                self.successes = 0
        return False


def build_flow(target: TargetConfig, concurrency: int) -> TargetFlow:
    """A target's flow: its limit starts at max_concurrency, never above the daemon's concurrency."""
    return TargetFlow(target.name, min(target.max_concurrency or concurrency, concurrency), target.rate_limit,
                      adaptive=target.overload == "backpressure")


def build_flows(config: Config) -> dict[str, TargetFlow]:
    """One flow per target, shared by the queues that deliver to it."""
    return {name: build_flow(target, config.concurrency) for name, target in config.targets.items()}
