"""SQS helpers for tests: unique queues, and reading a queue back without guessing timing."""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Queue:
    name: str
    url: str
    arn: str


def create_queue(sqs: Any, fifo: bool = False, name: str | None = None, **attrs: Any) -> Queue:
    """Create a uniquely named queue so tests never see each other's messages.

    `attrs` are SQS queue attributes (`VisibilityTimeout=30`, `RedrivePolicy=...`); values are
    stringified as the API requires. A FIFO queue gets `FifoQueue=true` and the `.fifo` suffix.
    """
    base = name or f"t-{uuid.uuid4().hex[:12]}"
    attributes = {key: str(value) for key, value in attrs.items()}
    if fifo:
        if not base.endswith(".fifo"):
            base += ".fifo"
        attributes["FifoQueue"] = "true"
    url = sqs.create_queue(QueueName=base, Attributes=attributes)["QueueUrl"]
    arn = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])["Attributes"][
        "QueueArn"
    ]
    return Queue(name=base, url=url, arn=arn)


def drain_bodies(sqs: Any, url: str, max_rounds: int = 1000) -> list[str]:
    """Receive and delete every visible message; return the bodies in receive order.

    Stops at the first empty receive, so messages currently in flight are not waited for.
    """
    bodies: list[str] = []
    for _ in range(max_rounds):
        messages = sqs.receive_message(
            QueueUrl=url, MaxNumberOfMessages=10, WaitTimeSeconds=0
        ).get("Messages", [])
        if not messages:
            return bodies
        bodies.extend(m["Body"] for m in messages)
        sqs.delete_message_batch(
            QueueUrl=url,
            Entries=[
                {"Id": str(i), "ReceiptHandle": m["ReceiptHandle"]}
                for i, m in enumerate(messages)
            ],
        )
    raise AssertionError(f"queue {url} still not empty after {max_rounds} receives")


def count_messages(sqs: Any, url: str) -> int:
    """Visible plus in-flight messages: what is left undeleted (delayed ones not counted).

    Read twice, and the larger kept: moto works the two counts out one after the other, so a message whose
    visibility ends between them is in neither, and one read may say 0 while it is still there. A message
    crosses that line once, so it cannot be missed by both reads."""
    return max(count_once(sqs, url), count_once(sqs, url))


def count_once(sqs: Any, url: str) -> int:
    attrs = sqs.get_queue_attributes(
        QueueUrl=url,
        AttributeNames=["ApproximateNumberOfMessages", "ApproximateNumberOfMessagesNotVisible"],
    )["Attributes"]
    return int(attrs["ApproximateNumberOfMessages"]) + int(
        attrs["ApproximateNumberOfMessagesNotVisible"]
    )


def count_visible(sqs: Any, url: str) -> int:
    """Messages ready to be received now (in-flight and delayed ones not counted)."""
    attrs = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["ApproximateNumberOfMessages"])
    return int(attrs["Attributes"]["ApproximateNumberOfMessages"])


def receive_all(sqs: Any, url: str, **params: Any) -> list[dict[str, Any]]:
    """Receive, without deleting, until a receive comes back empty; `params` go to every receive."""
    messages: list[dict[str, Any]] = []
    while True:
        batch = sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10, WaitTimeSeconds=0,
                                    MessageAttributeNames=["All"], **params).get("Messages", [])
        if not batch:
            return messages
        messages.extend(batch)
