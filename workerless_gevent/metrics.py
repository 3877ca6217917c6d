"""The one in-memory metrics registry: counters, gauges and distributions, per queue and overall."""

from __future__ import annotations

import math
from collections import Counter, defaultdict
from dataclasses import dataclass, field

COUNTERS = ("Received", "Succeeded", "Failed", "Expired", "DeadLettered", "Throttled", "EmptyReceives",
            "SqsRequests", "StaleReceipts")
DISTRIBUTIONS = ("DeliveryTime", "QueueTime")  # milliseconds


@dataclass
class Window:
    """What happened since the last flush; merged back in when a flush fails."""

    counters: Counter[tuple[str, str]] = field(default_factory=Counter)
    distributions: dict[tuple[str, str], Counter[float]] = field(default_factory=lambda: defaultdict(Counter))

    def merge(self, other: Window) -> None:
        self.counters.update(other.counters)
        for key, values in other.distributions.items():
            self.distributions[key].update(values)

    def size(self) -> int:
        return len(self.counters) + sum(len(values) for values in self.distributions.values())


class Registry:
    """Fed by the daemon; read by the CloudWatch flusher, the status server and the stop summary."""

    def __init__(self) -> None:
        self.window = Window()
        self.totals: Counter[tuple[str, str]] = Counter()
        self.gauges: dict[tuple[str, str], float] = {}
        self.failure_types: dict[str, tuple[int, str]] = {}

    def count(self, queue: str, name: str, amount: int = 1) -> None:
        self.window.counters[(name, queue)] += amount
        self.totals[(name, queue)] += amount

    def observe(self, queue: str, name: str, milliseconds: float) -> None:
        if math.isfinite(milliseconds):
            # Rounded so CloudWatch's Values/Counts (at most 150 distinct values per datum) stay compact.
            self.window.distributions[(name, queue)][round_significant(milliseconds)] += 1

    def set_gauge(self, queue: str, name: str, value: float) -> None:
        self.gauges[(name, queue)] = value

    def record_failure(self, error_type: str, error: str) -> None:
        count, _ = self.failure_types.get(error_type, (0, ""))
        self.failure_types[error_type] = (count + 1, error)

    def total(self, name: str, queue: str | None = None) -> int:
        if queue is not None:
            return int(self.totals[(name, queue)])
        return int(sum(value for (counter, _), value in self.totals.items() if counter == name))

    def take_window(self) -> Window:
        window, self.window = self.window, Window()
        return window


def round_significant(value: float, digits: int = 2) -> float:
    if value <= 0:
        return 0.0
    return round(value, -int(math.floor(math.log10(value))) + digits - 1)
