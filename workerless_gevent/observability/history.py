"""The last 15 minutes the status page charts: one sample every few seconds in a bounded ring buffer
(deliveries per second succeeded and failed, delivery latency p50 and p95, in flight against the limit,
backlog per queue), drawn from the metrics registry. About 120 KB with five queues, the latency reservoir
full (tests/unit/test_status_history.py measures it)."""

from __future__ import annotations

import random
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ..metrics import Registry

SAMPLE_SECONDS = 4.0
WINDOW_SECONDS = 900.0
MAX_SAMPLES = int(WINDOW_SECONDS / SAMPLE_SECONDS) + 1  # the ring: 226 samples
MAX_LATENCIES = 1024  # delivery times kept per sample (a uniform reservoir beyond that)
EARLY_SECONDS = 0.5  # a sampling tick this close to due takes the sample (the caller ticks every 2 s)


@dataclass(frozen=True, slots=True)
class Sample:
    at: float  # time.time() at the end of the sample
    succeeded_per_second: float
    failed_per_second: float
    latency_p50_ms: float | None  # None: no delivery ended within the sample
    latency_p95_ms: float | None
    in_flight: int
    in_flight_limit: int
    backlog: tuple[tuple[str, int], ...]  # (queue, visible + in flight) as last read from SQS


class History:
    """Fed by the registry's delivery times and sampled by the status server's watch loop."""

    def __init__(self, registry: Registry, limit: Callable[[], int], rng: random.Random | None = None,
                 clock: Callable[[], float] = time.monotonic, wall: Callable[[], float] = time.time) -> None:
        self.registry, self.limit, self.clock, self.wall = registry, limit, clock, wall
        self.rng = rng or random.Random(0)
        self.samples: deque[Sample] = deque(maxlen=MAX_SAMPLES)
        self.latencies: list[float] = []
        self.latencies_seen = 0
        self.since = clock()
        self.totals = self.delivered()
        registry.observers.append(self.observe)

    def observe(self, queue: str, name: str, milliseconds: float) -> None:
        if name != "DeliveryTime" or not queue:
            return
        self.latencies_seen += 1
        if len(self.latencies) < MAX_LATENCIES:
            self.latencies.append(milliseconds)
        elif (index := self.rng.randrange(self.latencies_seen)) < MAX_LATENCIES:
            self.latencies[index] = milliseconds

    def delivered(self) -> tuple[int, int]:
        return self.registry.total("Succeeded"), self.registry.total("Failed")

    def sample(self) -> None:
        """One sample if one is due; the rates are over the time since the previous one."""
        now = self.clock()
        seconds = now - self.since
        if seconds < SAMPLE_SECONDS - EARLY_SECONDS:
            return
        succeeded, failed = totals = self.delivered()
        latencies = sorted(self.latencies)
        gauges = self.registry.read_gauges()
        in_flight = sum(value for (name, queue), value in gauges.items() if name == "InFlight" and queue)
        backlog = tuple((queue, int(value)) for (name, queue), value in gauges.items() if name == "Backlog" and queue)
        self.samples.append(Sample(
            at=self.wall(), succeeded_per_second=(succeeded - self.totals[0]) / seconds,
            failed_per_second=(failed - self.totals[1]) / seconds, latency_p50_ms=percentile(latencies, 0.5),
            latency_p95_ms=percentile(latencies, 0.95), in_flight=int(in_flight), in_flight_limit=self.limit(),
            backlog=backlog))
        self.since, self.totals = now, totals
        self.latencies, self.latencies_seen = [], 0

    def document(self) -> dict[str, Any]:
        """The series as columns, oldest first, for /status and the charts; backlog has a column per queue."""
        samples = list(self.samples)
        queues = list(dict.fromkeys(queue for sample in samples for queue, _ in sample.backlog))
        backlog = {queue: [dict(sample.backlog).get(queue) for sample in samples] for queue in queues}
        return {
            "sample_seconds": SAMPLE_SECONDS,
            "window_seconds": WINDOW_SECONDS,
            "times": [round(sample.at, 1) for sample in samples],
            "succeeded_per_second": [round(sample.succeeded_per_second, 2) for sample in samples],
            "failed_per_second": [round(sample.failed_per_second, 2) for sample in samples],
            "latency_p50_ms": [rounded(sample.latency_p50_ms) for sample in samples],
            "latency_p95_ms": [rounded(sample.latency_p95_ms) for sample in samples],
            "in_flight": [sample.in_flight for sample in samples],
            "in_flight_limit": [sample.in_flight_limit for sample in samples],
            "backlog": backlog,
        }


def percentile(ordered: list[float], fraction: float) -> float | None:
    """The nearest-rank percentile of sorted values; None for none."""
    if not ordered:
        return None
    return ordered[min(len(ordered) - 1, max(0, int(fraction * len(ordered) + 0.5) - 1))]


def rounded(value: float | None) -> float | None:
    return None if value is None else round(value, 1)
