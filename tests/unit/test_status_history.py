"""The status page's 15-minute history: bounded, fed by the registry, drawn as inline SVG."""

from __future__ import annotations

import random
import re
import tracemalloc

from workerless_gevent.metrics import Registry
from workerless_gevent.observability.charts import nice_ceiling, render_charts
from workerless_gevent.observability.history import MAX_LATENCIES, MAX_SAMPLES, SAMPLE_SECONDS, History, percentile

QUEUES = [f"queue-{index:02d}-production" for index in range(5)]
MEMORY_BOUND_BYTES = 200_000  # README: "about 100 KB with a few queues"


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def feed(registry: Registry, history: History, clock: Clock, rng: random.Random, deliveries: int) -> None:
    """One sample's worth: deliveries (a tenth failed) with their times, then the sample."""
    for index in range(deliveries):
        queue = QUEUES[index % len(QUEUES)]
        registry.count(queue, "Failed" if index % 10 == 0 else "Succeeded")
        registry.observe(queue, "DeliveryTime", rng.uniform(5, 500))
    clock.now += SAMPLE_SECONDS
    history.sample()


def build(clock: Clock) -> tuple[Registry, History]:
    registry = Registry()
    backlog = {queue: 100.0 + index for index, queue in enumerate(QUEUES)}
    registry.track_gauge("Backlog", lambda: backlog)
    registry.track_gauge("InFlight", lambda: {queue: 2.0 for queue in QUEUES})
    return registry, History(registry, lambda: 50, random.Random(1), clock=clock, wall=clock)


def test_a_sample_has_the_rates_percentiles_in_flight_and_backlog_of_its_interval() -> None:
    clock = Clock()
    registry, history = build(clock)
    history.sample()
    assert not history.samples  # not due yet
    feed(registry, history, clock, random.Random(2), 40)
    series = history.document()
    assert series["succeeded_per_second"] == [round(36 / SAMPLE_SECONDS, 2)]
    assert series["failed_per_second"] == [round(4 / SAMPLE_SECONDS, 2)]
    assert 5 <= series["latency_p50_ms"][0] <= series["latency_p95_ms"][0] <= 500
    assert (series["in_flight"], series["in_flight_limit"]) == ([10], [50])
    assert series["backlog"][QUEUES[1]] == [101]
    feed(registry, history, clock, random.Random(3), 0)
    assert history.document()["latency_p50_ms"][-1] is None  # no delivery ended: a gap, not a zero


def test_the_ring_keeps_15_minutes_within_the_stated_memory() -> None:
    clock = Clock()
    registry, history = build(clock)
    rng = random.Random(4)
    tracemalloc.start()
    before = tracemalloc.take_snapshot()
    for _ in range(MAX_SAMPLES + 50):
        feed(registry, history, clock, rng, 30)
    for _ in range(MAX_LATENCIES * 2):  # and a full latency reservoir waiting for the next sample
        registry.observe(QUEUES[0], "DeliveryTime", rng.uniform(1, 100))
    grown = sum(stat.size_diff for stat in tracemalloc.take_snapshot().compare_to(before, "filename")
                if "history.py" in stat.traceback[0].filename)
    tracemalloc.stop()
    assert len(history.samples) == MAX_SAMPLES and len(history.latencies) == MAX_LATENCIES
    print(f"history with {len(QUEUES)} queues, {MAX_SAMPLES} samples: {grown} bytes")
    assert 0 < grown < MEMORY_BOUND_BYTES


def test_the_charts_are_inline_svg_with_a_line_per_series() -> None:
    clock = Clock()
    registry, history = build(clock)
    for deliveries in (10, 20, 0, 30):
        feed(registry, history, clock, random.Random(deliveries), deliveries)
    html = render_charts(history.document())
    assert [name for name in re.findall(r'<figure id="chart-([\w-]+)"', html)] == [
        "deliveries", "latency", "in-flight", "backlog"]
    assert html.count("<svg") == 4 and "http" not in html.replace('xmlns="http://www.w3.org/2000/svg"', "")
    drawn = re.findall(r'data-series="([^"]+)"', html)
    assert {"succeeded", "failed", "p50", "p95", "in flight", "limit", *QUEUES} <= set(drawn)
    assert drawn.count("p50") == 2  # the sample without deliveries breaks the latency line in two
    assert "no samples yet" in render_charts({"times": []})


def test_scales_and_percentiles() -> None:
    assert [nice_ceiling(v) for v in (0, 0.3, 1, 3, 7, 12, 99, 101, 4500)] == [1, 0.5, 1, 5, 10, 20, 100, 200, 5000]
    assert percentile([], 0.5) is None
    assert percentile([float(v) for v in range(1, 101)], 0.95) == 95.0
    assert percentile([7.0], 0.5) == 7.0
