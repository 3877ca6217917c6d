"""The registry and the flusher on their own: histograms, the rate line, NaN/Inf, bounded carry-over."""

from __future__ import annotations

import bisect
import logging
import math
import random
import socket
import uuid
from collections import Counter
from typing import Any

import boto3
import gevent
import gevent.event
import pytest
from botocore.config import Config

from tests.support import MotoServer
from workerless_gevent.observability.cloudwatch import MAX_CARRIED_DATUMS, MetricsFlusher, build_datums, is_valid_namespace
from workerless_gevent.metrics import (BUCKETS_SECONDS, COUNTERS, DISTRIBUTIONS, FOLD_AT, OVERALL_COUNTERS, RateSummary,
                                       Registry)


def test_histograms_are_cumulative_with_le_bounds() -> None:
    registry = Registry()
    for milliseconds in (5.0, 5.1, 1000.0, 10_000_000.0):  # on a bound, just above it, 1 s, past the last bound
        registry.observe("q", "DeliveryTime", milliseconds)
    registry.observe("q", "DeliveryTime", math.nan)
    registry.observe("q", "DeliveryTime", math.inf)
    histogram = registry.histograms[("DeliveryTime", "q")]
    buckets = dict(histogram.cumulative())
    assert list(buckets)[-1] == math.inf and len(buckets) == len(BUCKETS_SECONDS["DeliveryTime"]) + 1
    assert (buckets[0.005], buckets[0.01], buckets[1.0], buckets[900.0], buckets[math.inf]) == (1, 2, 3, 3, 4)
    assert histogram.count == 4 and histogram.sum_seconds == pytest.approx(10_001.0101)
    # The CloudWatch window saw the same four, rounded to two significant digits.
    assert sum(registry.window.distributions[("DeliveryTime", "q")].values()) == 4


def test_folded_observations_match_one_at_a_time_arithmetic() -> None:
    """Observations are kept and folded in when read (or once FOLD_AT of one kind are waiting): the buckets,
    the sum and the window's rounded values are those of adding each one as it came, whatever the reads."""
    rng = random.Random(7)
    registry = Registry()
    buckets: dict[tuple[str, str], list[int]] = {}
    rounded: dict[tuple[str, str], Counter[float]] = {}
    sums: dict[tuple[str, str], float] = {}
    for index in range(3 * FOLD_AT):
        name, queue = rng.choice(DISTRIBUTIONS), rng.choice(("a", "b"))
        milliseconds = rng.choice((rng.expovariate(1 / 50), rng.uniform(0, 1e7), 5.0, 10.0, 0.0, -2.0, math.nan,
                                   math.inf, 1000.0))
        registry.observe(queue, name, milliseconds)
        if index % 1000 == 999:
            assert registry.histograms  # a read part of the way folds what came so far
        if not math.isfinite(milliseconds):
            continue
        key, bounds = (name, queue), BUCKETS_SECONDS[name]
        buckets.setdefault(key, [0] * (len(bounds) + 1))[bisect.bisect_left(bounds, milliseconds / 1000)] += 1
        rounded.setdefault(key, Counter())[float(f"{milliseconds:.2g}") if milliseconds > 0 else 0.0] += 1
        sums[key] = sums.get(key, 0.0) + milliseconds / 1000
    window = registry.take_window()
    assert set(window.distributions) == set(buckets) == set(registry.histograms)
    for key, counts in buckets.items():
        histogram = registry.histograms[key]
        assert (histogram.counts, histogram.count) == (counts, sum(counts)), key
        assert histogram.sum_seconds == pytest.approx(sums[key], rel=1e-9), key
        assert window.distributions[key] == rounded[key], key


def test_gauges_are_read_when_asked_for() -> None:
    registry = Registry()
    in_flight = {"a": 1.0, "b": 0.0}
    registry.track_gauge("InFlight", lambda: in_flight)
    assert registry.read_gauges() == {("InFlight", "a"): 1.0, ("InFlight", "b"): 0.0}
    in_flight["a"] = 3.0
    assert registry.read_gauges()[("InFlight", "a")] == 3.0
    assert registry.queue_names() == ["a", "b"]


def test_rate_summary_is_per_queue_and_per_interval() -> None:
    now = [100.0]
    registry = Registry()
    registry.track_gauge("InFlight", lambda: {"payments": 2.0, "default": 0.0})
    summary = RateSummary(registry, clock=lambda: now[0])
    registry.count("payments", "Received", 20)
    registry.count("payments", "Succeeded", 18)
    registry.count("payments", "Failed", 2)
    registry.count("payments", "DeadLettered", 1)
    for _ in range(18):
        registry.observe("payments", "DeliveryTime", 40.0)
    now[0] += 10
    line = summary.line()
    assert line.startswith("rates over 10.0s: queue=payments received=2.00/s succeeded=1.80/s failed=0.20/s")
    assert "dead_lettered=0.10/s in_flight=2 delivery_ms_avg=40.0 | queue=default received=0.00/s" in line
    assert "throttled" not in line  # shown only once it happened
    now[0] += 5
    assert "queue=payments received=0.00/s succeeded=0.00/s failed=0.00/s dead_lettered=0.00/s in_flight=2 " \
           "delivery_ms_avg=-" in summary.line()


