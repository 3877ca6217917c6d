"""Helpers for in-process tests against moto."""

from __future__ import annotations

from typing import Any, Callable

from tests.support import Queue
from workerless_gevent.config.model import QueueConfig
from workerless_gevent.message import Message
from workerless_gevent.delivery.queue import SqsQueue


def build_sqs_queue(client: Any, queue: Queue, count: Callable[[str, str], None], **settings: Any) -> SqsQueue:
    """SqsQueue for a test queue on `client`, configured by `settings` as a [[queues]] table would."""
    return SqsQueue(client, QueueConfig(name=queue.name, **settings), queue.url, queue.arn, count)


def receive_exactly(queue: SqsQueue, n: int, wait_seconds: int = 0) -> list[Message]:
    """Receive until `n` messages are in hand (moto may hand out fewer per call)."""
    messages: list[Message] = []
    for _ in range(50):
        messages.extend(queue.receive(min(10, n - len(messages)), wait_seconds))
        if len(messages) >= n:
            return messages
    raise AssertionError(f"received {len(messages)} of {n} messages from {queue.name}")
