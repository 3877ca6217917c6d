"""AWS clients, built once before anything is spawned, with explicit timeouts and retries: our own wire for
SQS, botocore clients for the rest, all on one botocore session (boto3 adds nothing the daemon uses)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import gevent.event

from ..config.model import AwsConfig, Config, LambdaTargetConfig, wire_services
from ..wire.sqs import SqsWire, proxy_for
from .lambda_endpoints import lambda_endpoint_builder
from .session import build_session, service_endpoint, trusted_ca_bundle

if TYPE_CHECKING:  # botocore's session and clients are imported where built: see aws.child
    import botocore.session

    from ..wire.aws_lambda import LambdaWire

IDEMPOTENCY_READ_SECONDS = 5.0  # a claim is on a receive's path: a silent DynamoDB must fail it soon
COMMAND_ATTEMPTS = 5  # per call of a command: an operator waits, a daemon's loop would retry instead


@dataclass(frozen=True, slots=True)
class Clients:
    sqs: Any  # every SQS call of the daemon (SqsCalls): a wire.sqs.SqsWire, or BotocoreSqs where the wire cannot go
    lambda_: Any | None  # Invoke: a wire.aws_lambda.LambdaWire, or the boto3 client where the wire cannot go
    cloudwatch: Any | None
    region: str
    dynamodb: Any | None = None  # only with a [periodic] claims_table or a [fleet]
    renew_credentials: Callable[[gevent.event.Event], None] | None = None  # a loop, with aws.child's credentials
    s3: Any | None = None  # only when a queue has large_payloads
    idempotency: Any | None = None  # DynamoDB for idempotent delivery (a wire.dynamodb.DynamoDbWire): a queue has a key
    # builds `idempotency` for a configuration, when a reload adds [idempotency] (None: only a restart can)
    build_idempotency: Callable[[Config], Any] | None = None
    # the Invoke wire of a Lambda target with its own endpoint_url (aws.lambda_endpoints), at start or at a reload
    build_lambda_endpoint: Callable[[LambdaTargetConfig], Any] | None = None


def build_clients(config: Config, region: str | None = None, session: botocore.session.Session | None = None) -> Clients:
    """One session (the one the CLI resolved the region with, `region.resolve_region`), one client per
    service in that region; boto3's chain supplies credentials and endpoints.

    SQS goes on our own wire, whose endpoint is worked out without building a botocore client: a client
    loads botocore's endpoint data (about 7 MB resident and 60 ms). Only where the wire cannot follow
    botocore (a proxy, FIPS or dual-stack endpoints) is the boto3 client built instead."""
    import botocore.config

    session = session or build_session(config.aws.profile)
    region = region or default_region(config, session)
    endpoint: dict[str, Any] = {"endpoint_url": config.aws.endpoint_url} if config.aws.endpoint_url else {}
    # botocore's trust for every client and the wire alike; never the system store alone, which a slim
    # container may not have.
    ca_bundle = trusted_ca_bundle(config.aws.ca_bundle, session)
    endpoint["verify"] = ca_bundle
    sqs = build_sqs(config, region, session, endpoint, ca_bundle)
    lambda_: Any = None
    if "lambda" in wire_services(config):
        lambda_url = service_endpoint(session, "lambda", region, config.aws.endpoint_url)
        if wire_serves(lambda_url):
            assert lambda_url is not None
            lambda_ = build_lambda_wire(config, region, lambda_url, session.get_credentials(), ca_bundle)
        else:
            lambda_ = session.create_client("lambda", region_name=region, config=botocore.config.Config(
                max_pool_connections=config.concurrency + 10, connect_timeout=5,
                read_timeout=lambda_read_timeout(config), tcp_keepalive=True,
                retries={"mode": "standard", "total_max_attempts": 1}), **endpoint)
    # CloudWatch and DynamoDB: a call now and then, off the hot path, with botocore's own client.
    side_config = botocore.config.Config(connect_timeout=5, read_timeout=10,
                                         retries={"mode": "standard", "total_max_attempts": 3})
    cloudwatch = None
    if config.name:
        cloudwatch = session.create_client("cloudwatch", region_name=region, config=side_config, **endpoint)
    dynamodb = None
    if config.fleet is not None:  # a lease renewal that hangs must fail well inside a third of the lease
        dynamodb = session.create_client("dynamodb", region_name=region, config=botocore.config.Config(
            connect_timeout=2, read_timeout=max(2.0, config.fleet.lease / 5),
            retries={"mode": "standard", "total_max_attempts": 3}), **endpoint)
    elif config.periodic is not None and config.periodic.claims_table:
        dynamodb = session.create_client("dynamodb", region_name=region, config=side_config, **endpoint)
    s3 = None
    if any(queue.large_payloads for queue in config.queues):
        s3 = session.create_client("s3", region_name=region, config=s3_config(config), **endpoint)
    idempotency = build_idempotency(config, region, session, endpoint, ca_bundle) if config.idempotency else None
    return Clients(sqs=sqs, lambda_=lambda_, cloudwatch=cloudwatch, region=region, dynamodb=dynamodb, s3=s3,
                   idempotency=idempotency,
                   build_idempotency=lambda reloaded: build_idempotency(reloaded, region, session, endpoint, ca_bundle),
                   build_lambda_endpoint=lambda_endpoint_builder(region, session.get_credentials(), ca_bundle,
                                                                 config.concurrency))


def build_command_client(session: Any, aws: AwsConfig, region: str, service: str) -> Any:
    """The botocore client of a one-shot command (send, stats, redrive): the region the CLI resolved, [aws]
    endpoint_url else botocore's endpoint chain (AWS_ENDPOINT_URL...), botocore's trust, and every call
    retried in standard mode (throttles, 5xx, connection errors; capped exponential backoff with jitter)."""
    import botocore.config

    options: dict[str, Any] = {"region_name": region, "verify": trusted_ca_bundle(aws.ca_bundle, session)}
    if aws.endpoint_url:
        options["endpoint_url"] = aws.endpoint_url
    retries = botocore.config.Config(connect_timeout=5, read_timeout=30,
                                     retries={"mode": "standard", "total_max_attempts": COMMAND_ATTEMPTS})
    return session.create_client(service, config=retries, **options)


def wire_serves(url: str | None) -> bool:
    """The one choice between our wire and botocore's client, for SQS and Lambda alike: the wire, unless
    the calls must go through a proxy, or botocore's endpoint rules give no plain URL (FIPS, dual-stack)."""
    return url is not None and proxy_for(url) is None


