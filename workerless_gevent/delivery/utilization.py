"""Utilization, the scaling signal: busy delivery slots over `concurrency`, averaged over time.

Slots report each change of their busy count; busy slot-seconds are integrated into buckets of a
sixtieth of the window, so a read at any moment, by any number of readers, is the average over
the last window (the metrics interval) without keeping one entry per delivery."""

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
        self.buckets: deque[list[float]] = deque()  # [bucket index, busy slot-seconds], oldest first
        self.last_bucket_span = (0.0, 0.0)  # start and end of the newest bucket: most changes fall inside it

    def set_busy(self, busy: int) -> None:
        """The slots' busy count changed (work taken, or finished): the time before it counts at the old one."""
        now = self.clock()
        moment = self.changed_at
        start, end = self.last_bucket_span
        if start <= moment and now <= end and self.buckets:  # twice per delivery: no walk, no index, no call
            if now > moment:
                self.buckets[-1][1] += self.busy * (now - moment)
                self.changed_at = now
        else:
            self.integrate(now)
        self.busy = busy

    def average(self) -> float:
        """The time-averaged utilization over the last window (since the start, while younger than that)."""
        now = self.clock()
        self.integrate(now)
        oldest = self.bucket_index(now) - BUCKETS + 1
        while self.buckets and self.buckets[0][0] < oldest:
            self.buckets.popleft()
        since = max(self.started_at, self.started_at + oldest * self.bucket_seconds)
        seconds = now - since
        if seconds <= 0:
            return min(1.0, self.busy / self.concurrency)
        busy_seconds = sum(seconds_busy for _, seconds_busy in self.buckets)
        return max(0.0, min(1.0, busy_seconds / (self.concurrency * seconds)))

    def integrate(self, now: float) -> None:
        """Spread `busy` x the time since the last change over the buckets that time covers."""
        moment, self.changed_at = self.changed_at, max(now, self.changed_at)
        if self.busy == 0:
            return
        # Only the last window's buckets are ever read: older time is skipped, not walked.
        moment = max(moment, now - self.window_seconds - self.bucket_seconds)
        while moment < now:
            index = self.bucket_index(moment)
            end = self.started_at + (index + 1) * self.bucket_seconds
            if end <= moment:  # float rounding on a bucket's edge
                index, end = index + 1, end + self.bucket_seconds
            end = min(now, end)
            if self.buckets and self.buckets[-1][0] == index:
                self.buckets[-1][1] += self.busy * (end - moment)
            else:
                self.buckets.append([index, self.busy * (end - moment)])
            moment = end
            self.last_bucket_span = (self.started_at + index * self.bucket_seconds,
                                     self.started_at + (index + 1) * self.bucket_seconds)
        while len(self.buckets) > BUCKETS + 1:
            self.buckets.popleft()

    def bucket_index(self, moment: float) -> int:
        return int((moment - self.started_at) // self.bucket_seconds)
