"""delivery/payloads.py on moto: S3 payloads fetched before delivery and deleted after success only,
SNS envelopes unwrapped, the failures a target never sees, and on a FIFO queue the rest of a group released
behind a message that did not succeed."""

from __future__ import annotations

import json
import logging
import uuid
from typing import Any, Callable

import pytest

from tests.integration.helpers import receive_exactly
from tests.support import HttpApp
from workerless_gevent.config.model import HttpTargetConfig, QueueConfig
from workerless_gevent.delivery.payloads import PayloadStore, Prepared, Preparer
from workerless_gevent.delivery.queue import SqsQueue
from workerless_gevent.envelopes import PayloadPointer, pointer_body
from workerless_gevent.message import Message
from workerless_gevent.metrics import Registry
from workerless_gevent.targets import SUCCESS, Outcome, QueueInfo, Result
from workerless_gevent.targets.http import HttpTarget
from workerless_gevent.targets.http_batch import BatchHttpTarget

PAYLOAD = ("\u00e9\u2713 {\"k\": [1, 2]}\r\n" * 60000)[:1048576]


def offloaded(sqs: Any, s3: Any, queue: SqsQueue, bucket: str, payload: str | None, **extra: Any) -> str:
    """Send a pointer message as an extended client would; `payload` None leaves the object out."""
    key = str(uuid.uuid4())
    if payload is not None:
        s3.put_object(Bucket=bucket, Key=key, Body=payload.encode("utf-8"))
    size = {"ExtendedPayloadSize": {"DataType": "Number", "StringValue": str(len((payload or "").encode()))},
            "color": {"DataType": "String", "StringValue": "blue"}}
    sqs.send_message(QueueUrl=queue.url, MessageBody=pointer_body(PayloadPointer(bucket, key)),
                     MessageAttributes=size, **extra)
    return key


def prepare(preparer: Preparer, config: QueueConfig, messages: list[Message]) -> Prepared:
    """What a queue with large_payloads or sns = "unwrap" gets from the preparer: always a Prepared."""
    prepared = preparer.prepare(config, messages)
    assert prepared is not None
    return prepared


def test_a_1_mib_payload_is_fetched_and_the_message_is_as_its_sender_wrote_it(
    sqs: Any, s3: Any, bucket: str, sqs_queue: Callable[..., SqsQueue], registry: Registry,
) -> None:
    queue = sqs_queue(large_payloads=True)
    offloaded(sqs, s3, queue, bucket, PAYLOAD)
    (message,) = receive_exactly(queue, 1)
    prepared = prepare(Preparer(PayloadStore(s3), registry), queue.config, [message])
    (item,) = prepared.items
    assert isinstance(item, Message)
    assert item.body == PAYLOAD and len(item.body.encode("utf-8")) > 1_000_000
    assert item.message_attributes == {"color": {"DataType": "String", "StringValue": "blue"}}
    assert json.loads(message.body)[1]["s3BucketName"] == bucket  # the received one stays the pointer
    assert prepared.pointers == []  # no delete_payloads


@pytest.mark.parametrize("missing", ["object", "bucket"])
def test_a_missing_payload_is_a_failure_the_target_never_sees(
    sqs: Any, s3: Any, bucket: str, sqs_queue: Callable[..., SqsQueue], registry: Registry, http_app: HttpApp,
    missing: str,
) -> None:
    queue = sqs_queue(large_payloads=True)
    offloaded(sqs, s3, queue, bucket if missing == "object" else "no-such-bucket-here", None)
    sqs.send_message(QueueUrl=queue.url, MessageBody="ordinary")
    messages = sorted(receive_exactly(queue, 2), key=lambda message: message.body == "ordinary")
    prepared = prepare(Preparer(PayloadStore(s3), registry), queue.config, messages)
    failure, ordinary = prepared.items
    assert isinstance(failure, Outcome) and failure.error_type == "PayloadNotFound", failure
    assert "s3://" in failure.error
    target = HttpTarget(HttpTargetConfig(name="default", url=http_app.url + "/work"))
    try:
        outcomes = prepared.deliver(target, QueueInfo(queue.name, queue.arn, "us-east-1", False))
    finally:
        target.close()
    assert outcomes == [failure, SUCCESS]
    assert [request.body for request in http_app.requests] == [b"ordinary"]


