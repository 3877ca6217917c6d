"""Helpers for in-process tests against moto."""

from __future__ import annotations

from typing import Any

from workerless_gevent.message import Message
from workerless_gevent.sqs import SqsQueue


def receive_exactly(queue: SqsQueue, n: int, wait_seconds: int = 0) -> list[Message]:
    """Receive until `n` messages are in hand (moto may hand out fewer per call)."""
    messages: list[Message] = []
    for _ in range(50):
        messages.extend(queue.receive(min(10, n - len(messages)), wait_seconds))
        if len(messages) >= n:
            return messages
    raise AssertionError(f"received {len(messages)} of {n} messages from {queue.name}")


def visible(sqs: Any, url: str) -> int:
    attrs = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["ApproximateNumberOfMessages"])
    return int(attrs["Attributes"]["ApproximateNumberOfMessages"])
