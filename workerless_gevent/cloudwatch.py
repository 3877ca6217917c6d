"""Sends the registry to CloudWatch on a jittered timer, never blocking deliveries."""

from __future__ import annotations

import logging
import random
from datetime import datetime, timezone
from typing import Any

import gevent
import gevent.event

from .aws import AWS_ERRORS, describe_error
from .metrics import COUNTERS, Registry, Window

logger = logging.getLogger(__name__)

DATUMS_PER_CALL = 1000
VALUES_PER_DATUM = 150  # CloudWatch's limit on Values/Counts pairs in one datum
MAX_CARRIED_DATUM_KEYS = 20000  # bound on what a failing CloudWatch can make us hold


class MetricsFlusher:
    def __init__(self, cloudwatch: Any | None, name: str | None, interval_seconds: int,
                 registry: Registry, rng: random.Random) -> None:
        self.cloudwatch = cloudwatch
        self.namespace = f"Workerless-{name}" if name else ""
        self.interval_seconds = interval_seconds
        self.registry = registry
        self.rng = rng
        self.carried = Window()
        self.failures = 0

    def run(self, stopped: gevent.event.Event) -> None:
        if self.cloudwatch is None:
            return
        while not stopped.wait(self.interval_seconds * self.rng.uniform(0.9, 1.1)):
            self.flush()

    def flush_final(self, timeout_seconds: float) -> None:
        if self.cloudwatch is not None:
            with gevent.Timeout(timeout_seconds, False):
                self.flush()

    def flush(self) -> None:
        window = self.carried
        window.merge(self.registry.take_window())
        self.carried = Window()
        datums = build_datums(window)
        for start in range(0, len(datums), DATUMS_PER_CALL):
            try:
                self.cloudwatch.put_metric_data(Namespace=self.namespace, MetricData=datums[start:start + DATUMS_PER_CALL])
            except AWS_ERRORS as error:
                self.failures += 1
                if window.size() <= MAX_CARRIED_DATUM_KEYS:
                    self.carried.merge(window)
                log = logger.warning if self.failures == 1 else logger.debug
                log("CloudWatch flush failed (%d in a row), keeping the data for the next one: %s",
                    self.failures, describe_error(error))
                return
        self.failures = 0


def build_datums(window: Window) -> list[dict[str, Any]]:
    """Per-queue and overall series; counters as sums, distributions as Values/Counts."""
    now = datetime.now(timezone.utc)
    datums: list[dict[str, Any]] = []
    overall_counters: dict[str, float] = {name: 0.0 for name in COUNTERS}
    for (name, queue), value in window.counters.items():
        overall_counters[name] = overall_counters.get(name, 0.0) + value
        datums.append(datum(name, queue, now, "Count", value=value))
    for name, value in overall_counters.items():
        datums.append(datum(name, None, now, "Count", value=value))
    overall: dict[str, dict[float, int]] = {}
    for (name, queue), values in window.distributions.items():
        merged = overall.setdefault(name, {})
        for value, count in values.items():
            merged[value] = merged.get(value, 0) + count
        datums.extend(distribution_datums(name, queue, now, dict(values)))
    for name, values in overall.items():
        datums.extend(distribution_datums(name, None, now, values))
    return datums


def distribution_datums(name: str, queue: str | None, now: datetime, values: dict[float, int]) -> list[dict[str, Any]]:
    items = sorted(values.items())
    return [
        datum(name, queue, now, "Milliseconds", values=[v for v, _ in chunk], counts=[float(c) for _, c in chunk])
        for chunk in (items[i:i + VALUES_PER_DATUM] for i in range(0, len(items), VALUES_PER_DATUM))
    ]


def datum(name: str, queue: str | None, now: datetime, unit: str, **data: Any) -> dict[str, Any]:
    entry: dict[str, Any] = {"MetricName": name, "Timestamp": now, "Unit": unit}
    if queue is not None:
        entry["Dimensions"] = [{"Name": "Queue", "Value": queue}]
    if "value" in data:
        entry["Value"] = float(data["value"])
    else:
        entry["Values"] = data["values"]
        entry["Counts"] = data["counts"]
    return entry
