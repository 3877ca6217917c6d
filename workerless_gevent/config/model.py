"""The validated configuration: frozen dataclasses built once from TOML, env and flags (`building.py`
reads and checks every key into them)."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Literal

from ..filtering import Pattern
from ..rules import is_fifo_queue
from .cron import PeriodicConfig
from .fleet import FleetConfig
from .idempotency import IdempotencyConfig

QUEUE_NAME_LENGTH = 80  # SQS's rule
METRICS_NAME_LENGTH = 200  # a CloudWatch namespace's
TABLE_NAME_LENGTHS = (3, 255)  # DynamoDB's rule
QUEUE_NAME = re.compile(rf"(?=.{{1,{QUEUE_NAME_LENGTH}}}\Z)[A-Za-z0-9_-]+(\.fifo)?\Z")
METRICS_NAME = re.compile(rf"[A-Za-z0-9._\-/#]{{1,{METRICS_NAME_LENGTH}}}\Z")
TABLE_NAME = re.compile(rf"^[A-Za-z0-9_.-]{{{TABLE_NAME_LENGTHS[0]},{TABLE_NAME_LENGTHS[1]}}}$")


@dataclass(frozen=True, slots=True, kw_only=True)
class PollingConfig:
    strategy: str = "priority"
    poll_for: int = 10
    sleep: float = 0.0
    batch_size: int = 10


@dataclass(frozen=True, slots=True, kw_only=True)
class QueueConfig:
    name: str
    url: str | None = None
    weight: int = 1
    target: str = "default"
    visibility_timeout: int = 300
    error_visibility_timeout: int = 2
    backoff: Literal["constant", "exponential"] = "constant"
    max_retries: int = 10
    dead_letter_queue: str | None = None
    retention_period: int = 345600
    max_concurrency: int | None = None  # deliveries in flight from this queue, inside `concurrency`
    fleet_max_concurrency: int | None = None  # in flight from this queue across the fleet ([fleet])
    max_concurrency_per_group: int | None = None  # a standard queue's deliveries of one MessageGroupId (tenant)
    filter: tuple[Pattern, ...] = ()  # Lambda filter criteria; a message no filter matches is deleted undelivered
    sns: Literal["raw", "unwrap"] = "raw"  # "unwrap": deliver an SNS envelope's Message and attributes
    large_payloads: bool = False  # fetch the extended clients' S3 payload before delivery
    delete_payloads: bool = False  # and delete the object after a successful delivery
    idempotency_key: str | None = None  # where the key of idempotent delivery is ([idempotency])

    @property
    def is_fifo(self) -> bool:
        return is_fifo_queue(self.name)


@dataclass(frozen=True, slots=True, kw_only=True)
class HttpTargetConfig:
    name: str
    url: str
    type: Literal["http"] = "http"
    content_type: str = "application/json"
    connect_timeout: int = 5
    inactivity_timeout: int = 180
    max_connections: int = 50
    keepalive_idle: float = 2.0  # seconds a pooled connection may stay idle before it is closed
    ready_path: str | None = None  # nothing is received for the target's queues until GET of it answers 2xx
    signing_secret_env: str | None = None
    signing_secret: str | None = field(default=None, repr=False)  # resolved from signing_secret_env
    max_concurrency: int | None = None  # deliveries in flight to this target, across its queues
    rate_limit: float | None = None  # deliveries per second (token bucket, burst = rate_limit)
    fleet_max_concurrency: int | None = None  # in flight to this target across the fleet ([fleet])
    fleet_rate_limit: float | None = None  # deliveries per second to this target across the fleet
    overload: Literal["backpressure", "failure"] = "backpressure"  # 429/503 without Retry-After
    headers: Mapping[str, str] = field(default_factory=dict, repr=False)  # ${VAR} resolved at load; never logged
    batch_size: int = 1  # messages per POST; above 1, Lambda's SQS event and batchItemFailures (targets/http_batch.py)
    max_batching_window: float = 0.0  # seconds to wait to fill batch_size messages, as the Lambda target's key


@dataclass(frozen=True, slots=True, kw_only=True)
class LambdaTargetConfig:
    name: str
    function: str
    type: Literal["lambda"] = "lambda"
    qualifier: str | None = None
    batch_size: int = 10
    timeout: int = 900
    max_batching_window: float = 0.0  # seconds to wait to fill batch_size records
    max_concurrency: int | None = None
    rate_limit: float | None = None
    fleet_max_concurrency: int | None = None
    fleet_rate_limit: float | None = None
    overload: Literal["backpressure", "failure"] = "backpressure"  # a throttle shrinks the in-flight limit
    # The Invoke API of a container beside the daemon (the emulator in AWS's Lambda images), instead of Lambda's
    endpoint_url: str | None = None


TargetConfig = HttpTargetConfig | LambdaTargetConfig


@dataclass(frozen=True, slots=True, kw_only=True)
class AwsConfig:
    region: str | None = None
    endpoint_url: str | None = None
    profile: str | None = None
    ca_bundle: str | None = None  # PEM file of the CAs to trust for AWS endpoints (else AWS_CA_BUNDLE, botocore's)


@dataclass(frozen=True, slots=True, kw_only=True)
class TracingConfig:
    exporter: str = "otlp"  # OTLP over HTTP/protobuf; endpoint, headers, sampler, resource from OTEL_* variables
    # the span buffer, from OTEL_BSP_* as the SDK's batching reads them
    max_queue_size: int = 2048
    max_export_batch_size: int = 512
    schedule_delay_seconds: float = 5.0


@dataclass(frozen=True, slots=True, kw_only=True)
class Config:
    source: str
    name: str | None = None
    concurrency: int = 50
    shutdown_timeout: int = 25
    log_format: str = "text"
    log_level: str = "INFO"
    drain: bool = False
    max_messages: int | None = None
    metrics_interval: int = 60
    status_listen: str | None = None
    unready_after: int = 60  # seconds of failing receives before /readyz says 503
    polling: PollingConfig = field(default_factory=PollingConfig)
    queues: tuple[QueueConfig, ...] = ()
    targets: Mapping[str, TargetConfig] = field(default_factory=dict)
    aws: AwsConfig = field(default_factory=AwsConfig)
    periodic: PeriodicConfig | None = None
    fleet: FleetConfig | None = None  # fleet-wide limits, shared through a DynamoDB table
    idempotency: IdempotencyConfig | None = None  # set when [idempotency] is written or a queue has a key
    tracing: TracingConfig | None = None  # [tracing]: a span per delivery (the optional extra `otel`)


def wire_services(config: Config) -> tuple[str, ...]:
    """The services the daemon calls on its own wire: SQS, Lambda with a Lambda target, DynamoDB with a queue's
    idempotency_key."""
    has_lambda = any(isinstance(target, LambdaTargetConfig) for target in config.targets.values())
    return ("sqs", *(("lambda",) if has_lambda else ()), *(("dynamodb",) if config.idempotency else ()))