def build_sqs(config: Config, region: str, session: botocore.session.Session, endpoint: dict[str, Any],
              ca_bundle: str) -> Any:
    """Every SQS call of the daemon (`delivery.queue.SqsCalls`): the wire, or botocore's client behind the
    same calls."""
    import botocore.config

    url = service_endpoint(session, "sqs", region, config.aws.endpoint_url)
    if wire_serves(url):
        assert url is not None
        return build_sqs_wire(config, region, url, session.get_credentials(), ca_bundle)
    connections, read_timeout = sqs_limits(config)
    client = session.create_client("sqs", region_name=region, config=botocore.config.Config(
        max_pool_connections=connections, connect_timeout=5, read_timeout=read_timeout, tcp_keepalive=True,
        retries={"mode": "standard", "total_max_attempts": 3}), **endpoint)
    return BotocoreSqs(client)


class BotocoreSqs:
    """botocore's SQS client with the wire's calls: a batch call takes the `deadline` the wire's retries
    stop at, which botocore's own retries (3 attempts, within seconds) do not know; the rest is the client's."""

    def __init__(self, client: Any) -> None:
        self.client = client

    def __getattr__(self, name: str) -> Any:
        return getattr(self.client, name)

    def delete_message_batch(self, *, deadline: float | None = None, **params: Any) -> dict[str, Any]:
        return dict(self.client.delete_message_batch(**params))

    def change_message_visibility_batch(self, *, deadline: float | None = None, **params: Any) -> dict[str, Any]:
        return dict(self.client.change_message_visibility_batch(**params))


