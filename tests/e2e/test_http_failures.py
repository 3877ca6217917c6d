"""HTTP target failures through the real daemon: retry later, dead-letter the poison, obey Retry-After."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Callable

from tests.e2e.helpers import send_batch
from tests.support import (
    Daemon,
    HttpApp,
    Queue,
    RecordedRequest,
    build_config_file,
    count_messages,
    drain_bodies,
    wait_until,
)

POISON = '{"poison": "p\u00f6ison \u2620", "crlf": "a\\r\\nb"}\n  \t'


def http_config(tmp_path: Path, app: HttpApp, queue: Queue, concurrency: int = 1, **queue_keys: Any) -> Path:
    return build_config_file(tmp_path, concurrency=concurrency, shutdown_timeout=5, polling={"poll_for": 20},
                             queues=[{"name": queue.name, "error_visibility_timeout": 2, **queue_keys}],
                             targets={"default": {"type": "http", "url": f"{app.url}/work"}})


def receive_counts(requests: list[RecordedRequest]) -> list[str]:
    return [request.headers["x-aws-sqsd-receive-count"] for request in requests]


def gaps(requests: list[RecordedRequest]) -> list[float]:
    return [later.arrived - earlier.arrived for earlier, later in zip(requests, requests[1:])]


def test_500_keeps_the_message_and_retries_after_the_error_visibility_timeout(
    daemon: Callable[..., Daemon], aws_env: dict[str, str], http_app: HttpApp,
    sqs: Any, make_queue: Callable[..., Queue], tmp_path: Path,
) -> None:
    queue = make_queue()
    http_app.set_status(500, body=b"internal error")
    sqs.send_message(QueueUrl=queue.url, MessageBody="retry me")
    proc = daemon(["-c", str(http_config(tmp_path, http_app, queue))], env=aws_env)
    requests = http_app.wait_for_requests(3, timeout=60)[:3]
    assert proc.stop(timeout=30) == 0

    print("gaps between 500 retries:", [f"{gap:.2f}s" for gap in gaps(requests)])
    assert receive_counts(requests) == ["1", "2", "3"]
    assert {request.body for request in requests} == {b"retry me"}
    assert len({request.headers["x-aws-sqsd-msgid"] for request in requests}) == 1
    # visible again after error_visibility_timeout = 2, not at once and not after the queue's 300 s
    assert all(1.8 <= gap < 6 for gap in gaps(requests)), gaps(requests)
    # still in the queue (not drained: the watcher's long poll, abandoned at stop, may hold it)
    assert count_messages(sqs, queue.url) == 1
    assert "outcome=failure type=HTTP 500" in proc.output()


def test_poison_message_ends_in_the_dead_letter_queue_byte_identical(
    daemon: Callable[..., Daemon], aws_env: dict[str, str], http_app: HttpApp,
    sqs: Any, make_queue: Callable[..., Queue], tmp_path: Path,
) -> None:
    queue, dlq = make_queue(), make_queue()
    http_app.set_status(500)
    attributes = {"tenant": {"DataType": "String", "StringValue": "acme"},
                  "blob": {"DataType": "Binary", "BinaryValue": b"\x00\xff"}}
    message_id = sqs.send_message(QueueUrl=queue.url, MessageBody=POISON,
                                  MessageAttributes=attributes)["MessageId"]
    config = http_config(tmp_path, http_app, queue, max_retries=2, dead_letter_queue=dlq.name)
    proc = daemon(["-c", str(config)], env=aws_env)
    wait_until(lambda: count_messages(sqs, dlq.url) == 1, 60, message="nothing dead-lettered")
    wait_until(lambda: count_messages(sqs, queue.url) == 0, 30, message="source not deleted")
    assert proc.stop(timeout=30) == 0

    assert receive_counts(http_app.requests) == ["1", "2"]  # delivered max_retries times, no more
    (dead,) = sqs.receive_message(QueueUrl=dlq.url, MessageAttributeNames=["All"],
                                  MessageSystemAttributeNames=["All"])["Messages"]
    assert dead["Body"] == POISON
    assert dead["Body"].encode("utf-8") == http_app.requests[0].body
    ours = {name: value for name, value in dead["MessageAttributes"].items() if name.startswith("workerless.")}
    assert ours["workerless.source_queue"] == {"DataType": "String", "StringValue": queue.name}
    assert ours["workerless.receive_count"] == {"DataType": "Number", "StringValue": "2"}
    assert ours["workerless.error"]["DataType"] == "String"
    assert "HTTP 500" in ours["workerless.error"]["StringValue"]
    assert set(ours) == {"workerless.source_queue", "workerless.receive_count", "workerless.error"}
    assert dead["MessageAttributes"]["tenant"] == attributes["tenant"]
    assert dead["MessageAttributes"]["blob"] == attributes["blob"]
    assert http_app.requests[0].headers["x-aws-sqsd-msgid"] == message_id
    assert "dead-lettered to" in proc.output()
    assert drain_bodies(sqs, dlq.url) == [] and count_messages(sqs, queue.url) == 0


def test_429_with_retry_after_retries_after_that_long_and_pauses_the_target(
    daemon: Callable[..., Daemon], aws_env: dict[str, str], http_app: HttpApp,
    sqs: Any, make_queue: Callable[..., Queue], tmp_path: Path,
) -> None:
    queue = make_queue()
    answers = [(429, {"Retry-After": "2"}, b"slow down")]
    http_app.respond = lambda request: answers.pop(0) if answers else (200, {}, b"")
    send_batch(sqs, queue.url, ["first", "second"])
    proc = daemon(["-c", str(http_config(tmp_path, http_app, queue))], env=aws_env)
    wait_until(lambda: count_messages(sqs, queue.url) == 0, 60,
               message=lambda: f"requests: {[(r.body, r.arrived) for r in http_app.requests]}")
    assert proc.stop(timeout=30) == 0

    requests = http_app.requests
    assert len(requests) == 3
    throttled = requests[0]
    retried = [r for r in requests[1:] if r.body == throttled.body]
    assert len(retried) == 1 and receive_counts(retried) == ["2"]
    waited = retried[0].arrived - throttled.arrived
    paused = min(r.arrived for r in requests[1:]) - throttled.arrived
    print(f"429 Retry-After 2: retried after {waited:.2f}s; next delivery of any message after {paused:.2f}s")
    assert 1.9 <= waited < 5
    assert paused >= 1.9  # the target was paused, so the other buffered message waited too
    assert "asked to retry in 2s" in proc.output()
    assert "delivered=2 failed=0" in proc.output()
