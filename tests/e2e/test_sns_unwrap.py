"""sns = "unwrap": a queue subscribed to an SNS topic without raw message delivery gets every body wrapped
in SNS's JSON envelope; the app (or the function) gets the published message and its attributes."""

from __future__ import annotations

import base64
import json
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Callable

import pytest

from tests.e2e.helpers import the_one_lambda_record
from tests.support import Daemon, HttpApp, MotoServer, Queue, build_config_file, count_messages, wait_until

PUBLISHED = '{"order": 42, "note": "h\u00e9llo \u2713 \U0001f680"}\r\n\t "trailing" \\u0041 '
ATTRIBUTES = {
    "color": {"DataType": "String", "StringValue": "bl\u00fce"},
    "price": {"DataType": "Number", "StringValue": "12.50"},
    "blob": {"DataType": "Binary", "BinaryValue": b"\x00\x01\xfe\xff"},
}


@pytest.fixture
def topic(moto_server: MotoServer) -> Iterator[tuple[Any, str]]:
    sns = moto_server.client("sns")
    arn = sns.create_topic(Name=f"orders-{uuid.uuid4().hex[:10]}")["TopicArn"]
    yield sns, arn
    sns.delete_topic(TopicArn=arn)


def subscribed_queue(topic: tuple[Any, str], make_queue: Callable[..., Queue]) -> Queue:
    sns, arn = topic
    queue = make_queue()
    sns.subscribe(TopicArn=arn, Protocol="sqs", Endpoint=queue.arn)  # RawMessageDelivery stays false
    return queue


def test_the_app_gets_the_published_message_and_its_attributes(
    daemon: Callable[..., Daemon], aws_env: dict[str, str], http_app: HttpApp, sqs: Any,
    make_queue: Callable[..., Queue], topic: tuple[Any, str], tmp_path: Path,
) -> None:
    queue = subscribed_queue(topic, make_queue)
    sns, arn = topic
    sns.publish(TopicArn=arn, Message=PUBLISHED, MessageAttributes=ATTRIBUTES)
    wrapped = sqs.receive_message(QueueUrl=queue.url, VisibilityTimeout=0)["Messages"][0]["Body"]
    assert json.loads(wrapped)["Message"] == PUBLISHED  # what the queue holds is the envelope
    for body in ("not an envelope", '{"Type": "Other"}'):
        sqs.send_message(QueueUrl=queue.url, MessageBody=body)
    config = build_config_file(tmp_path, queues=[{"name": queue.name, "sns": "unwrap"}],
                               targets={"default": {"type": "http", "url": f"{http_app.url}/work"}})
    proc = daemon(["-c", str(config)], env=aws_env)
    requests = {request.body: request for request in http_app.wait_for_requests(3, timeout=60)}
    wait_until(lambda: count_messages(sqs, queue.url) == 0, 30, message="not deleted")
    assert proc.stop(timeout=30) == 0

    headers = requests[PUBLISHED.encode("utf-8")].headers
    attributes = {name: value for name, value in headers.items() if name.startswith("x-aws-sqsd-attr-")}
    assert attributes == {"x-aws-sqsd-attr-color": "bl\u00fce".encode("utf-8").decode("latin-1"),
                          "x-aws-sqsd-attr-price": "12.50"}  # Binary dropped, as for any message
    assert int(headers["content-length"]) == len(PUBLISHED.encode("utf-8"))
    # bodies that are not envelopes go as they are, with one warning for the queue and a count for each
    assert set(requests) == {PUBLISHED.encode("utf-8"), b"not an envelope", b'{"Type": "Other"}'}
    assert proc.output().count("is not an SNS envelope") == 1


def test_a_function_gets_the_published_message_and_lambda_style_attributes(
    daemon: Callable[..., Daemon], aws_env: dict[str, str], moto_server: MotoServer, moto_lambda_function: str,
    sqs: Any, make_queue: Callable[..., Queue], topic: tuple[Any, str], tmp_path: Path,
) -> None:
    queue = subscribed_queue(topic, make_queue)
    sns, arn = topic
    sns.publish(TopicArn=arn, Message=PUBLISHED, MessageAttributes=ATTRIBUTES)
    config = build_config_file(tmp_path, queues=[{"name": queue.name, "sns": "unwrap"}],
                               targets={"default": {"type": "lambda", "function": moto_lambda_function}})
    proc = daemon(["-c", str(config)], env=aws_env)
    record = the_one_lambda_record(proc, sqs, queue, moto_server, moto_lambda_function)
    assert record["body"] == PUBLISHED
    assert record["messageAttributes"] == {
        "color": {"stringValue": "bl\u00fce", "stringListValues": [], "binaryListValues": [], "dataType": "String"},
        "price": {"stringValue": "12.50", "stringListValues": [], "binaryListValues": [], "dataType": "Number"},
        "blob": {"binaryValue": base64.b64encode(b"\x00\x01\xfe\xff").decode(), "stringListValues": [],
                 "binaryListValues": [], "dataType": "Binary"},
    }
