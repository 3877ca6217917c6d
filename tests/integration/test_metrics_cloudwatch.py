"""CloudWatch metrics read back from moto after real runs of the daemon with a 2 s interval.

moto quirk: get_metric_statistics without Dimensions matches every series of the name, so the
overall series alone is that figure minus the per-queue ones (real CloudWatch matches exactly).
"""

from __future__ import annotations

import socket
import uuid
from collections.abc import Iterator
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any, Callable

import pytest

from tests.support import Daemon, HttpApp, MotoServer, Queue, wait_until, write_config
from tests.support.tcp_proxy import TcpProxy

COUNTERS = {"Received", "Succeeded", "Failed", "Expired", "DeadLettered", "Throttled", "EmptyReceives",
            "SqsRequests"}


def metrics_config(tmp_path: Path, app: HttpApp, queues: list[Queue], interval: int) -> tuple[Path, str]:
    name = f"t-{uuid.uuid4().hex[:10]}"
    listed = "".join(f'[[queues]]\nname = "{queue.name}"\nerror_visibility_timeout = 600\n\n' for queue in queues)
    path = write_config(tmp_path, f"""
name = "{name}"
concurrency = 4
shutdown_timeout = 5

[metrics]
interval = {interval}

[polling]
poll_for = 1

{listed}[targets.default]
type = "http"
url = "{app.url}/work"
""")
    return path, f"Workerless-{name}"


def statistic(cloudwatch: Any, namespace: str, name: str, queue: str | None, stat: str = "Sum") -> float:
    now = datetime.now(timezone.utc)
    points = cloudwatch.get_metric_statistics(
        Namespace=namespace, MetricName=name, Period=60, Statistics=[stat],
        Dimensions=[{"Name": "Queue", "Value": queue}] if queue else [],
        StartTime=now - timedelta(minutes=10), EndTime=now + timedelta(minutes=10),
    )["Datapoints"]
    return float(sum(point[stat] for point in points))


def overall(cloudwatch: Any, namespace: str, name: str, queues: list[Queue], stat: str = "Sum") -> float:
    """The series without a Queue dimension (see the moto quirk above)."""
    every = statistic(cloudwatch, namespace, name, None, stat)
    return every - sum(statistic(cloudwatch, namespace, name, queue.name, stat) for queue in queues)


def series(cloudwatch: Any, namespace: str) -> dict[str, set[tuple[tuple[str, str], ...]]]:
    """Metric name -> the dimension sets it was sent with."""
    found: dict[str, set[tuple[tuple[str, str], ...]]] = {}
    for page in cloudwatch.get_paginator("list_metrics").paginate(Namespace=namespace):
        for metric in page["Metrics"]:
            dimensions = tuple(sorted((d["Name"], d["Value"]) for d in metric.get("Dimensions", [])))
            found.setdefault(metric["MetricName"], set()).add(dimensions)
    return found


@pytest.fixture
def cloudwatch(moto_server: MotoServer) -> Any:
    return moto_server.client("cloudwatch")


def test_metrics_reach_cloudwatch_per_queue_and_overall(
    daemon: Callable[..., Daemon], aws_env: dict[str, str], http_app: HttpApp, sqs: Any,
    make_queue: Callable[..., Queue], cloudwatch: Any, tmp_path: Path,
) -> None:
    first, second = make_queue(), make_queue()
    http_app.respond = lambda request: (500, {}, b"no") if request.body == b"fail" else (200, {}, b"")
    config, namespace = metrics_config(tmp_path, http_app, [first, second], interval=2)
    proc = daemon(["-c", str(config)], env=aws_env)
    proc.wait_for_output("workerless started", timeout=20)
    for i in range(4):
        sqs.send_message(QueueUrl=first.url, MessageBody=f"a{i}")
    for body in ("b0", "b1", "fail"):
        sqs.send_message(QueueUrl=second.url, MessageBody=body)
    http_app.wait_for_requests(7, timeout=20)
    # The timer flush, not only the final one, must bring them in.
    wait_until(lambda: statistic(cloudwatch, namespace, "Succeeded", first.name) == 4
               and statistic(cloudwatch, namespace, "Failed", second.name) == 1, timeout=15,
               message=lambda: f"metrics not flushed: {series(cloudwatch, namespace)}")
    proc.wait_for_output("rates over", timeout=10)
    assert proc.stop(timeout=20) == 0

    sent = series(cloudwatch, namespace)
    assert COUNTERS | {"InFlight", "DeliveryTime", "QueueTime"} <= set(sent)
    queue_dimension = {(("Queue", first.name),), (("Queue", second.name),)}
    for name in ("Received", "Succeeded", "DeliveryTime", "QueueTime", "SqsRequests", "InFlight"):
        assert sent[name] == queue_dimension | {()}, name
    assert sent["Failed"] == {(("Queue", second.name),), ()}

    expected = {("Received", first.name): 4, ("Received", second.name): 3,
                ("Succeeded", first.name): 4, ("Succeeded", second.name): 2,
                ("Failed", first.name): 0, ("Failed", second.name): 1}
    for (name, queue), value in expected.items():
        assert statistic(cloudwatch, namespace, name, queue) == value, (name, queue)
    assert overall(cloudwatch, namespace, "Succeeded", [first, second]) == 6
    assert overall(cloudwatch, namespace, "Failed", [first, second]) == 1
    assert overall(cloudwatch, namespace, "Received", [first, second]) == 7
    assert statistic(cloudwatch, namespace, "SqsRequests", first.name) >= 2  # a receive and a delete at least
    # Distributions went as Values/Counts: one sample per delivery, per receive, in milliseconds.
    for name in ("DeliveryTime", "QueueTime"):
        assert statistic(cloudwatch, namespace, name, first.name, "SampleCount") == 4
        assert statistic(cloudwatch, namespace, name, second.name, "SampleCount") == 3
        assert overall(cloudwatch, namespace, name, [first, second], "SampleCount") == 7
    delivery_max = statistic(cloudwatch, namespace, "DeliveryTime", first.name, "Maximum")
    assert 0 < delivery_max < 5000
    log = proc.output()
    assert f"queue={first.name} received=" in log and "succeeded=" in log


