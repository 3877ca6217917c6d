"""The explorer's SQS model behaves as SQS does where the invariants lean on it, through boto3 over its HTTP front:
FIFO groups, visibility, receive counts and the redrive policy, receipt handles, long polls."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import gevent
import pytest

from tests.support.moto import build_client

from .sqs_server import SqsServer


@pytest.fixture
def server() -> Iterator[SqsServer]:
    server = SqsServer(seed=1)
    yield server
    server.stop()


@pytest.fixture
def sqs(server: SqsServer) -> Any:
    return build_client("sqs", server.url, retries={"mode": "standard", "total_max_attempts": 1})


def bodies(answer: dict[str, Any]) -> list[str]:
    return [message["Body"] for message in answer.get("Messages", [])]


def test_a_fifo_group_with_a_message_in_flight_hands_out_nothing_more_of_it(server: SqsServer, sqs: Any) -> None:
    queue = server.model.create_queue("g.fifo")
    for body, group in (("a1", "a"), ("a2", "a"), ("b1", "b"), ("a3", "a")):
        server.model.send(queue, body, group=group, dedup=body)
    first = sqs.receive_message(QueueUrl=queue.url, MaxNumberOfMessages=2, VisibilityTimeout=30)
    assert bodies(first) == ["a1", "a2"]  # several of one group in one receive, in order
    assert bodies(sqs.receive_message(QueueUrl=queue.url, MaxNumberOfMessages=10)) == ["b1"]
    handle = first["Messages"][0]["ReceiptHandle"]
    sqs.delete_message(QueueUrl=queue.url, ReceiptHandle=handle)
    assert bodies(sqs.receive_message(QueueUrl=queue.url, MaxNumberOfMessages=10)) == []  # a2 still in flight
    sqs.change_message_visibility(QueueUrl=queue.url, ReceiptHandle=first["Messages"][1]["ReceiptHandle"],
                                  VisibilityTimeout=0)
    assert bodies(sqs.receive_message(QueueUrl=queue.url, MaxNumberOfMessages=10)) == ["a2", "a3"]


def test_the_redrive_policy_moves_a_message_on_the_receive_after_max_receive_count(server: SqsServer, sqs: Any) -> None:
    server.model.create_queue("dead")
    queue = server.model.create_queue("source", ("dead", 2))
    server.model.send(queue, "poison")
    counts = []
    for _ in range(2):
        answer = sqs.receive_message(QueueUrl=queue.url, VisibilityTimeout=0,
                                     MessageSystemAttributeNames=["All"])
        counts.append(answer["Messages"][0]["Attributes"]["ApproximateReceiveCount"])
    assert counts == ["1", "2"]
    assert bodies(sqs.receive_message(QueueUrl=queue.url)) == []
    assert [(event.kind, event.detail) for event in server.model.events if event.kind == "moved"] == [("moved", "dead")]
    assert bodies(sqs.receive_message(QueueUrl=server.model.queues["dead"].url)) == ["poison"]
    policy = sqs.get_queue_attributes(QueueUrl=queue.url, AttributeNames=["RedrivePolicy"])["Attributes"]
    assert '"maxReceiveCount": 2' in policy["RedrivePolicy"]


def test_an_old_receipt_handle_changes_no_visibility_and_an_expired_message_is_not_in_flight(
        server: SqsServer, sqs: Any) -> None:
    queue = server.model.create_queue("plain")
    server.model.send(queue, "m")
    old = sqs.receive_message(QueueUrl=queue.url, VisibilityTimeout=0)["Messages"][0]["ReceiptHandle"]
    new = sqs.receive_message(QueueUrl=queue.url, VisibilityTimeout=1)["Messages"][0]["ReceiptHandle"]
    answer = sqs.change_message_visibility_batch(QueueUrl=queue.url, Entries=[
        {"Id": "0", "ReceiptHandle": old, "VisibilityTimeout": 30}])
    assert [entry["Code"] for entry in answer["Failed"]] == ["ReceiptHandleIsInvalid"]
    time.sleep(1.1)
    answer = sqs.change_message_visibility_batch(QueueUrl=queue.url, Entries=[
        {"Id": "0", "ReceiptHandle": new, "VisibilityTimeout": 30}])
    assert [entry["Code"] for entry in answer["Failed"]] == ["AWS.SimpleQueueService.MessageNotInflight"]
    assert sqs.delete_message_batch(QueueUrl=queue.url, Entries=[{"Id": "0", "ReceiptHandle": old}])["Successful"]
    assert [(event.kind, event.stale) for event in server.model.events if event.kind == "delete"] == [("delete", True)]


def test_a_long_poll_returns_as_a_message_arrives(server: SqsServer, sqs: Any) -> None:
    queue = server.model.create_queue("idle")
    gevent.spawn_later(0.3, server.model.send, queue, "late")
    started = time.monotonic()
    assert bodies(sqs.receive_message(QueueUrl=queue.url, WaitTimeSeconds=5)) == ["late"]
    assert time.monotonic() - started < 3
