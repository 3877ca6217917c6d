"""`workerless send`: how an operator enqueues a message (or fakes a cron message) by hand."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from tests.e2e.helpers import workerless_send as send
from tests.support import Queue, write_config


def receive(sqs: Any, url: str) -> list[dict[str, Any]]:
    response = sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10, WaitTimeSeconds=0,
                                   MessageAttributeNames=["All"], MessageSystemAttributeNames=["All"])
    return list(response.get("Messages", []))


def test_send_with_attributes(aws_env: dict[str, str], sqs: Any, make_queue: Callable[..., Queue],
                              tmp_path: Path) -> None:
    queue = make_queue()
    done = send([queue.name, '{"job": 1}', "--attr=beanstalk.sqsd.task_name=backup-job",
                 "--attr=beanstalk.sqsd.path=/backup"], aws_env, tmp_path)
    assert done.returncode == 0, done.stderr
    (message,) = receive(sqs, queue.url)
    assert done.stdout.strip() == message["MessageId"]
    assert message["Body"] == '{"job": 1}'
    assert {name: value["StringValue"] for name, value in message["MessageAttributes"].items()} == {
        "beanstalk.sqsd.task_name": "backup-job", "beanstalk.sqsd.path": "/backup"}


def test_send_twice_to_a_fifo_queue_makes_two_messages(aws_env: dict[str, str], sqs: Any,
                                                      make_queue: Callable[..., Queue], tmp_path: Path) -> None:
    queue = make_queue(fifo=True)  # no content-based deduplication: send must supply an id
    for _ in range(2):
        done = send([queue.url, "same body"], aws_env, tmp_path)
        assert done.returncode == 0, done.stderr
    messages = receive(sqs, queue.url)
    assert [m["Body"] for m in messages] == ["same body", "same body"]
    assert {m["Attributes"]["MessageGroupId"] for m in messages} == {"workerless-send"}


def test_send_uses_the_aws_table_of_the_config(aws_env: dict[str, str], sqs: Any, moto_endpoint: str,
                                               make_queue: Callable[..., Queue], tmp_path: Path) -> None:
    queue = make_queue()
    config = write_config(tmp_path, f"""
        [[queues]]
        name = "{queue.name}"

        [targets.default]
        type = "http"
        url = "http://127.0.0.1:9/"

        [aws]
        region = "us-east-1"
        endpoint_url = "{moto_endpoint}"
        """)
    # No endpoint or region in the environment: only the config's [aws] can lead to moto.
    env = {key: value for key, value in aws_env.items() if key not in ("AWS_ENDPOINT_URL", "AWS_REGION",
                                                                       "AWS_DEFAULT_REGION")}
    done = send([queue.name, "hello", "-c", str(config)], env, tmp_path)
    assert done.returncode == 0, done.stderr
    assert [m["Body"] for m in receive(sqs, queue.url)] == ["hello"]


def test_send_with_a_malformed_attribute_exits_2(aws_env: dict[str, str], tmp_path: Path) -> None:
    done = send(["jobs", "x", "--attr=novalue"], aws_env, tmp_path)
    assert done.returncode == 2
    assert done.stderr.strip() == '--attr: must be NAME=VALUE (got "novalue")'
