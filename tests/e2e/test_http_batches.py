"""An HTTP target with batch_size > 1 through the real daemon and a real local app: one POST per batch in exactly
the SQS event a Lambda function gets, partial failures by `batchItemFailures` as Lambda reads them."""

from __future__ import annotations

import hashlib
import hmac
import json
import re
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import gevent.event
import pytest

from tests.e2e.helpers import http_get, send_batch, send_traced
from tests.support import (Daemon, HttpApp, MotoServer, Queue, RecordedRequest, build_config_file, count_messages,
                           status_url, wait_until)
from tests.support.otlp import OtlpReceiver
from workerless_gevent.targets.event_parts import MAX_PAYLOAD_BYTES

Reply = tuple[int, dict[str, str], bytes]
RECORD_KEYS = {"messageId", "receiptHandle", "body", "attributes", "messageAttributes", "md5OfBody", "eventSource",
               "eventSourceARN", "awsRegion"}


def batch_config(tmp_path: Path, app: HttpApp, queue: Queue, *, batch_size: int = 10, window: float = 1,
                 target: dict[str, Any] | None = None, tables: dict[str, dict[str, Any]] | None = None,
                 **queue_keys: Any) -> Path:
    return build_config_file(tmp_path, concurrency=4, shutdown_timeout=5, polling={"poll_for": 20},
                             queues=[{"name": queue.name, "error_visibility_timeout": 1, **queue_keys}],
                             targets={"default": {"type": "http", "url": f"{app.url}/sqs", "batch_size": batch_size,
                                                  "max_batching_window": window, **(target or {})}},
                             tables=tables)


def records(request: RecordedRequest) -> list[dict[str, Any]]:
    return list(json.loads(request.body)["Records"])


def deliveries(app: HttpApp) -> list[tuple[str, str]]:
    """(body, ApproximateReceiveCount) of every record POSTed, in order."""
    return [(record["body"], record["attributes"]["ApproximateReceiveCount"])
            for request in list(app.requests) for record in records(request)]


def completed_keys(moto_server: MotoServer, table: str) -> int:
    items = moto_server.client("dynamodb").scan(TableName=table, ConsistentRead=True)["Items"]
    return sum(item["state"]["S"] == "completed" for item in items)


def failing(predicate: Callable[[dict[str, Any]], bool]) -> Callable[[RecordedRequest], Reply]:
    """An app that names the records `predicate` picks in batchItemFailures."""
    def respond(request: RecordedRequest) -> Reply:
        failed = [{"itemIdentifier": record["messageId"]} for record in records(request) if predicate(record)]
        return 200, {"Content-Type": "application/json"}, json.dumps({"batchItemFailures": failed}).encode()
    return respond


def test_a_batch_is_lambdas_sqs_event_and_a_failed_record_alone_is_retried(
    daemon: Callable[..., Daemon], aws_env: dict[str, str], http_app: HttpApp,
    sqs: Any, make_queue: Callable[..., Queue], tmp_path: Path,
) -> None:
    queue = make_queue()
    http_app.respond = failing(lambda record: record["body"] == "b")
    ids = send_batch(sqs, queue.url, ["a", "b", "c"],
                     MessageAttributes={"tenant": {"DataType": "String", "StringValue": "acme"}})
    proc = daemon(["-c", str(batch_config(tmp_path, http_app, queue))], env=aws_env)
    wait_until(lambda: ("b", "3") in deliveries(http_app), 60, message=lambda: f"deliveries: {deliveries(http_app)}")
    assert proc.stop(timeout=30) == 0

    first = http_app.requests[0]
    assert first.path == "/sqs" and first.method == "POST"
    assert first.headers["content-type"] == "application/json"
    assert first.headers["x-aws-sqsd-queue"] == queue.name and first.headers["x-aws-sqsd-msgcount"] == "3"
    assert first.headers["user-agent"].startswith("aws-sqsd/")
    assert "x-aws-sqsd-msgid" not in first.headers and "traceparent" not in first.headers
    assert [record["messageId"] for record in records(first)] == ids  # one receive, one POST, in order
    for record in records(first):
        assert set(record) == RECORD_KEYS
        assert (record["eventSource"], record["eventSourceARN"], record["awsRegion"]) == ("aws:sqs", queue.arn,
                                                                                          "us-east-1")
        assert record["messageAttributes"]["tenant"] == {"stringValue": "acme", "stringListValues": [],
                                                         "binaryListValues": [], "dataType": "String"}
        assert record["md5OfBody"] == hashlib.md5(record["body"].encode()).hexdigest()
    seen = deliveries(http_app)
    assert [delivery for delivery in seen if delivery[0] != "b"] == [("a", "1"), ("c", "1")]  # deleted at once
    assert [count for body, count in seen if body == "b"][:3] == ["1", "2", "3"]
    assert all(request.headers["x-aws-sqsd-msgcount"] == "1" for request in http_app.requests[1:])
    assert count_messages(sqs, queue.url) == 1
    assert "type=BatchItemFailure: the app reported this record as failed" in proc.output()
    assert "delivered=2" in proc.output()


