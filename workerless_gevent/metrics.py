"""The one in-memory metrics registry: counters, gauges and distributions, per queue and overall."""

from __future__ import annotations

import bisect
import itertools
import math
import operator
import time
from collections import Counter, defaultdict
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

COUNTERS = ("Received", "Succeeded", "Failed", "Expired", "DeadLettered", "Throttled", "EmptyReceives",
            "SqsRequests", "StaleReceipts", "DeleteFailed", "VisibilityFailed", "RateLimited", "Filtered",
            "NotSnsEnvelope", "BacklogFailed",  # NotSnsEnvelope: bodies of an sns = "unwrap" queue delivered as they were
            # idempotent delivery: copies of a success deleted undelivered, copies left for a claim held elsewhere,
            # messages without their key (delivered as usual), DynamoDB calls that failed after the wire's retries,
            # copies of a success with another payload (validate_payload: failed undelivered)
            "Duplicates", "IdempotencyInProgress", "IdempotencyKeyMissing", "IdempotencyStoreErrors",
            "IdempotencyKeyConflicts",
            "GroupWaits")  # messages that waited for their group's max_concurrency_per_group
OVERALL = ""  # the "queue" of counters that belong to no queue
# InternalErrors: unexpected errors a supervised loop survived; with [tracing], spans dropped from a full buffer
# and span batches the collector did not take
OVERALL_COUNTERS = ("InternalErrors", "SpansDropped", "SpanExportFailures")
GAUGES = ("InFlight", "TargetLimit")
UNSUMMED_GAUGES = ("TargetLimit",)  # per queue only: a sum over queues would mean nothing
# The scaling signals: Utilization (busy slots / concurrency over the interval, 0-1, no queue: the
# OVERALL key) and Backlog (visible + in-flight messages per queue, read from SQS every interval).
SIGNALS = ("Utilization", "Backlog")
GAUGE_UNITS = {"Utilization": "None"}  # CloudWatch units; every other gauge is a Count
# Per fleet-wide limit (keyed by its id, e.g. "queue/payments/concurrency", where the others take a queue name):
# the share this member may use now (a gauge) and the deliveries that waited for the fleet's share (a counter).
FLEET_METRICS = ("FleetShare", "FleetWaits")
DISTRIBUTIONS = ("DeliveryTime", "QueueTime")  # milliseconds
# Prometheus bucket bounds in seconds: deliveries take milliseconds to minutes, waits up to the
# 14-day retention period.
BUCKETS_SECONDS: dict[str, tuple[float, ...]] = {
    "DeliveryTime": (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0, 900.0),
    "QueueTime": (0.01, 0.05, 0.1, 0.5, 1.0, 5.0, 10.0, 30.0, 60.0, 300.0, 900.0, 3600.0, 14400.0, 86400.0,
                  345600.0, 1209600.0),
}

FOLD_AT = 4096  # observations of one distribution and queue kept before they are folded in unasked
TWO_DIGITS = "{:.2g}".format

GaugeReader = Callable[[], Mapping[str, float]]  # queue name -> current value
Observer = Callable[[str, str, float], None]  # (queue, distribution, milliseconds) of each observation
Count = Callable[..., None]  # Registry.count(queue, name, amount=1), as the parts that count are handed it


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


@dataclass
class Histogram:
    """Cumulative since start, for Prometheus; `counts[i]` holds observations in bucket i alone."""

    bounds_seconds: tuple[float, ...]
    counts: list[int] = field(default_factory=list)
    sum_seconds: float = 0.0
    count: int = 0

    def __post_init__(self) -> None:
        self.counts = [0] * (len(self.bounds_seconds) + 1)  # the last one is +Inf

    def cumulative(self) -> list[tuple[float, int]]:
        """(upper bound, observations <= it) pairs ending with +Inf, as Prometheus wants them."""
        running = 0
        pairs = []
        for bound, count in zip((*self.bounds_seconds, math.inf), self.counts):
            running += count
            pairs.append((bound, running))
        return pairs


