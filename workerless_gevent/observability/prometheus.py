"""The registry in Prometheus text format, through prometheus-client and a private CollectorRegistry."""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Iterator
from typing import Any

from prometheus_client import CollectorRegistry, ProcessCollector, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily, Metric

from .. import __version__
from ..delivery.queue_state import QUEUE_STATES
from ..metrics import BUCKETS_SECONDS, COUNTERS, DISTRIBUTIONS, OVERALL, OVERALL_COUNTERS, Histogram, Registry

Snapshot = Callable[[], dict[str, Any]]  # the /status document

COUNTER_HELP = {
    "Received": "Messages received from SQS.",
    "Succeeded": "Deliveries the target accepted; the message was deleted.",
    "Failed": "Deliveries that failed; the message will be retried or dead-lettered.",
    "Expired": "Messages older than retention_period, deleted undelivered.",
    "DeadLettered": "Messages moved to the dead-letter queue.",
    "Throttled": "Deliveries the target asked to retry later or found it overloaded (429/503, Lambda throttle).",
    "RateLimited": "Deliveries that waited for their target's rate_limit.",
    "Filtered": "Messages that matched no filter of their queue, deleted undelivered.",
    "EmptyReceives": "ReceiveMessage calls that returned no message.",
    "SqsRequests": "SQS API requests made.",
    "StaleReceipts": "Deletes or visibility changes refused for a stale receipt handle.",
    "DeleteFailed": "Deletes given up after retries; SQS delivers those messages again.",
    "VisibilityFailed": "Visibility changes (heartbeats, retries, releases) given up after retries.",
    "NotSnsEnvelope": "Bodies of an sns = \"unwrap\" queue that were not SNS envelopes, delivered as they were.",
    "BacklogFailed": "GetQueueAttributes calls for the Backlog gauge that failed (the gauge is left out meanwhile).",
    "Duplicates": "Copies of a message whose key already succeeded (idempotency_key), deleted undelivered.",
    "IdempotencyInProgress": "Copies whose key another delivery holds; visible again when that claim ends.",
    "IdempotencyKeyMissing": "Messages of a queue with an idempotency_key that had no key; delivered as usual.",
    "IdempotencyStoreErrors": "DynamoDB calls of idempotent delivery that failed after retries.",
    "IdempotencyKeyConflicts": "Copies of a completed key with another payload (validate_payload); failed as "
                               "IdempotencyKeyReused, undelivered.",
    "GroupWaits": "Messages that waited in the daemon for their group's max_concurrency_per_group (fair queues).",
    "SpansDropped": "Spans dropped because the span buffer was full ([tracing]; the collector slow or down).",
    "SpanExportFailures": "Span batches the OTLP collector did not take ([tracing]).",
    "InternalErrors": "Unexpected errors that a supervised loop survived (logged with a traceback).",
}
QUEUE_GAUGES = (
    ("buffered", "buffered_messages", "Messages received and waiting for a delivery slot."),
    ("in_flight", "in_flight_messages", "Messages being delivered now."),
    ("receive_failures", "receive_failures", "Receives that failed in a row (0 while receiving works)."),
)


def bucket_label(bound: float) -> str:
    return "+Inf" if math.isinf(bound) else repr(float(bound))


def snake_case(name: str) -> str:
    return re.sub(r"(?<!^)(?=[A-Z])", "_", name).lower()


class RegistryCollector:
    """Reads our Registry and the daemon's state at scrape time; holds no state of its own."""

    def __init__(self, registry: Registry, snapshot: Snapshot) -> None:
        self.registry = registry
        self.snapshot = snapshot

    def collect(self) -> Iterator[Metric]:
        status = self.snapshot()
        queues = [queue["name"] for queue in status["queues"]]
        # Dead-letter queues appear in the registry only, through the requests made to them.
        yield from self.counters(list(dict.fromkeys(queues + self.registry.queue_names())))
        yield from self.histograms(queues)
        yield from queue_gauges(status)
        yield from target_gauges(status)
        yield from signal_gauges(self.registry.read_gauges())
        yield from fleet_metrics(status.get("fleet", []))
        for name in OVERALL_COUNTERS:
            overall = CounterMetricFamily(f"workerless_{snake_case(name)}", COUNTER_HELP.get(name, name))
            overall.add_metric([], self.registry.totals[(name, OVERALL)])
            yield overall
        failures = CounterMetricFamily("workerless_failures", "Failed deliveries by failure type.", labels=["type"])
        for failure in status["failures"]:
            failures.add_metric([failure["type"]], failure["count"])
        yield failures
        healthy = GaugeMetricFamily("workerless_healthy", "1 while the daemon's loops are alive and it is not stopping.")
        healthy.add_metric([], 1.0 if status["healthy"] else 0.0)
        yield healthy
        ready = GaugeMetricFamily("workerless_ready", "1 while /readyz answers 200 (receives work, no target paused).")
        ready.add_metric([], 1.0 if status["ready"] else 0.0)
        yield ready
        info = GaugeMetricFamily("workerless_info", "Constant 1, labelled with the version and name.",
                                 labels=["version", "name"])
        info.add_metric([__version__, status["name"] or ""], 1.0)
        yield info

    def counters(self, queues: list[str]) -> Iterator[Metric]:
        for name in COUNTERS:
            family = CounterMetricFamily(f"workerless_{snake_case(name)}", COUNTER_HELP.get(name, name),
                                         labels=["queue"])
            for queue in queues:
                family.add_metric([queue], self.registry.totals[(name, queue)])
            yield family

    def histograms(self, queues: list[str]) -> Iterator[Metric]:
        helps = {"DeliveryTime": "Time a delivery took.", "QueueTime": "Time from SentTimestamp to receive."}
        for name in DISTRIBUTIONS:
            family = HistogramMetricFamily(f"workerless_{snake_case(name)}_seconds", helps.get(name, name),
                                           labels=["queue"])
            for queue in queues:
                histogram = self.registry.histograms.get((name, queue)) or Histogram(BUCKETS_SECONDS[name])
                buckets = [(bucket_label(bound), float(count)) for bound, count in histogram.cumulative()]
                family.add_metric([queue], buckets, histogram.sum_seconds)
            yield family