def test_the_window_fills_a_batch_from_several_receives_and_the_status_page_counts_messages_and_batches(
    daemon: Callable[..., Daemon], aws_env: dict[str, str], http_app: HttpApp,
    sqs: Any, make_queue: Callable[..., Queue], tmp_path: Path,
) -> None:
    queue = make_queue()
    released = gevent.event.Event()

    def answer_once_released(request: RecordedRequest) -> Reply:
        released.wait(30)
        return 200, {}, b""

    http_app.respond = answer_once_released
    config = batch_config(tmp_path, http_app, queue, window=5, tables={"status": {"listen": "127.0.0.1:0"}})
    proc = daemon(["-c", str(config)], env=aws_env)
    url = status_url(proc)
    wait_until(lambda: status(url)["queues"][0]["state"] == "idle", 30, message=lambda: status(url)["queues"])
    for body in ("a", "b", "c"):  # three sends, three receives: the window holds the batch open for the rest
        sqs.send_message(QueueUrl=queue.url, MessageBody=body)
    http_app.wait_for_requests(1, timeout=30)
    (target,) = wait_until(lambda: [target for target in status(url)["targets"] if target["in_flight"] == 3], 10,
                           message=lambda: status(url)["targets"])
    assert target["batches_in_flight"] == 1
    assert "<td>3 in 1 batch</td>" in http_get(url + "/")[2]
    released.set()
    wait_until(lambda: count_messages(sqs, queue.url) == 0, 30)
    assert proc.stop(timeout=30) == 0

    (request,) = http_app.requests
    assert [record["body"] for record in records(request)] == ["a", "b", "c"]
    assert status_totals(proc) == (3, 0)


def status(url: str) -> dict[str, Any]:
    return dict(json.loads(http_get(url + "/status")[2]))


def status_totals(proc: Daemon) -> tuple[int, int]:
    """(delivered, failed) of the last line: metrics count messages, not POSTs."""
    match = re.search(r"delivered=(\d+) failed=(\d+)", proc.output())
    assert match, proc.output()
    return int(match.group(1)), int(match.group(2))


@pytest.mark.parametrize("first_answer", [
    (200, {}, b'{"batchItemFailures": [{"itemIdentifier": "no-such-id"}]}'),
    (500, {}, b"internal error"),
    (200, {}, b"OK"),
], ids=["unknown-identifier", "http-500", "not-json"])
def test_an_unknown_identifier_a_non_2xx_or_an_answer_not_json_retries_the_whole_batch(
    first_answer: Reply, daemon: Callable[..., Daemon], aws_env: dict[str, str], http_app: HttpApp,
    sqs: Any, make_queue: Callable[..., Queue], tmp_path: Path,
) -> None:
    queue = make_queue()
    answers = iter([first_answer])
    http_app.respond = lambda request: next(answers, (204, {}, b""))
    send_batch(sqs, queue.url, ["a", "b", "c"])
    proc = daemon(["-c", str(batch_config(tmp_path, http_app, queue))], env=aws_env)
    wait_until(lambda: count_messages(sqs, queue.url) == 0, 60, message=lambda: f"deliveries: {deliveries(http_app)}")
    assert proc.stop(timeout=30) == 0

    seen = Counter(deliveries(http_app))
    assert seen == {(body, count): 1 for body in "abc" for count in "12"}, seen
    assert proc.output().count("outcome=failure") == 3
    assert "delivered=3" in proc.output()