def test_in_a_fifo_queue_the_rest_of_a_group_is_released_behind_a_failed_payload(
    sqs: Any, s3: Any, bucket: str, sqs_queue: Callable[..., SqsQueue], make_queue: Callable[..., Any],
    registry: Registry, http_app: HttpApp,
) -> None:
    queue = sqs_queue(make_queue(fifo=True), large_payloads=True)
    for index, payload in enumerate(["first", None, "third"]):
        offloaded(sqs, s3, queue, bucket, payload, MessageGroupId="g", MessageDeduplicationId=f"g{index}")
    offloaded(sqs, s3, queue, bucket, "other group", MessageGroupId="h", MessageDeduplicationId="h0")
    messages = receive_exactly(queue, 4)
    assert [message.group_id for message in messages] == ["g", "g", "g", "h"]
    prepared = prepare(Preparer(PayloadStore(s3), registry), queue.config, messages)
    # "third" is not failed with the missing payload's error (a try spent, dead-lettered undelivered): released
    assert [item.body if isinstance(item, Message) else item.result.value for item in prepared.items] == [
        "first", "failure", "released", "other group"]
    target = BatchHttpTarget(HttpTargetConfig(name="default", url=http_app.url + "/sqs", batch_size=10))
    try:
        outcomes = prepared.deliver(target, QueueInfo(queue.name, queue.arn, "us-east-1", True))
    finally:
        target.close()
    assert [outcome.result for outcome in outcomes] == [Result.SUCCESS, Result.FAILURE, Result.RELEASED,
                                                        Result.SUCCESS]
    assert [[record["body"] for record in json.loads(request.body)["Records"]] for request in http_app.requests] == [
        ["first", "other group"]]


def test_in_a_fifo_queue_a_failed_payload_is_released_behind_a_group_mate_the_app_failed(
    sqs: Any, s3: Any, bucket: str, sqs_queue: Callable[..., SqsQueue], make_queue: Callable[..., Any],
    registry: Registry, http_app: HttpApp,
) -> None:
    queue = sqs_queue(make_queue(fifo=True), large_payloads=True)
    for index, payload in enumerate(["first", None, "third"]):
        offloaded(sqs, s3, queue, bucket, payload, MessageGroupId="g", MessageDeduplicationId=f"g{index}")
    messages = receive_exactly(queue, 3)
    prepared = prepare(Preparer(PayloadStore(s3), registry), queue.config, messages)
    http_app.set_status(500)
    target = BatchHttpTarget(HttpTargetConfig(name="default", url=http_app.url + "/sqs", batch_size=10))
    try:
        outcomes = prepared.deliver(target, QueueInfo(queue.name, queue.arn, "us-east-1", True))
    finally:
        target.close()
    # FIFO's one rule: the first of the group that did not succeed keeps its outcome, the rest are released
    assert [(outcome.result, outcome.error_type) for outcome in outcomes] == [
        (Result.FAILURE, "HTTP 500"), (Result.RELEASED, "BehindFailure"), (Result.RELEASED, "BehindFailure")]


def test_delete_payloads_deletes_the_objects_of_successes_only(
    sqs: Any, s3: Any, bucket: str, sqs_queue: Callable[..., SqsQueue], registry: Registry,
) -> None:
    queue = sqs_queue(large_payloads=True, delete_payloads=True)
    keys = [offloaded(sqs, s3, queue, bucket, f"payload {index}") for index in range(2)]
    messages = receive_exactly(queue, 2)
    preparer = Preparer(PayloadStore(s3), registry)
    prepared = prepare(preparer, queue.config, messages)
    by_key = {json.loads(message.body)[1]["s3Key"]: index for index, message in enumerate(messages)}
    outcomes = [SUCCESS, SUCCESS]
    outcomes[by_key[keys[1]]] = Outcome.failure("HTTP 500", "the app answered HTTP 500")
    preparer.finish(queue.config, prepared, outcomes)
    left = [item["Key"] for item in s3.list_objects_v2(Bucket=bucket).get("Contents", [])]
    assert left == [keys[1]]


def test_not_an_envelope_is_delivered_as_it_is_counted_each_time_and_logged_once(
    sqs: Any, sqs_queue: Callable[..., SqsQueue], registry: Registry, caplog: pytest.LogCaptureFixture,
) -> None:
    queue = sqs_queue(sns="unwrap")
    for body in ("not an envelope", '{"Type": "Other"}'):
        sqs.send_message(QueueUrl=queue.url, MessageBody=body)
    messages = receive_exactly(queue, 2)
    preparer = Preparer(None, registry)
    with caplog.at_level(logging.WARNING, logger="workerless_gevent.delivery.payloads"):
        items = prepare(preparer, queue.config, messages).items + prepare(preparer, queue.config, messages).items
    assert items == messages + messages  # the very objects: nothing copied, nothing changed
    assert registry.total("NotSnsEnvelope", queue.name) == 4
    warnings = [record.getMessage() for record in caplog.records]
    assert len(warnings) == 1 and f"queue={queue.name}" in warnings[0] and "NotSnsEnvelope" in warnings[0]


def test_a_queue_with_neither_setting_hands_its_messages_over_untouched(
    sqs: Any, sqs_queue: Callable[..., SqsQueue], registry: Registry,
) -> None:
    queue = sqs_queue()
    size = {"ExtendedPayloadSize": {"DataType": "Number", "StringValue": "5"}}
    sqs.send_message(QueueUrl=queue.url, MessageBody=pointer_body(PayloadPointer("b", "k")), MessageAttributes=size)
    messages = receive_exactly(queue, 1)
    assert Preparer(None, registry).prepare(queue.config, messages) is None  # no Prepared: the work's own list goes
