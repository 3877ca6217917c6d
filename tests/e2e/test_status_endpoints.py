"""The status server of the real daemon: /metrics, /status, /healthz and /readyz, with SQS going up and down."""

from __future__ import annotations

import json
import socket
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Callable

import pytest
from prometheus_client.parser import text_string_to_metric_families

from tests.e2e.helpers import http_get, send_batch, status_config
from tests.support import CountingProxy, Daemon, HttpApp, Queue, status_url, wait_until
from tests.support.tcp_proxy import TcpProxy


def samples(text: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    """Every sample of a Prometheus text page, keyed by name and sorted labels."""
    return {
        (sample.name, tuple(sorted(sample.labels.items()))): sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
    }


def test_metrics_and_status_describe_the_deliveries(
    daemon: Callable[..., Daemon], aws_env: dict[str, str], http_app: HttpApp, sqs: Any,
    make_queue: Callable[..., Queue], tmp_path: Path,
) -> None:
    first, second = make_queue(), make_queue()
    http_app.respond = lambda request: (500, {}, b"no") if request.body == b"fail" else (200, {}, b"")
    proc = daemon(["-c", str(status_config(tmp_path, http_app, [first, second]))], env=aws_env)
    url = status_url(proc, timeout=20)
    for i in range(3):
        sqs.send_message(QueueUrl=first.url, MessageBody=f"a{i}")
    for body in ("b0", "fail"):
        sqs.send_message(QueueUrl=second.url, MessageBody=body)
    http_app.wait_for_requests(5, timeout=20)
    wait_until(lambda: json.loads(http_get(url + "/status")[2])["totals"]["Failed"] == 1, timeout=10)

    status, content_type, text = http_get(url + "/metrics")
    assert status == 200 and content_type.startswith("text/plain; version=0.0.4")
    families = {family.name: family for family in text_string_to_metric_families(text)}
    assert families["workerless_succeeded"].type == "counter"
    assert families["workerless_in_flight_messages"].type == "gauge"
    assert families["workerless_delivery_time_seconds"].type == "histogram"
    assert "process_cpu_seconds" in families
    values = samples(text)
    one, two = (("queue", first.name),), (("queue", second.name),)
    assert values[("workerless_received_total", one)] == 3
    assert values[("workerless_succeeded_total", one)] == 3
    assert values[("workerless_succeeded_total", two)] == 1
    assert values[("workerless_failed_total", two)] == 1
    assert values[("workerless_failed_total", one)] == 0
    assert values[("workerless_sqs_requests_total", one)] >= 2
    assert values[("workerless_failures_total", (("type", "HTTP 500"),))] == 1
    assert values[("workerless_healthy", ())] == 1
    assert values[("workerless_in_flight_messages", one)] == 0
    for name, count in (("workerless_delivery_time_seconds", 3), ("workerless_queue_time_seconds", 3)):
        buckets = sorted((float(dict(labels)["le"]), value) for (sample, labels), value in values.items()
                         if sample == name + "_bucket" and dict(labels)["queue"] == first.name)
        assert len(buckets) > 10 and buckets[-1] == (float("inf"), count)
        assert [value for _, value in buckets] == sorted(value for _, value in buckets)  # cumulative
        assert values[(name + "_count", one)] == count and values[(name + "_sum", one)] > 0

    status, content_type, body = http_get(url + "/status")
    document = json.loads(body)
    assert status == 200 and content_type == "application/json"
    assert [queue["name"] for queue in document["queues"]] == [first.name, second.name]
    assert all(queue["state"] in ("ready", "idle") and queue["target"] == "default" for queue in document["queues"])
    assert document["queues"][0]["totals"]["Succeeded"] == 3 and document["queues"][1]["totals"]["Failed"] == 1
    assert document["totals"]["Succeeded"] == 4 and document["in_flight"] == []
    (failure,) = document["failures"]
    assert failure["type"] == "HTTP 500" and failure["count"] == 1 and "500" in failure["latest_error"]
    assert http_get(url + "/healthz")[::2] == (200, "ok\n")
    assert http_get(url + "/nope")[0] == 404
    proc.wait_for_output("rates over", timeout=10)  # the summary is logged with CloudWatch off
    assert proc.stop(timeout=20) == 0


@pytest.fixture
def sqs_proxy(moto_endpoint: str) -> Iterator[TcpProxy]:
    proxy = TcpProxy(moto_endpoint)
    proxy.start()
    yield proxy
    proxy.close()


def test_through_an_sqs_outage_healthz_stays_200_and_readyz_turns_503_then_back(
    daemon: Callable[..., Daemon], aws_env: dict[str, str], http_app: HttpApp, sqs: Any,
    make_queue: Callable[..., Queue], sqs_proxy: TcpProxy, tmp_path: Path,
) -> None:
    """Liveness must not restart a pod on an SQS blip; readiness says why the daemon cannot work."""
    queue = make_queue()
    env = {**aws_env, "AWS_ENDPOINT_URL_SQS": sqs_proxy.url}
    proc = daemon(["-c", str(status_config(tmp_path, http_app, [queue], unready_after=3))], env=env)
    url = status_url(proc, timeout=20)
    wait_until(lambda: http_get(url + "/readyz")[0] == 200, timeout=10)
    assert json.loads(http_get(url + "/readyz")[2]) == {"ready": True, "reasons": []}

    sqs_proxy.stop()
    down_at = time.monotonic()
    status, content_type, body = wait_until(lambda: (lambda r: r if r[0] == 503 else None)(http_get(url + "/readyz")),
                                            timeout=30, message=lambda: proc.output()[-2000:])
    assert time.monotonic() - down_at >= 3  # not before unready_after
    (reason,) = json.loads(body)["reasons"]
    assert content_type == "application/json" and json.loads(body)["ready"] is False
    assert reason.startswith(f"queue {queue.name}: receives failing for ") and "EndpointConnectionError" in reason
    assert http_get(url + "/healthz")[::2] == (200, "ok\n")  # alive: restarting would not help
    assert json.loads(http_get(url + "/status")[2])["queues"][0]["receive_failures"] >= 1
    metrics = samples(http_get(url + "/metrics")[2])
    assert metrics[("workerless_healthy", ())] == 1 and metrics[("workerless_ready", ())] == 0

    sqs_proxy.start()
    wait_until(lambda: http_get(url + "/readyz")[0] == 200, timeout=45, message=lambda: proc.output()[-2000:])
    sqs.send_message(QueueUrl=queue.url, MessageBody="after the outage")
    assert http_app.wait_for_requests(1, timeout=20)[0].body == b"after the outage"
    assert http_get(url + "/healthz")[::2] == (200, "ok\n")
    assert proc.stop(timeout=20) == 0
    assert "receiving again after" in proc.output()


def test_readyz_is_503_while_the_target_is_paused(
    daemon: Callable[..., Daemon], aws_env: dict[str, str], http_app: HttpApp, sqs: Any,
    make_queue: Callable[..., Queue], tmp_path: Path,
) -> None:
    queue = make_queue()
    http_app.respond = lambda request: (429, {"Retry-After": "4"}, b"busy") if request.body == b"busy" else (200, {}, b"")
    proc = daemon(["-c", str(status_config(tmp_path, http_app, [queue]))], env=aws_env)
    url = status_url(proc, timeout=20)
    sqs.send_message(QueueUrl=queue.url, MessageBody="busy")
    status, _, body = wait_until(lambda: (lambda r: r if r[0] == 503 else None)(http_get(url + "/readyz")),
                                 timeout=20, message=lambda: proc.output()[-2000:])
    (reason,) = json.loads(body)["reasons"]
    assert reason.startswith(f"queue {queue.name}: target default paused for ")
    assert http_get(url + "/healthz")[0] == 200
    wait_until(lambda: http_get(url + "/readyz")[0] == 200, timeout=10, message="still not ready after the pause")
    assert proc.stop(timeout=20) == 0


def test_a_busy_status_port_stops_the_start_with_one_line(
    daemon: Callable[..., Daemon], aws_env: dict[str, str], http_app: HttpApp,
    make_queue: Callable[..., Queue], tmp_path: Path,
) -> None:
    queue = make_queue()
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen(1)
        port = taken.getsockname()[1]
        proc = daemon([f"--queues={queue.name}", f"--http={http_app.url}/", f"--status=127.0.0.1:{port}"], env=aws_env)
        assert proc.wait_exit(timeout=30) == 1
    assert f"workerless: cannot start: status server cannot listen on 127.0.0.1:{port}: " in proc.output()
    assert "Traceback" not in proc.output()


def test_status_shows_starting_queues_rates_and_the_last_error_of_queues_and_targets(
    daemon: Callable[..., Daemon], proxied_env: dict[str, str], counting_proxy: CountingProxy, http_app: HttpApp,
    sqs: Any, make_queue: Callable[..., Queue], tmp_path: Path,
) -> None:
    first, second = make_queue(), make_queue()
    http_app.respond = lambda request: (500, {}, b"no") if request.body == b"fail" else (200, {}, b"")
    # The first receives are held at the proxy, and so are the first backlog reads (not the start's own
    # GetQueueAttributes, which has other attributes): the page is read before either could come back.
    held = counting_proxy.hold(lambda action, params: action == "ReceiveMessage" or (
        action == "GetQueueAttributes" and "ApproximateNumberOfMessages" in json.dumps(params)))
    proc = daemon(["-c", str(status_config(tmp_path, http_app, [first, second]))], env=proxied_env)
    url = status_url(proc, timeout=20)
    document = json.loads(http_get(url + "/status")[2])
    assert [queue["state"] for queue in document["queues"]] == ["starting", "starting"]  # never polled: not ready
    queues_section = http_get(url + "/")[2].split('<section id="queues">')[1].split("</section>")[0]
    assert queues_section.count('class="starting">starting<') == 2 and ">ready<" not in queues_section
    assert [queue["backlog"] for queue in document["queues"]] == [None, None]  # not read yet: no value, not 0
    metrics = samples(http_get(url + "/metrics")[2])
    assert metrics[("workerless_queue_state", (("queue", first.name), ("state", "starting")))] == 1
    assert metrics[("workerless_queue_state", (("queue", first.name), ("state", "ready")))] == 0
    assert not any(name == "workerless_backlog" for name, _ in metrics)
    held.set()
    wait_until(lambda: [queue["backlog"] for queue in json.loads(http_get(url + "/status")[2])["queues"]] == [0, 0],
               timeout=15, message="the backlog never read as 0 once released")

    wait_until(lambda: all(queue["state"] in ("ready", "idle")
                           for queue in json.loads(http_get(url + "/status")[2])["queues"]), timeout=15)
    send_batch(sqs, first.url, ["ok-1", "ok-2", "fail"])
    wait_until(lambda: json.loads(http_get(url + "/status")[2])["totals"]["Failed"] == 1, timeout=20)
    # The rate is None until its oldest sample is a second old: the three may all be done before that.
    document = wait_until(lambda: (lambda d: d if (d["queues"][0]["deliveries_per_second"] or 0) > 0 else None)(
        json.loads(http_get(url + "/status")[2])), timeout=10, message="no deliveries per second for the first queue")
    one, two = document["queues"]
    assert one["last_error"] == "HTTP 500: the app answered HTTP 500" and one["last_error_seconds"] < 30
    assert two["last_error"] == "" and two["last_error_seconds"] is None
    (target,) = document["targets"]
    assert (target["name"], target["type"], target["endpoint"], target["state"]) == (
        "default", "http", f"{http_app.url}/work", "ready")
    assert target["last_error"] == "HTTP 500: the app answered HTTP 500"
    assert document["deliveries_per_second"] >= one["deliveries_per_second"]
    page = http_get(url + "/")[2]
    assert page.count("HTTP 500: the app answered HTTP 500 (") == 2  # the queue's row and the target's
    assert "<th>backlog</th>" in page and "<td>\u2013</td>" in page and "Deliveries/s" in page
    assert proc.stop(timeout=20) == 0
