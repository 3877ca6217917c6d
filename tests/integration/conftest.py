"""In-process fixtures: workerless_gevent parts wired to moto, with real messages received from it."""

from __future__ import annotations

from typing import Any, Callable

import pytest

from tests.integration.helpers import build_sqs_queue
from tests.support import Queue
from workerless_gevent.metrics import Registry
from workerless_gevent.delivery.queue import SqsQueue


@pytest.fixture
def registry() -> Registry:
    return Registry()


@pytest.fixture
def sqs_queue(sqs: Any, make_queue: Callable[..., Queue], registry: Registry) -> Callable[..., SqsQueue]:
    """`sqs_queue(queue=None, **QueueConfig fields) -> SqsQueue` on moto (a fresh queue by default)."""

    def make(queue: Queue | None = None, **settings: Any) -> SqsQueue:
        return build_sqs_queue(sqs, queue or make_queue(), registry.count, **settings)

    return make
