"""Backlog, the queue-side scaling signal: visible plus in-flight messages of each queue, read with one
GetQueueAttributes per queue per metrics interval and published as the registry's `Backlog` gauge."""

from __future__ import annotations

import logging
import random
from collections.abc import Iterator, Mapping
from typing import Any

import gevent.event

from ..config.model import Config
from ..delivery.queue import SqsQueue
from ..errors import AWS_ERRORS, describe_error
from ..logs import fields
from ..metrics import Registry

logger = logging.getLogger(__name__)

BACKLOG_ATTRIBUTES = ["ApproximateNumberOfMessages", "ApproximateNumberOfMessagesNotVisible"]


def watch_backlog(config: Config, sqs: Any, queues: Mapping[str, SqsQueue], registry: Registry,
                  rng: random.Random) -> BacklogWatch | None:
    """The watch and its `Backlog` gauge, only when something reads them (CloudWatch with `name`, or the
    status server's /metrics): otherwise an idle daemon makes no request beyond its long polls."""
    if not (config.name or config.status_listen):
        return None
    watch = BacklogWatch(sqs, QueueUrls(queues), config.metrics_interval, registry, rng)
    registry.track_gauge("Backlog", lambda: dict(watch.values))
    return watch


class QueueUrls(Mapping[str, str]):
    """The URLs of the queues now running, read at each refresh: a reload adds and removes queues."""

    def __init__(self, queues: Mapping[str, SqsQueue]) -> None:
        self.queues = queues

    def __getitem__(self, name: str) -> str:
        return self.queues[name].url

    def __iter__(self) -> Iterator[str]:
        return iter(list(self.queues))

    def __len__(self) -> int:
        return len(self.queues)


class BacklogWatch:
    """Every interval, each queue's backlog; a queue whose last read failed has no value (never a stale one)."""

    def __init__(self, sqs: Any, queue_urls: Mapping[str, str], interval_seconds: float, registry: Registry,
                 rng: random.Random) -> None:
        self.sqs = sqs  # an wire.sqs.SqsWire or a boto3 SQS client: both take get_queue_attributes
        self.queue_urls = queue_urls  # read at each refresh
        self.interval_seconds = interval_seconds
        self.registry = registry
        self.rng = rng
        self.values: dict[str, float] = {}
        self.failures: dict[str, int] = {}  # failed reads in a row, per queue

    def run(self, stopped: gevent.event.Event) -> None:
        """A first read at once, so the gauge exists within seconds of the start; then every interval."""
        while True:
            self.refresh()
            if stopped.wait(self.interval_seconds * self.rng.uniform(0.9, 1.1)):
                return

    def refresh(self) -> None:
        for gone in [name for name in self.values if name not in self.queue_urls]:
            del self.values[gone]
        for name, url in list(self.queue_urls.items()):
            value = self.read(name, url)
            if value is None:
                self.values.pop(name, None)
            else:
                self.values[name] = value

    def read(self, name: str, url: str) -> float | None:
        """One GetQueueAttributes (the wire's timeouts and retries bound it); a failure is logged and counted."""
        self.registry.count(name, "SqsRequests")
        try:
            attributes = self.sqs.get_queue_attributes(QueueUrl=url, AttributeNames=BACKLOG_ATTRIBUTES)["Attributes"]
            value = float(sum(int(attributes[attribute]) for attribute in BACKLOG_ATTRIBUTES))
        except (*AWS_ERRORS, KeyError, ValueError, TypeError) as error:
            self.failed(name, error)
            return None
        failures = self.failures.pop(name, 0)
        if failures:
            logger.info("queue=%s backlog read again after %d failures", name, failures, extra=fields(queue=name))
        return value

    def failed(self, name: str, error: BaseException) -> None:
        self.registry.count(name, "BacklogFailed")
        failures = self.failures[name] = self.failures.get(name, 0) + 1
        text = describe_error(error) if isinstance(error, AWS_ERRORS) else f"unexpected answer ({error!r})"
        log = logger.warning if failures == 1 or failures % 10 == 0 else logger.debug
        log("queue=%s cannot read the backlog (%d in a row; the Backlog metric is left out meanwhile): %s",
            name, failures, text, extra=fields(queue=name))
