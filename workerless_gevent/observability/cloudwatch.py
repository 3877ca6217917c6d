"""Sends the registry to CloudWatch on a jittered timer, never blocking deliveries."""

from __future__ import annotations

import logging
import math
import random
from datetime import datetime, timezone
from typing import Any

import gevent
import gevent.event

from ..errors import AWS_ERRORS, describe_error
from ..metrics import (COUNTERS, FLEET_METRICS, GAUGE_UNITS, OVERALL, OVERALL_COUNTERS, UNSUMMED_GAUGES, RateSummary,
                       Registry, Window)

logger = logging.getLogger(__name__)

DATUMS_PER_CALL = 1000
VALUES_PER_DATUM = 150  # CloudWatch's limit on Values/Counts pairs in one datum
MAX_CARRIED_DATUMS = 20000  # bound on what a failing CloudWatch can make us hold


class MetricsFlusher:
    """Every interval: one summary log line and, when `name` is set, the window to CloudWatch."""

    def __init__(self, cloudwatch: Any | None, name: str | None, interval_seconds: int,
                 registry: Registry, rng: random.Random) -> None:
        self.namespace = f"Workerless-{name}" if name else ""
        if cloudwatch is not None and not is_valid_namespace(self.namespace):
            logger.error("not sending metrics: %r is not a namespace CloudWatch accepts", self.namespace)
            cloudwatch = None
        self.cloudwatch = cloudwatch
        self.interval_seconds = interval_seconds
        self.registry = registry
        self.rng = rng
        self.summary = RateSummary(registry)
        self.carried: list[dict[str, Any]] = []  # datums a failed flush could not send
        self.failures = 0

    def run(self, stopped: gevent.event.Event) -> None:
        while not stopped.wait(self.interval_seconds * self.rng.uniform(0.9, 1.1)):
            logger.info("%s", self.summary.line())
            if self.cloudwatch is None:
                self.registry.take_window()  # nobody will send it; keep memory flat
            else:
                self.flush()

    def flush_final(self, timeout_seconds: float) -> None:
        """At stop: the last window within `timeout_seconds` (what the stop's deadline leaves), else dropped."""
        if self.cloudwatch is None:
            return
        is_sent = False
        with gevent.Timeout(timeout_seconds, False):
            self.flush()
            is_sent = True
        if not is_sent:
            logger.warning("CloudWatch: the last metrics were not sent within the %.1fs the stop had left for them; "
                           "dropped", timeout_seconds)

    def flush(self) -> None:
        """Send the carried datums and a fresh window; keep whatever did not go out for next time."""
        cloudwatch = self.cloudwatch
        if cloudwatch is None:
            return
        datums = self.carried + build_datums(self.registry.take_window(), self.registry.read_gauges())
        self.carried = []
        for start in range(0, len(datums), DATUMS_PER_CALL):
            try:
                cloudwatch.put_metric_data(Namespace=self.namespace, MetricData=datums[start:start + DATUMS_PER_CALL])
            except AWS_ERRORS as error:
                self.carry(datums[start:], error)
                return
        if self.failures:
            logger.info("CloudWatch flush succeeded again after %d failures", self.failures)
        self.failures = 0

    def carry(self, datums: list[dict[str, Any]], error: BaseException) -> None:
        self.failures += 1
        dropped = max(0, len(datums) - MAX_CARRIED_DATUMS)
        self.carried = datums[dropped:]  # the newest survive
        log = logger.warning if self.failures == 1 or dropped else logger.debug
        log("CloudWatch flush failed (%d in a row), keeping %d datums for the next one (%d dropped): %s",
            self.failures, len(self.carried), dropped, describe_error(error))


def is_valid_namespace(namespace: str) -> bool:
    return bool(namespace) and not namespace.startswith("AWS/") and ":" not in namespace and len(namespace) <= 255


def build_datums(window: Window, gauges: dict[tuple[str, str], float]) -> list[dict[str, Any]]:
    """Per-queue and overall series; counters as sums, gauges as samples, distributions as Values/Counts."""
    now = datetime.now(timezone.utc)
    datums: list[dict[str, Any]] = []
    overall_counters: dict[str, float] = {name: 0.0 for name in COUNTERS + OVERALL_COUNTERS}
    for (name, queue), count in window.counters.items():
        if name in FLEET_METRICS:  # per limit, never summed
            datums.append(datum(name, queue, now, "Count", value=count, dimension="Limit"))
            continue
        overall_counters[name] = overall_counters.get(name, 0.0) + count
        if queue != OVERALL:
            datums.append(datum(name, queue, now, "Count", value=count))
    for name, total in overall_counters.items():
        datums.append(datum(name, None, now, "Count", value=total))
    overall_gauges: dict[str, float] = {}
    for (name, queue), sample in gauges.items():
        if not math.isfinite(sample):
            continue
        if queue == OVERALL:  # an instance-wide gauge (Utilization): no Queue dimension, no sum
            datums.append(datum(name, None, now, GAUGE_UNITS.get(name, "Count"), value=sample))
            continue
        if name in FLEET_METRICS:
            datums.append(datum(name, queue, now, "Count", value=sample, dimension="Limit"))
            continue
        if name not in UNSUMMED_GAUGES:
            overall_gauges[name] = overall_gauges.get(name, 0.0) + sample
        datums.append(datum(name, queue, now, GAUGE_UNITS.get(name, "Count"), value=sample))
    datums.extend(datum(name, None, now, "Count", value=sample) for name, sample in overall_gauges.items())
    overall: dict[str, dict[float, int]] = {}
    for (name, queue), values in window.distributions.items():
        merged = overall.setdefault(name, {})
        for milliseconds, times in values.items():
            merged[milliseconds] = merged.get(milliseconds, 0) + times
        datums.extend(distribution_datums(name, queue, now, dict(values)))
    for name, merged in overall.items():
        datums.extend(distribution_datums(name, None, now, merged))
    return [entry for entry in datums if is_finite_datum(entry)]


def distribution_datums(name: str, queue: str | None, now: datetime, values: dict[float, int]) -> list[dict[str, Any]]:
    items = sorted((value, count) for value, count in values.items() if math.isfinite(value) and count > 0)
    return [
        datum(name, queue, now, "Milliseconds", values=[v for v, _ in chunk], counts=[float(c) for _, c in chunk])
        for chunk in (items[i:i + VALUES_PER_DATUM] for i in range(0, len(items), VALUES_PER_DATUM))
    ]


def datum(name: str, queue: str | None, now: datetime, unit: str, dimension: str = "Queue",
          **data: Any) -> dict[str, Any]:
    entry: dict[str, Any] = {"MetricName": name, "Timestamp": now, "Unit": unit}
    if queue is not None:
        entry["Dimensions"] = [{"Name": dimension, "Value": queue}]
    if "value" in data:
        entry["Value"] = float(data["value"])
    else:
        entry["Values"] = data["values"]
        entry["Counts"] = data["counts"]
    return entry


def is_finite_datum(entry: dict[str, Any]) -> bool:
    """CloudWatch rejects NaN and +-Inf (moto takes some of them), and one bad datum fails the call."""
    numbers = [entry["Value"]] if "Value" in entry else [*entry["Values"], *entry["Counts"]]
    return all(math.isfinite(number) for number in numbers)