def test_final_flush_at_stop_sends_what_the_timer_did_not(
    daemon: Callable[..., Daemon], aws_env: dict[str, str], http_app: HttpApp, sqs: Any,
    make_queue: Callable[..., Queue], cloudwatch: Any, tmp_path: Path,
) -> None:
    queue = make_queue()
    config, namespace = metrics_config(tmp_path, http_app, [queue], interval=3600)
    proc = daemon(["-c", str(config)], env=aws_env)
    proc.wait_for_output("workerless started", timeout=20)
    for i in range(3):
        sqs.send_message(QueueUrl=queue.url, MessageBody=f"m{i}")
    http_app.wait_for_requests(3, timeout=20)
    assert series(cloudwatch, namespace) == {}
    assert proc.stop(timeout=20) == 0
    assert statistic(cloudwatch, namespace, "Succeeded", queue.name) == 3
    assert overall(cloudwatch, namespace, "Succeeded", [queue]) == 3


@pytest.fixture
def cloudwatch_proxy(moto_endpoint: str) -> Iterator[TcpProxy]:
    proxy = TcpProxy(moto_endpoint)
    yield proxy
    proxy.close()


def test_failed_flush_is_carried_into_the_next_one_without_double_counting(
    daemon: Callable[..., Daemon], aws_env: dict[str, str], http_app: HttpApp, sqs: Any,
    make_queue: Callable[..., Queue], cloudwatch: Any, cloudwatch_proxy: TcpProxy, tmp_path: Path,
) -> None:
    queue = make_queue()
    config, namespace = metrics_config(tmp_path, http_app, [queue], interval=2)
    env = {**aws_env, "AWS_ENDPOINT_URL_CLOUDWATCH": cloudwatch_proxy.url}  # down until started
    proc = daemon(["-c", str(config)], env=env)
    proc.wait_for_output("workerless started", timeout=20)
    for i in range(3):
        sqs.send_message(QueueUrl=queue.url, MessageBody=f"early{i}")
    http_app.wait_for_requests(3, timeout=20)
    proc.wait_for_output("CloudWatch flush failed", timeout=15)
    cloudwatch_proxy.start()
    for i in range(2):
        sqs.send_message(QueueUrl=queue.url, MessageBody=f"late{i}")
    http_app.wait_for_requests(5, timeout=20)
    wait_until(lambda: statistic(cloudwatch, namespace, "Succeeded", queue.name) >= 5, timeout=15,
               message=lambda: proc.output()[-2000:])
    assert proc.stop(timeout=20) == 0
    assert "CloudWatch flush succeeded again" in proc.output()
    assert statistic(cloudwatch, namespace, "Succeeded", queue.name) == 5
    assert statistic(cloudwatch, namespace, "DeliveryTime", queue.name, "SampleCount") == 5


def test_a_hanging_cloudwatch_never_holds_up_deliveries(
    daemon: Callable[..., Daemon], aws_env: dict[str, str], http_app: HttpApp, sqs: Any,
    make_queue: Callable[..., Queue], tmp_path: Path,
) -> None:
    queue = make_queue()
    config, _ = metrics_config(tmp_path, http_app, [queue], interval=1)
    with socket.socket() as black_hole:  # accepts connections (the kernel does) and never answers
        black_hole.bind(("127.0.0.1", 0))
        black_hole.listen(64)
        env = {**aws_env, "AWS_ENDPOINT_URL_CLOUDWATCH": f"http://127.0.0.1:{black_hole.getsockname()[1]}"}
        proc = daemon(["-c", str(config)], env=env)
        proc.wait_for_output("rates over", timeout=20)  # a flush is now hanging on the black hole
        for i in range(10):
            sqs.send_message(QueueUrl=queue.url, MessageBody=f"m{i}")
            http_app.wait_for_requests(i + 1, timeout=5)
        # The final flush is bounded (2 s) even though CloudWatch never answers.
        assert proc.stop(timeout=15) == 0
    assert len(http_app.requests) == 10