def build_idempotency(config: Config, region: str, session: botocore.session.Session, endpoint: dict[str, Any],
                      ca_bundle: str) -> Any:
    """DynamoDB for the claims of idempotent delivery, one or two calls per ten messages: our wire (a botocore
    call costs 1-2 ms of CPU), or botocore's client where the wire cannot go."""
    import botocore.config

    url = service_endpoint(session, "dynamodb", region, config.aws.endpoint_url)
    if wire_serves(url):
        assert url is not None
        return build_dynamodb_wire(config, region, url, session.get_credentials(), ca_bundle)
    return session.create_client("dynamodb", region_name=region, config=botocore.config.Config(
        max_pool_connections=config.concurrency + 10, connect_timeout=3, read_timeout=IDEMPOTENCY_READ_SECONDS,
        retries={"mode": "standard", "total_max_attempts": 3}), **endpoint)


def build_dynamodb_wire(config: Config, region: str, url: str, credentials: Any, ca_bundle: str) -> Any:
    from ..wire.dynamodb import DynamoDbWire  # only with a queue's idempotency_key

    return DynamoDbWire(url, region, credentials, concurrency=config.concurrency + 10,
                        read_timeout=IDEMPOTENCY_READ_SECONDS, connect_timeout=3, ca_bundle=ca_bundle)


class WiredSqs:
    """A command's botocore SQS client whose receives and batch calls go on our wire: botocore spends 1-3 ms of
    CPU on each, which capped `redrive --parallel` near 350 messages a second; the rest is the client's."""

    def __init__(self, client: Any, wire: SqsWire) -> None:
        self.client = client
        self.wire = wire

    def __getattr__(self, name: str) -> Any:
        return getattr(self.client, name)

    def receive_message(self, **params: Any) -> dict[str, Any]:
        return self.wire.receive_message(**params)

    def send_message_batch(self, **params: Any) -> dict[str, Any]:
        return self.wire.send_message_batch(**params)

    def delete_message_batch(self, **params: Any) -> dict[str, Any]:
        return self.wire.delete_message_batch(**params)

    def change_message_visibility_batch(self, **params: Any) -> dict[str, Any]:
        return self.wire.change_message_visibility_batch(**params)


def wire_command_client(client: Any, session: Any, connections: int, ca_bundle: str | None) -> Any:
    """The command's client, on our wire where it can go (no proxy, a plain endpoint URL), with its own
    number of attempts (COMMAND_ATTEMPTS)."""
    import random

    from ..wire.retries import Retrier

    if not wire_serves(client.meta.endpoint_url):
        return client
    wire = SqsWire.for_client(client, session.get_credentials(), concurrency=connections, read_timeout=30,
                              ca_bundle=ca_bundle, retrier=Retrier(random.Random(), max_attempts=COMMAND_ATTEMPTS))
    return WiredSqs(client, wire)


def sqs_limits(config: Config) -> tuple[int, float]:
    """(connections, read timeout) for SQS: a long poll per queue and a batch or two beside each slot."""
    return config.concurrency + len(config.queues) * 2 + 10, max(config.polling.poll_for + 10, 30)


def s3_config(config: Config) -> Any:
    """Payload fetches and deletes beside every slot; a stalled read is retried, never waited on for long."""
    import botocore.config

    return botocore.config.Config(max_pool_connections=config.concurrency + 10, connect_timeout=5, read_timeout=20,
                                  retries={"mode": "standard", "total_max_attempts": 3})


def build_sqs_wire(config: Config, region: str, url: str, credentials: Any, ca_bundle: str) -> SqsWire:
    connections, read_timeout = sqs_limits(config)
    return SqsWire(url, region, credentials, concurrency=connections, read_timeout=read_timeout, connect_timeout=5,
                   ca_bundle=ca_bundle)


def lambda_read_timeout(config: Config) -> float:
    """The longest Lambda target's timeout and 10 s: an Invoke answers when the function returns."""
    return max(t.timeout for t in config.targets.values() if isinstance(t, LambdaTargetConfig)) + 10


def build_lambda_wire(config: Config, region: str, url: str, credentials: Any, ca_bundle: str) -> LambdaWire:
    from ..wire.aws_lambda import LambdaWire  # only with a Lambda target

    return LambdaWire(url, region, credentials, concurrency=config.concurrency + 10,
                      read_timeout=lambda_read_timeout(config), connect_timeout=5, ca_bundle=ca_bundle)


def default_region(config: Config, session: botocore.session.Session) -> str:
    """The region chain on this process's environment, for callers that did not resolve one first."""
    import os

    from .region import resolve_region

    return resolve_region(config.aws, os.environ, session, config.source)[0]