def test_a_fifo_batch_holds_one_group_in_order_and_after_a_failure_the_group_comes_again_in_order(
    daemon: Callable[..., Daemon], aws_env: dict[str, str], http_app: HttpApp,
    sqs: Any, make_queue: Callable[..., Queue], tmp_path: Path,
) -> None:
    queue = make_queue(fifo=True)
    failed: list[str] = []

    def fail_g1_3_once(record: dict[str, Any]) -> bool:
        if record["body"] == "g1-3" and not failed:
            failed.append(record["body"])
            return True
        return False

    http_app.respond = failing(fail_g1_3_once)
    entries = [{"Id": f"{group}-{i}", "MessageBody": f"{group}-{i}", "MessageGroupId": group,
                "MessageDeduplicationId": f"{group}-{i}"} for i in range(1, 6) for group in ("g1", "g2")]
    assert not sqs.send_message_batch(QueueUrl=queue.url, Entries=entries).get("Failed")
    proc = daemon(["-c", str(batch_config(tmp_path, http_app, queue, window=0))], env=aws_env)
    wait_until(lambda: count_messages(sqs, queue.url) == 0, 60, message=lambda: f"deliveries: {deliveries(http_app)}")
    assert proc.stop(timeout=30) == 0

    groups = [{record["attributes"]["MessageGroupId"] for record in records(request)} for request in http_app.requests]
    assert all(len(group) == 1 for group in groups), groups  # one group per POST
    g1 = [body for body, _ in deliveries(http_app) if body.startswith("g1")]
    g2 = [body for body, _ in deliveries(http_app) if body.startswith("g2")]
    # g1-3 failed: g1-4 and g1-5, after it in its group, were not deleted and came again after it, in order
    assert g1 == ["g1-1", "g1-2", "g1-3", "g1-4", "g1-5", "g1-3", "g1-4", "g1-5"], g1
    assert g2 == [f"g2-{i}" for i in range(1, 6)], g2  # the other group went on
    receive_counts = {body: count for body, count in deliveries(http_app)}  # the latest delivery of each
    assert [receive_counts[f"g1-{i}"] for i in range(1, 6)] == ["1", "1", "2", "2", "2"]
    # only g1-3 failed; g1-4 and g1-5 were released behind it, which does not count toward their max_retries
    assert proc.output().count("outcome=failure") == 1 and "delivered=10 failed=1" in proc.output()


def test_signing_covers_the_batch_body(
    daemon: Callable[..., Daemon], aws_env: dict[str, str], http_app: HttpApp,
    sqs: Any, make_queue: Callable[..., Queue], tmp_path: Path,
) -> None:
    queue = make_queue()
    send_batch(sqs, queue.url, ["a", "b"])
    config = batch_config(tmp_path, http_app, queue, target={"signing_secret_env": "BATCH_SECRET"})
    proc = daemon(["-c", str(config)], env={**aws_env, "BATCH_SECRET": "s3cret"})
    wait_until(lambda: count_messages(sqs, queue.url) == 0, 60)
    assert proc.stop(timeout=30) == 0

    (request,) = http_app.requests
    timestamp = request.headers["x-workerless-timestamp"]
    assert abs(time.time() - int(timestamp)) < 120
    expected = hmac.new(b"s3cret", timestamp.encode() + b"." + request.body, hashlib.sha256).hexdigest()
    assert request.headers["x-workerless-signature"] == f"v1={expected}"
    assert [record["body"] for record in records(request)] == ["a", "b"]


def test_429_with_retry_after_pauses_the_target_and_retries_the_batch_then(
    daemon: Callable[..., Daemon], aws_env: dict[str, str], http_app: HttpApp,
    sqs: Any, make_queue: Callable[..., Queue], tmp_path: Path,
) -> None:
    queue = make_queue()
    answers = iter([(429, {"Retry-After": "2"}, b"slow down")])
    http_app.respond = lambda request: next(answers, (200, {}, b'{"batchItemFailures": []}'))
    send_batch(sqs, queue.url, ["a", "b", "c"])
    proc = daemon(["-c", str(batch_config(tmp_path, http_app, queue))], env=aws_env)
    wait_until(lambda: count_messages(sqs, queue.url) == 0, 60, message=lambda: f"deliveries: {deliveries(http_app)}")
    assert proc.stop(timeout=30) == 0

    first, second = http_app.requests
    assert [record["body"] for record in records(second)] == ["a", "b", "c"]
    assert {record["attributes"]["ApproximateReceiveCount"] for record in records(second)} == {"2"}
    assert second.arrived - first.arrived >= 1.9  # after Retry-After, not after error_visibility_timeout = 1
    log = proc.output()
    assert log.count("asked to retry in 2s (HTTP 429, Retry-After 2s)") == 3
    assert "outcome=failure" not in log and "delivered=3" in log


