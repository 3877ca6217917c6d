"""Helpers for in-process tests against moto."""

from __future__ import annotations

from typing import Any, Callable

import boto3

from tests.support import Queue
from workerless_gevent.config.model import QueueConfig
from workerless_gevent.message import Message
from workerless_gevent.delivery.queue import SqsQueue
from workerless_gevent.wire.sqs import SqsWire


def build_sqs_queue(client: Any, queue: Queue, count: Callable[[str, str], None], **settings: Any) -> SqsQueue:
    """SqsQueue for a test queue on the endpoint of `client` (a boto3 SQS client), configured by `settings` as
    a [[queues]] table would, on the wire as `aws.clients.build_clients` builds it for the daemon."""
    wire = SqsWire.for_client(client, boto3.session.Session().get_credentials(), concurrency=20, read_timeout=30)
    return SqsQueue(wire, QueueConfig(name=queue.name, **settings), queue.url, queue.arn, count)


def receive_exactly(queue: SqsQueue, n: int, wait_seconds: int = 0) -> list[Message]:
    """Receive until `n` messages are in hand (moto may hand out fewer per call)."""
    messages: list[Message] = []
    for _ in range(50):
        messages.extend(queue.receive(min(10, n - len(messages)), wait_seconds))
        if len(messages) >= n:
            return messages
    raise AssertionError(f"received {len(messages)} of {n} messages from {queue.name}")
