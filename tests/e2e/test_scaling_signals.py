"""Utilization and Backlog from the real daemon: on /metrics while it works, and in (moto's) CloudWatch."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

from tests.e2e.helpers import http_get
from tests.e2e.test_status_endpoints import samples
from tests.support import (CountingProxy, Daemon, HttpApp, MotoServer, Queue, build_config_file, count_messages,
                           status_url, wait_until)

HOLD_SECONDS = 3.0  # each delivery takes this long: both slots busy for a whole metrics interval
MESSAGES = 10
CONCURRENCY = 2


def gauge(url: str, name: str, queue: str | None = None) -> float | None:
    labels = (("queue", queue),) if queue else ()
    return samples(http_get(url + "/metrics")[2]).get((name, labels))


def maximum(cloudwatch: Any, namespace: str, name: str, queue: str | None) -> float | None:
    now = datetime.now(timezone.utc)
    points = cloudwatch.get_metric_statistics(
        Namespace=namespace, MetricName=name, Period=60, Statistics=["Maximum"],
        Dimensions=[{"Name": "Queue", "Value": queue}] if queue else [],
        StartTime=now - timedelta(minutes=10), EndTime=now + timedelta(minutes=10))["Datapoints"]
    return max((point["Maximum"] for point in points), default=None)


def test_utilization_and_backlog_on_metrics_and_in_cloudwatch(
    daemon: Callable[..., Daemon], proxied_env: dict[str, str], counting_proxy: CountingProxy, http_app: HttpApp,
    sqs: Any, make_queue: Callable[..., Queue], moto_server: MotoServer, tmp_path: Path,
) -> None:
    queue, quiet = make_queue(), make_queue()
    for i in range(MESSAGES):
        sqs.send_message(QueueUrl=queue.url, MessageBody=f"m{i}")
    http_app.delay = HOLD_SECONDS
    name = f"t-{uuid.uuid4().hex[:10]}"
    config = build_config_file(tmp_path, concurrency=CONCURRENCY, shutdown_timeout=10,
                               queues=[{"name": queue.name}, {"name": quiet.name}],
                               targets={"default": {"type": "http", "url": f"{http_app.url}/work"}},
                               tables={"status": {"listen": "127.0.0.1:0"}, "metrics": {"interval": 2}})
    # Deletes are held at the proxy until the backlog was read: every message counts, however slow the test.
    deletes = counting_proxy.hold(lambda action, params: action.startswith("DeleteMessage"))
    proc = daemon(["-c", str(config), f"--name={name}"], env=proxied_env)
    url = status_url(proc, timeout=30)
    wait_until(lambda: gauge(url, "workerless_backlog", quiet.name) is not None, 10, message="no backlog read")
    assert gauge(url, "workerless_backlog", queue.name) == MESSAGES
    assert gauge(url, "workerless_backlog", quiet.name) == 0
    deletes.set()
    # Both slots hold a delivery for 3 s at a time: the average over the 2 s interval nears 1.
    busy = wait_until(lambda: (gauge(url, "workerless_utilization") or 0) >= 0.8 and gauge(url, "workerless_utilization"),
                      15, message=lambda: f"utilization {gauge(url, 'workerless_utilization')}")
    assert busy <= 1.0
    wait_until(lambda: count_messages(sqs, queue.url) == 0, MESSAGES / CONCURRENCY * HOLD_SECONDS + 20,
               message="not all delivered")
    # Idle for a whole interval: both signals come back to zero.
    wait_until(lambda: gauge(url, "workerless_backlog", queue.name) == 0, 10,
               message=lambda: f"backlog {gauge(url, 'workerless_backlog', queue.name)}")
    wait_until(lambda: gauge(url, "workerless_utilization") == 0, 10,
               message=lambda: f"utilization {gauge(url, 'workerless_utilization')}")
    assert proc.stop(timeout=20) == 0
    # One GetQueueAttributes per queue per interval (2 s, jittered by 10 %) after the one that resolved
    # the queue at start, however often /metrics was scraped meanwhile.
    for each in (queue, quiet):
        reads = [r.started for r in counting_proxy.requests
                 if r.action == "GetQueueAttributes" and r.params.get("QueueUrl", "").endswith("/" + each.name)]
        seconds = reads[-1] - reads[1]
        # (the lower bound leaves room for slow answers on a busy machine: the wait follows each read)
        assert seconds / 3 - 1 <= len(reads) - 2 <= seconds / 1.8 + 1, (each.name, len(reads), seconds)

    cloudwatch = moto_server.client("cloudwatch")
    namespace = f"Workerless-{name}"
    dimensions: dict[str, set[tuple[tuple[str, str], ...]]] = {}
    for metric in cloudwatch.list_metrics(Namespace=namespace)["Metrics"]:
        found = tuple((d["Name"], d["Value"]) for d in metric.get("Dimensions", []))
        dimensions.setdefault(metric["MetricName"], set()).add(found)
    assert dimensions["Utilization"] == {()}  # per instance: no queue
    assert dimensions["Backlog"] == {(("Queue", queue.name),), (("Queue", quiet.name),), ()}
    assert maximum(cloudwatch, namespace, "Backlog", queue.name) == MESSAGES
    peak = maximum(cloudwatch, namespace, "Utilization", None)
    assert peak is not None and 0.8 <= peak <= 1.0, peak
    assert "cannot read the backlog" not in proc.output()