def test_idempotency_leaves_the_copies_of_completed_keys_out_of_a_batch(
    daemon: Callable[..., Daemon], aws_env: dict[str, str], http_app: HttpApp, moto_server: MotoServer,
    sqs: Any, make_queue: Callable[..., Queue], claims_table: str, tmp_path: Path,
) -> None:
    queue = make_queue()
    config = batch_config(tmp_path, http_app, queue, idempotency_key="body:order.id",
                          tables={"idempotency": {"table": claims_table}})
    proc = daemon(["-c", str(config)], env=aws_env)
    order = lambda order_id, note="": json.dumps({"order": {"id": order_id}, "note": note})  # noqa: E731
    send_batch(sqs, queue.url, [order("H-1"), order("H-2"), order("H-3")])
    wait_until(lambda: count_messages(sqs, queue.url) == 0, 60)
    wait_until(lambda: completed_keys(moto_server, claims_table) == 3, 30, message="keys not completed")
    first = len(http_app.requests)
    send_batch(sqs, queue.url, [order("H-1", "copy"), order("H-2", "copy"), order("H-4")])
    wait_until(lambda: count_messages(sqs, queue.url) == 0, 60)
    assert proc.stop(timeout=30) == 0

    later = [json.loads(body)["order"]["id"] for request in http_app.requests[first:]
             for body in (record["body"] for record in records(request))]
    assert later == ["H-4"]
    assert proc.output().count("already delivered: deleted as a duplicate") == 2
    assert "x-workerless-idempotency-key" not in http_app.requests[-1].headers


def test_a_traced_batch_post_carries_its_span_which_links_each_records_context(
    daemon: Callable[..., Daemon], aws_env: dict[str, str], http_app: HttpApp,
    sqs: Any, make_queue: Callable[..., Queue], tmp_path: Path,
) -> None:
    queue = make_queue()
    producers = send_traced(sqs, queue.url)
    receiver = OtlpReceiver()
    receiver.start()
    try:
        config = batch_config(tmp_path, http_app, queue, tables={"tracing": {"exporter": "otlp"}})
        proc = daemon(["-c", str(config)], env={**aws_env, "OTEL_EXPORTER_OTLP_ENDPOINT": receiver.endpoint,
                                                "OTEL_BSP_SCHEDULE_DELAY": "100"})
        wait_until(lambda: count_messages(sqs, queue.url) == 0, 60)
        wait_until(lambda: receiver.named(f"{queue.name} process"), 30, message="no span")
        assert proc.stop(timeout=30) == 0
    finally:
        receiver.stop()
    (span,) = receiver.named(f"{queue.name} process")
    (request,) = http_app.requests
    assert request.headers["traceparent"] == f"00-{span.trace_id}-{span.span_id}-01"
    assert sorted(span.links) == sorted(producers)
    assert span.attributes["messaging.batch.message_count"] == 3
    assert [record["messageAttributes"]["traceparent"]["stringValue"] for record in records(request)] == [
        f"00-{trace_id}-{span_id}-01" for trace_id, span_id in producers]


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_a_batch_of_10000_goes_in_posts_under_6_mb_each(
    daemon: Callable[..., Daemon], aws_env: dict[str, str], http_app: HttpApp,
    sqs: Any, make_queue: Callable[..., Queue], tmp_path: Path,
) -> None:
    """Slow: moto's SQS looks at every message of the queue in each call, so sending 10,000 took 80 s here and
    receiving them 65 s (2 cores, other tests running)."""
    queue = make_queue()
    started = time.monotonic()
    for start in range(0, 10_000, 10):
        send_batch(sqs, queue.url, [f"{number:05d}" for number in range(start, start + 10)])
    print(f"sent 10,000 messages to moto in {time.monotonic() - started:.1f}s")
    # The window (the most there is) closes when the batch is full: all 10,000 are one batch
    config = batch_config(tmp_path, http_app, queue, batch_size=10_000, window=300, visibility_timeout=600)
    started = time.monotonic()
    proc = daemon(["-c", str(config)], env=aws_env)
    wait_until(lambda: count_messages(sqs, queue.url) == 0, 400,
               message=lambda: f"{len(deliveries(http_app))} records POSTed")
    print(f"received and delivered in {time.monotonic() - started:.1f}s: "
          f"{[(len(request.body), request.headers['x-aws-sqsd-msgcount']) for request in http_app.requests]}")
    assert proc.stop(timeout=30) == 0

    sizes = [len(request.body) for request in http_app.requests]
    counts = [len(records(request)) for request in http_app.requests]
    assert all(size <= MAX_PAYLOAD_BYTES for size in sizes), sizes
    assert counts == [int(request.headers["x-aws-sqsd-msgcount"]) for request in http_app.requests]
    assert sum(sizes) > MAX_PAYLOAD_BYTES  # 10,000 records are more than one POST can hold: two, the first full
    assert len(counts) == 2 and sum(counts) == 10_000 and sizes[0] > MAX_PAYLOAD_BYTES - 2000, (counts, sizes)
    assert sorted(body for body, _ in deliveries(http_app)) == [f"{number:05d}" for number in range(10_000)]
