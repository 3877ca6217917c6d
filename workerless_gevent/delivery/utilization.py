"""Utilization, the scaling signal: busy delivery slots over `concurrency`, averaged over time.

Slots report each change of their busy count (twice per delivery, so it costs a few operations): the
busy slot-seconds since the start are summed as they pass. A window of buckets, each a sixtieth of the
window (the metrics interval), keeps one mark per bucket in which the count changed: the sum at the
bucket's start and the count then. So a read at any moment, by any number of readers, is the average
over the last window's whole buckets, without keeping one entry per delivery."""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable

BUCKETS = 60


class Utilization:
    """Busy slot-seconds / (concurrency x seconds) over the last `window_seconds`, 0 to 1."""

    def __init__(self, concurrency: int, window_seconds: float, clock: Callable[[], float] = time.monotonic) -> None:
        self.concurrency = concurrency
        self.window_seconds = window_seconds
        self.bucket_seconds = window_seconds / BUCKETS
        self.clock = clock
        self.started_at = clock()
        self.busy = 0
        self.changed_at = self.started_at
        self.busy_seconds = 0.0  # busy slot-seconds from the start to `changed_at`
        # (bucket index, busy slot-seconds from the start to the bucket's start, busy count then), oldest
        # first: one per bucket in which the count changed, so between two marks it changed only inside the
        # earlier one's bucket, and not at all from the end of that bucket to the start of the later one.
        self.buckets: deque[tuple[int, float, int]] = deque()
        self.marked_until = self.started_at  # end of the newest mark's bucket: a change before it needs no mark

    def set_busy(self, busy: int) -> None:
        """The slots' busy count changed (work taken, or finished): the time before it counts at the old one."""
        now = self.clock()
        if now >= self.marked_until:
            self._mark(now)
        self.busy_seconds += self.busy * (now - self.changed_at)  # the clock is monotonic
        self.changed_at = now
        self.busy = busy

    def average(self) -> float:
        """The time-averaged utilization over the last window (since the start, while younger than that)."""
        now = self.clock()
        oldest = self.bucket_index(now) - BUCKETS + 1
        since = max(self.started_at, self.started_at + oldest * self.bucket_seconds)
        seconds = now - since
        if seconds <= 0:
            return min(1.0, self.busy / self.concurrency)
        busy_seconds = self.busy_seconds_at(now) - self.busy_seconds_at(since)
        return max(0.0, min(1.0, busy_seconds / (self.concurrency * seconds)))

    def busy_seconds_at(self, moment: float) -> float:
        """Busy slot-seconds from the start to `moment`: now, the start, or a bucket's start in the window."""
        if moment >= self.changed_at:
            return self.busy_seconds + self.busy * (moment - self.changed_at)  # no change since
        for index, at_start, busy in self.buckets:  # the first bucket from `moment` on in which it changed
            start = self.started_at + index * self.bucket_seconds
            if start >= moment:
                return at_start - busy * (start - moment)  # the count did not change in between
        return 0.0  # `moment` is the start

    def _mark(self, now: float) -> None:
        index = self.bucket_index(now)
        if self.started_at + (index + 1) * self.bucket_seconds <= now:  # float rounding on a bucket's edge
            index += 1
        start = self.started_at + index * self.bucket_seconds
        at_start = self.busy_seconds + self.busy * max(0.0, start - self.changed_at)
        self.buckets.append((index, at_start, self.busy))
        self.marked_until = start + self.bucket_seconds
        while len(self.buckets) > BUCKETS + 1:
            self.buckets.popleft()

    def bucket_index(self, moment: float) -> int:
        return int((moment - self.started_at) // self.bucket_seconds)