def queue_gauges(status: dict[str, Any]) -> Iterator[Metric]:
    for key, metric, text in QUEUE_GAUGES:
        family = GaugeMetricFamily(f"workerless_{metric}", text, labels=["queue"])
        for queue in status["queues"]:
            family.add_metric([queue["name"]], float(queue[key]))
        yield family
    ready = GaugeMetricFamily("workerless_queue_ready", "1 if the queue's last receive returned messages.",
                              labels=["queue"])
    for queue in status["queues"]:
        ready.add_metric([queue["name"]], 1.0 if queue["state"] == "ready" else 0.0)
    yield ready
    states = GaugeMetricFamily("workerless_queue_state", "1 for the queue's state, as the status page names it.",
                               labels=["queue", "state"])
    for queue in status["queues"]:
        for state in QUEUE_STATES:
            states.add_metric([queue["name"], state], 1.0 if queue["state"] == state else 0.0)
    yield states


def target_gauges(status: dict[str, Any]) -> Iterator[Metric]:
    limit = GaugeMetricFamily("workerless_target_limit", "The target's current in-flight limit (shrinks on overload).",
                              labels=["target"])
    in_flight = GaugeMetricFamily("workerless_target_in_flight", "Deliveries in flight to the target.", labels=["target"])
    for target in status.get("targets", []):
        limit.add_metric([target["name"]], float(target["limit"]))
        in_flight.add_metric([target["name"]], float(target["in_flight"]))
    yield limit
    yield in_flight


def signal_gauges(gauges: dict[tuple[str, str], float]) -> Iterator[Metric]:
    """The scaling signals: Utilization of this instance, Backlog of each queue (only once read from SQS)."""
    utilization = GaugeMetricFamily("workerless_utilization",
                                    "Busy delivery slots / concurrency, averaged over the metrics interval (0-1).")
    if ("Utilization", OVERALL) in gauges:
        utilization.add_metric([], gauges[("Utilization", OVERALL)])
    yield utilization
    backlog = GaugeMetricFamily("workerless_backlog", "Messages in the queue, visible plus in flight, at the last "
                                "GetQueueAttributes (one per queue per metrics interval).", labels=["queue"])
    for (name, queue), value in gauges.items():
        if name == "Backlog":
            backlog.add_metric([queue], value)
    yield backlog


def fleet_metrics(limits: list[dict[str, Any]]) -> Iterator[Metric]:
    """Per fleet-wide limit: this member's share now, deliveries in flight under it, waits, live members."""
    share = GaugeMetricFamily("workerless_fleet_share", "This member's share of a fleet-wide limit now (0 while its "
                              "lease has lapsed).", labels=["limit"])
    in_flight = GaugeMetricFamily("workerless_fleet_in_flight", "This member's deliveries under a fleet-wide limit.",
                                  labels=["limit"])
    members = GaugeMetricFamily("workerless_fleet_members", "Live members sharing a fleet-wide limit.", labels=["limit"])
    waits = CounterMetricFamily("workerless_fleet_waits", "Deliveries that waited for this member's share of a "
                                "fleet-wide limit.", labels=["limit"])
    for limit in limits:
        share.add_metric([limit["limit"]], float(limit["share"]))
        in_flight.add_metric([limit["limit"]], float(limit["in_flight"]))
        members.add_metric([limit["limit"]], float(limit["live_members"]))
        waits.add_metric([limit["limit"]], float(limit["waits"]))
    yield from (share, in_flight, members, waits)


def build_exposition(registry: Registry, snapshot: Snapshot) -> Callable[[], bytes]:
    """A private CollectorRegistry: nothing global, and process metrics for this daemon only."""
    collectors = CollectorRegistry(auto_describe=False)
    collectors.register(RegistryCollector(registry, snapshot))
    ProcessCollector(registry=collectors)
    return lambda: generate_latest(collectors)