class Registry:
    """Fed by the daemon; read by the CloudWatch flusher, the status server and the stop summary."""

    def __init__(self) -> None:
        self._window = Window()
        self.totals: Counter[tuple[str, str]] = Counter()
        self.gauge_readers: dict[str, GaugeReader] = {}
        self._histograms: dict[tuple[str, str], Histogram] = {}
        # Observations not yet in the window and the histograms, per (distribution, queue): appended to, twice
        # per message, and folded in whenever either is read (or a list grows long), in a few C-level passes
        # instead of a rounding, a bisect and four updates each.
        self.unfolded: defaultdict[tuple[str, str], list[float]] = defaultdict(list)
        self.failure_types: dict[str, tuple[int, str]] = {}
        # ("queue" or "target", name) -> (time.time(), text) of its latest failed delivery
        self.last_errors: dict[tuple[str, str], tuple[float, str]] = {}
        self.observers: list[Observer] = []  # e.g. the status page's history, for its latency percentiles

    def count(self, queue: str, name: str, amount: int = 1) -> None:
        key = (name, queue)
        self._window.counters[key] += amount
        self.totals[key] += amount

    def observe(self, queue: str, name: str, milliseconds: float) -> None:
        """Twice per message (its queue time and its delivery time): kept for `fold`."""
        if not -math.inf < milliseconds < math.inf:  # NaN or an infinity: not an observation, for anyone
            return
        values = self.unfolded[(name, queue)]
        values.append(milliseconds)
        if len(values) >= FOLD_AT:
            self.fold()
        for observer in self.observers:
            observer(queue, name, milliseconds)

    @property
    def window(self) -> Window:
        self.fold()
        return self._window

    @property
    def histograms(self) -> dict[tuple[str, str], Histogram]:
        self.fold()
        return self._histograms

    def fold(self) -> None:
        """The observations so far into the CloudWatch window (two significant digits, which keeps CloudWatch's
        Values/Counts compact: at most 150 distinct values a datum) and the Prometheus histograms."""
        if not self.unfolded:
            return
        unfolded, self.unfolded = self.unfolded, defaultdict(list)
        for key, values in unfolded.items():
            values.sort()
            distribution = self._window.distributions[key]
            positive = bisect.bisect_right(values, 0.0)  # zero (and, should a clock step, below) counts as 0
            if positive:
                distribution[0.0] += positive
            distribution.update(map(float, map(TWO_DIGITS, itertools.islice(values, positive, None))))
            histogram = self._histograms.get(key)
            if histogram is None:
                bounds = BUCKETS_SECONDS.get(key[0], BUCKETS_SECONDS["DeliveryTime"])
                histogram = self._histograms[key] = Histogram(bounds)
            seconds = list(map(operator.truediv, values, itertools.repeat(1000.0)))  # sorted, as `values` is
            below = 0
            for index, bound in enumerate(histogram.bounds_seconds):  # counts[i]: in (bound[i - 1], bound[i]]
                upto = bisect.bisect_right(seconds, bound, below)
                histogram.counts[index] += upto - below
                below = upto
            histogram.counts[-1] += len(seconds) - below
            histogram.sum_seconds += math.fsum(seconds)
            histogram.count += len(seconds)

    def track_gauge(self, name: str, read: GaugeReader) -> None:
        """A gauge sampled whenever someone reads it, so it can never drift from the truth."""
        self.gauge_readers[name] = read

    def read_gauges(self) -> dict[tuple[str, str], float]:
        values: dict[tuple[str, str], float] = {}
        for name, read in self.gauge_readers.items():
            for queue, value in read().items():
                values[(name, queue)] = float(value)
        return values

    def record_failure(self, error_type: str, error: str, queue: str = "", target: str = "") -> None:
        count, _ = self.failure_types.get(error_type, (0, ""))
        self.failure_types[error_type] = (count + 1, error)
        text = ": ".join(part for part in (error_type, error) if part) or "failure"
        for kind, name in (("queue", queue), ("target", target)):
            if name:
                self.last_errors[(kind, name)] = (time.time(), text)

    def total(self, name: str, queue: str | None = None) -> int:
        if queue is not None:
            return int(self.totals[(name, queue)])
        return int(sum(value for (counter, _), value in self.totals.items() if counter == name))

    def queue_names(self) -> list[str]:
        """Every queue the registry has heard of, in the order it first did."""
        names = dict.fromkeys(queue for name, queue in self.totals if name not in FLEET_METRICS)
        names.update(dict.fromkeys(queue for name, queue in self.read_gauges() if name not in FLEET_METRICS))
        names.pop(OVERALL, None)
        return list(names)

    def take_window(self) -> Window:
        self.fold()
        window, self._window = self._window, Window()
        return window


class RateSummary:
    """The one-line-per-interval log: rates per queue since the previous line."""

    SHOWN = (("Received", "received"), ("Succeeded", "succeeded"), ("Failed", "failed"),
             ("Throttled", "throttled"), ("Expired", "expired"), ("DeadLettered", "dead_lettered"))

    def __init__(self, registry: Registry, clock: Callable[[], float] = time.monotonic) -> None:
        self.registry = registry
        self.clock = clock
        self.since = clock()
        self.previous: Counter[tuple[str, str]] = Counter(registry.totals)
        self.previous_delivery: dict[str, tuple[float, int]] = {}

    def line(self) -> str:
        now = self.clock()
        seconds = max(now - self.since, 1e-9)
        gauges = self.registry.read_gauges()
        parts = []
        for queue in self.registry.queue_names():
            rates = " ".join(
                f"{label}={(self.registry.totals[(name, queue)] - self.previous[(name, queue)]) / seconds:.2f}/s"
                for name, label in self.SHOWN
                if name in ("Received", "Succeeded", "Failed") or self.registry.totals[(name, queue)]
            )
            in_flight = gauges.get(("InFlight", queue), 0.0)
            parts.append(f"queue={queue} {rates} in_flight={in_flight:g} {self._delivery_average(queue)}")
        self.since, self.previous = now, Counter(self.registry.totals)
        return f"rates over {seconds:.1f}s: " + (" | ".join(parts) or "no queues yet")

    def _delivery_average(self, queue: str) -> str:
        histogram = self.registry.histograms.get(("DeliveryTime", queue))
        total, count = (histogram.sum_seconds, histogram.count) if histogram else (0.0, 0)
        before_total, before_count = self.previous_delivery.get(queue, (0.0, 0))
        self.previous_delivery[queue] = (total, count)
        if count == before_count:
            return "delivery_ms_avg=-"
        return f"delivery_ms_avg={(total - before_total) / (count - before_count) * 1000:.1f}"
