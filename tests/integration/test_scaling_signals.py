"""The scaling signals on their own: the Backlog watch against moto, and how Utilization and Backlog
become CloudWatch datums and Prometheus samples."""

from __future__ import annotations

import logging
import random
import uuid
from typing import Any, Callable

import gevent
import gevent.event
import pytest
from prometheus_client.parser import text_string_to_metric_families

from tests.support import MotoServer, Queue, wait_until
from workerless_gevent.metrics import OVERALL, Registry
from workerless_gevent.observability.backlog import BacklogWatch
from workerless_gevent.observability.cloudwatch import MetricsFlusher, build_datums
from workerless_gevent.observability.prometheus import build_exposition


def status_document() -> dict[str, Any]:
    return {"queues": [], "failures": [], "healthy": True, "ready": True, "name": None}


def test_backlog_is_visible_plus_in_flight(sqs: Any, make_queue: Callable[..., Queue], registry: Registry) -> None:
    queue = make_queue()
    for i in range(5):
        sqs.send_message(QueueUrl=queue.url, MessageBody=f"m{i}")
    received = sqs.receive_message(QueueUrl=queue.url, MaxNumberOfMessages=2, VisibilityTimeout=60)["Messages"]
    assert len(received) == 2
    watch = BacklogWatch(sqs, {queue.name: queue.url}, 60, registry, random.Random(1))
    watch.refresh()
    assert watch.values == {queue.name: 5.0}
    assert registry.total("SqsRequests", queue.name) == 1
    sqs.delete_message(QueueUrl=queue.url, ReceiptHandle=received[0]["ReceiptHandle"])
    watch.refresh()
    assert watch.values == {queue.name: 4.0}


def test_a_failing_read_is_counted_leaves_the_queue_out_and_the_loop_goes_on(
    sqs: Any, make_queue: Callable[..., Queue], registry: Registry, caplog: pytest.LogCaptureFixture,
) -> None:
    good = make_queue()
    sqs.send_message(QueueUrl=good.url, MessageBody="one")
    gone = make_queue()
    watch = BacklogWatch(sqs, {gone.name: gone.url, good.name: good.url}, 0.05, registry, random.Random(1))
    watch.refresh()
    assert watch.values == {gone.name: 0.0, good.name: 1.0}
    sqs.delete_queue(QueueUrl=gone.url)
    stopped = gevent.event.Event()
    with caplog.at_level(logging.DEBUG, logger="workerless_gevent.observability.backlog"):
        runner = gevent.spawn(watch.run, stopped)
        wait_until(lambda: registry.total("BacklogFailed", gone.name) >= 3, 10,
                   message=lambda: f"failures {registry.total('BacklogFailed', gone.name)}; {caplog.text}")
        stopped.set()
        assert runner.join(timeout=5) is None and runner.dead and runner.exception is None
    assert watch.values == {good.name: 1.0}  # the failing queue has no value, not a stale one
    assert registry.total("BacklogFailed", good.name) == 0
    warnings = [r for r in caplog.records  # the watch's own: another test's leftover greenlet may log meanwhile
                if r.levelno == logging.WARNING and r.name == "workerless_gevent.observability.backlog"]
    assert len(warnings) == 1 and gone.name in warnings[0].getMessage()  # once, not once per interval
    assert "cannot read the backlog (1 in a row" in warnings[0].getMessage()


def test_cloudwatch_datums_carry_the_signals_with_their_units_and_dimensions() -> None:
    registry = Registry()
    registry.track_gauge("Utilization", lambda: {OVERALL: 0.75})
    registry.track_gauge("Backlog", lambda: {"payments": 12.0, "default": 3.0})
    datums = build_datums(registry.take_window(), registry.read_gauges())
    signals = {(d["MetricName"], tuple((x["Name"], x["Value"]) for x in d.get("Dimensions", []))): d
               for d in datums if d["MetricName"] in ("Utilization", "Backlog")}
    assert set(signals) == {("Utilization", ()), ("Backlog", (("Queue", "payments"),)),
                            ("Backlog", (("Queue", "default"),)), ("Backlog", ())}
    assert signals[("Utilization", ())]["Unit"] == "None" and signals[("Utilization", ())]["Value"] == 0.75
    assert all(datum["Unit"] == "Count" for key, datum in signals.items() if key[0] == "Backlog")
    assert signals[("Backlog", ())]["Value"] == 15.0  # the instance's queues together


def test_the_signals_reach_moto_cloudwatch(moto_server: MotoServer) -> None:
    cloudwatch = moto_server.client("cloudwatch")
    name = f"t-{uuid.uuid4().hex[:8]}"
    registry = Registry()
    registry.track_gauge("Utilization", lambda: {OVERALL: 0.5})
    registry.track_gauge("Backlog", lambda: {"jobs": 7.0})
    flusher = MetricsFlusher(cloudwatch, name, 60, registry, random.Random(1))
    flusher.flush()
    assert flusher.failures == 0
    found = {(m["MetricName"], tuple((d["Name"], d["Value"]) for d in m.get("Dimensions", [])))
             for m in cloudwatch.list_metrics(Namespace=f"Workerless-{name}")["Metrics"]}
    assert {("Utilization", ()), ("Backlog", (("Queue", "jobs"),)), ("Backlog", ())} <= found
    assert ("Utilization", (("Queue", ""),)) not in found


def test_prometheus_shows_utilization_and_backlog_per_queue() -> None:
    registry = Registry()
    registry.track_gauge("Utilization", lambda: {OVERALL: 0.25})
    backlog = {"payments": 4.0}
    registry.track_gauge("Backlog", lambda: backlog)
    text = build_exposition(registry, status_document)().decode()
    families = {family.name: family for family in text_string_to_metric_families(text)}
    assert families["workerless_utilization"].type == "gauge"
    assert [(s.labels, s.value) for s in families["workerless_utilization"].samples] == [({}, 0.25)]
    assert [(s.labels, s.value) for s in families["workerless_backlog"].samples] == [({"queue": "payments"}, 4.0)]
    backlog.clear()  # a failed read: the series goes away rather than showing an old figure
    text = build_exposition(registry, status_document)().decode()
    assert "workerless_backlog{" not in text
