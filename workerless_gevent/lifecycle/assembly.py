"""Turns a Config and clients into live parts: resolved queues, targets, the facts targets get about a queue."""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import Any

import gevent.event

from ..aws.clients import Clients
from ..config.model import Config, HttpTargetConfig, QueueConfig, TargetConfig
from ..delivery.payloads import PayloadStore, Preparer
from ..delivery.queue import SqsQueue
from ..errors import AWS_ERRORS, describe_error
from ..errors import StartupError
from ..idempotency.guard import Idempotency
from ..idempotency.store import IdempotencyStore
from ..metrics import Registry
from ..targets import QueueInfo, Target
from ..targets.aws_lambda import LambdaTarget
from ..targets.http_batch import build_http_target


@dataclass(frozen=True, slots=True)
class Parts:
    queues: dict[str, SqsQueue]
    dead_letter_queues: dict[str, SqsQueue]  # source queue name -> its dead-letter queue
    targets: dict[str, Target]
    queue_infos: dict[str, QueueInfo]
    preparer: Preparer = field(default_factory=lambda: Preparer(None, Registry()))  # SNS envelopes, S3 payloads


def resolve_queue(sqs: Any, config: QueueConfig, registry: Registry) -> SqsQueue:
    """Find a queue's URL and ARN once at start; an unknown queue is a startup error, not a loop."""
    try:
        url = config.url or sqs.get_queue_url(QueueName=config.name)["QueueUrl"]
        attributes = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn", "RedrivePolicy"])["Attributes"]
    except AWS_ERRORS as error:
        raise StartupError(f"queue {config.name}: {describe_error(error)}") from None
    queue = SqsQueue(sqs, config, url, attributes["QueueArn"], registry.count)
    queue.has_redrive_policy = bool(attributes.get("RedrivePolicy"))
    return queue


def config_warnings(config: Config, queues: dict[str, SqsQueue] | None = None) -> list[str]:
    """What `check` and the start warn of: settings that work, but not as their writer likely meant."""
    return dead_letter_warnings(config, queues) + connection_warnings(config)


def connection_warnings(config: Config) -> list[str]:
    """An HTTP target with fewer connections than the deliveries that can reach it at once keeps the other slots
    waiting for a connection, their messages received and hidden meanwhile (Beanstalk ties both to one setting)."""
    warnings = []
    for name, target in config.targets.items():
        if not isinstance(target, HttpTargetConfig):
            continue
        from_queues = sum(queue.max_concurrency or config.concurrency
                          for queue in config.queues if queue.target == name)
        at_once = min(config.concurrency, target.max_concurrency or config.concurrency, from_queues)
        if target.max_connections < at_once:
            warnings.append(f"target {name}: max_connections = {target.max_connections} is below the {at_once} "
                            f"deliveries that can reach it at once (concurrency = {config.concurrency}): the others "
                            f"wait for a connection, their messages received and hidden; raise max_connections as far "
                            f"as the app can take, or set the target's max_concurrency")
    return warnings


def dead_letter_warnings(config: Config, queues: dict[str, SqsQueue] | None = None) -> list[str]:
    """A queue with neither our dead_letter_queue nor an SQS redrive policy retries a poison message forever."""
    warnings = []
    for queue in config.queues:
        if queue.dead_letter_queue:
            continue
        if queues is None:
            warnings.append(f"queue {queue.name}: no dead_letter_queue; unless its SQS redrive policy names one, a "
                            f"message that always fails is retried until retention_period (check --online looks)")
        elif not queues[queue.name].has_redrive_policy:
            warnings.append(f"queue {queue.name}: no dead_letter_queue and no SQS redrive policy; a message that "
                            f"always fails is retried until retention_period")
    return warnings


def build_parts(config: Config, clients: Clients, registry: Registry, rng: random.Random) -> Parts:
    queues = {queue.name: resolve_queue(clients.sqs, queue, registry) for queue in config.queues}
    dead_letter_queues = {queue.name: resolve_dead_letter_queue(clients.sqs, queue, registry)
                          for queue in config.queues if queue.dead_letter_queue}
    targets = {name: build_target(target, clients, rng, config.aws.ca_bundle) for name, target in config.targets.items()}
    infos = {name: queue_info(queue, clients) for name, queue in queues.items()}
    store = PayloadStore(clients.s3) if clients.s3 is not None else None
    return Parts(queues, dead_letter_queues, targets, infos, Preparer(store, registry))


def resolve_dead_letter_queue(sqs: Any, config: QueueConfig, registry: Registry) -> SqsQueue:
    return resolve_queue(sqs, QueueConfig(name=config.dead_letter_queue or ""), registry)


def build_target(config: TargetConfig, clients: Clients, rng: random.Random, ca_bundle: str | None) -> Target:
    if isinstance(config, HttpTargetConfig):
        return build_http_target(config, ca_bundle=ca_bundle)
    if config.endpoint_url is None:
        return LambdaTarget(config, clients.lambda_, rng)
    if clients.build_lambda_endpoint is None:  # never Lambda's own endpoint in place of the one the target names
        raise StartupError(f"targets.{config.name}.endpoint_url: the daemon was built without Lambda endpoints")
    return LambdaTarget(config, clients.build_lambda_endpoint(config), rng, owns_client=True)


def queue_info(queue: SqsQueue, clients: Clients) -> QueueInfo:
    return QueueInfo(name=queue.name, arn=queue.arn, region=clients.region, is_fifo=queue.config.is_fifo)


def build_idempotency(config: Config, clients: Clients, registry: Registry, rng: random.Random,
                      stopping: gevent.event.Event) -> Idempotency | None:
    """[idempotency] on the daemon's DynamoDB client, or on one built now (a reload that adds it)."""
    if config.idempotency is None:
        return None
    dynamodb = clients.idempotency
    if dynamodb is None and clients.build_idempotency is not None:
        dynamodb = clients.build_idempotency(config)
    if dynamodb is None:  # never delivered without the claims the configuration asks for
        raise StartupError("[idempotency] needs a restart (the daemon started without a DynamoDB client and cannot "
                           "build one now)")
    return Idempotency(config, IdempotencyStore(dynamodb, config.idempotency.table), registry.count, rng, stopping)