def test_datums_have_queue_and_overall_series_and_no_nan_or_inf() -> None:
    registry = Registry()
    registry.count("a", "Succeeded", 2)
    registry.count("b", "Succeeded", 3)
    registry.observe("a", "QueueTime", 12.0)
    registry.observe("b", "QueueTime", 12.0)
    registry.track_gauge("InFlight", lambda: {"a": math.nan, "b": math.inf, "c": 4.0})
    datums = build_datums(registry.take_window(), registry.read_gauges())
    by_series = {(d["MetricName"], tuple(x["Value"] for x in d.get("Dimensions", []))): d for d in datums}
    assert by_series[("Succeeded", ("a",))]["Value"] == 2 and by_series[("Succeeded", ())]["Value"] == 5
    assert by_series[("Failed", ())]["Value"] == 0  # the overall counters are always sent
    assert ("InFlight", ("a",)) not in by_series and ("InFlight", ("b",)) not in by_series
    assert by_series[("InFlight", ())]["Value"] == 4 and by_series[("InFlight", ("c",))]["Value"] == 4
    queue_time = by_series[("QueueTime", ())]
    assert (queue_time["Values"], queue_time["Counts"], queue_time["Unit"]) == ([12.0], [2.0], "Milliseconds")
    assert all(set(d.get("Dimensions", [{"Name": "Queue"}])[0]) == {"Name", "Value"} or not d.get("Dimensions")
               for d in datums)


def test_fleet_metrics_go_per_limit_never_summed_and_never_as_queues() -> None:
    registry = Registry()
    registry.count("a", "Succeeded")
    registry.count("queue/a/concurrency", "FleetWaits", 3)
    registry.track_gauge("FleetShare", lambda: {"queue/a/concurrency": 2.0, "target/b/rate": 12.5})
    datums = build_datums(registry.take_window(), registry.read_gauges())
    fleet = {(d["MetricName"], d["Dimensions"][0]["Name"], d["Dimensions"][0]["Value"]): d["Value"]
             for d in datums if d["MetricName"].startswith("Fleet")}
    assert fleet == {("FleetWaits", "Limit", "queue/a/concurrency"): 3, ("FleetShare", "Limit", "queue/a/concurrency"): 2.0,
                     ("FleetShare", "Limit", "target/b/rate"): 12.5}
    assert registry.queue_names() == ["a"]  # a limit is not a queue: not in the rate lines, not on the page


def test_namespaces_cloudwatch_would_refuse_are_not_used() -> None:
    assert is_valid_namespace("Workerless-my-app.production")
    assert not is_valid_namespace("AWS/SQS") and not is_valid_namespace("Workerless-a:b")
    assert not is_valid_namespace("")


def test_a_flush_to_moto_skips_nan_gauges(moto_server: MotoServer) -> None:
    """moto refuses a NaN Value outright, so this flush fails unless the datum is dropped first."""
    cloudwatch = moto_server.client("cloudwatch")
    name = f"t-{uuid.uuid4().hex[:10]}"
    registry = Registry()
    registry.count("q", "Received", 1)
    registry.track_gauge("InFlight", lambda: {"q": math.nan})
    flusher = MetricsFlusher(cloudwatch, name, 60, registry, random.Random(1))
    flusher.flush()
    assert flusher.failures == 0 and flusher.carried == []
    metrics = cloudwatch.list_metrics(Namespace=f"Workerless-{name}")["Metrics"]
    assert {m["MetricName"] for m in metrics} >= {"Received", "Succeeded"}
    assert "InFlight" not in {m["MetricName"] for m in metrics}


def test_what_a_failing_cloudwatch_leaves_behind_is_bounded(caplog: pytest.LogCaptureFixture) -> None:
    with socket.socket() as closed:
        closed.bind(("127.0.0.1", 0))
        port = closed.getsockname()[1]  # nothing listens here once the socket is closed
    cloudwatch: Any = boto3.client(
        "cloudwatch", endpoint_url=f"http://127.0.0.1:{port}", region_name="us-east-1",
        aws_access_key_id="testing", aws_secret_access_key="testing",
        config=Config(retries={"mode": "standard", "total_max_attempts": 1}, connect_timeout=2),
    )
    registry = Registry()
    for i in range(MAX_CARRIED_DATUMS + 500):
        registry.count(f"q{i}", "Received")
    flusher = MetricsFlusher(cloudwatch, "bounded", 60, registry, random.Random(1))
    with caplog.at_level(logging.WARNING, logger="workerless_gevent.observability.cloudwatch"):
        flusher.flush()
        registry.count("q0", "Received")
        flusher.flush()
    assert flusher.failures == 2 and len(flusher.carried) == MAX_CARRIED_DATUMS
    # The oldest went first: what is left ends with the second window's datums.
    # (after it, one overall datum per counter)
    assert flusher.carried[-len(COUNTERS + OVERALL_COUNTERS) - 1]["Dimensions"] == [{"Name": "Queue", "Value": "q0"}]
    overall = len(COUNTERS + OVERALL_COUNTERS)  # overall datums per window, dropped first with the oldest
    assert flusher.carried[0]["Dimensions"] == [{"Name": "Queue", "Value": f"q{500 + overall + overall + 1}"}]
    assert "dropped" in caplog.text and "CloudWatch flush failed (1 in a row)" in caplog.text


def test_the_timer_stops_with_the_event() -> None:
    stopped = gevent.event.Event()
    flusher = MetricsFlusher(None, None, 1, Registry(), random.Random(1))
    runner = gevent.spawn(flusher.run, stopped)
    stopped.set()
    assert runner.join(timeout=2) is None and runner.dead
