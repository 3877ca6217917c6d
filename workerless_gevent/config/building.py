"""A merged config document read, range-checked and cross-checked into `model.Config`: the top-level keys and
small tables here, [[queues]], [targets] and the DynamoDB tables in their modules; each key's default, range and
choices come from `descriptions.KEYS`, and each error is one line naming the file and the key."""

from __future__ import annotations

import dataclasses
import os
import re
from collections.abc import Mapping
from typing import Any

from .descriptions import keys_of
from .fleet_table import check_no_fleet_keys, read_fleet
from .idempotency_table import idempotency_of
from .model import METRICS_NAME, AwsConfig, Config, PollingConfig, TracingConfig
from .periodic_table import read_periodic
from .queue_table import read_queues
from .schema import Table
from .target_table import read_targets

TOP = keys_of(Config)
POLLING = keys_of(PollingConfig)
AWS = keys_of(AwsConfig)
TRACING = keys_of(TracingConfig)


def build_config(data: dict[str, Any], source: str, origins: Mapping[str, str]) -> Config:
    """Validate a merged config document; every rule lives here, in the readers it calls or in `schema.Table`."""
    top = Table(data, "", source, origins)
    name = top.optional_string(TOP["name"])
    if name is not None and (not METRICS_NAME.match(name) or name.startswith("AWS/")):
        raise top.fail("name", "must be letters, digits and . - _ / # (CloudWatch namespace)", name)
    concurrency = top.integer(TOP["concurrency"])
    status = top.table("status")
    config = Config(
        source=source,
        name=name,
        concurrency=concurrency,
        **top.fields(TOP, "shutdown_timeout", "log_format", "log_level", "drain", "max_messages"),
        metrics_interval=_metrics_interval(top.table("metrics")),
        status_listen=_status_listen(status),
        unready_after=status.integer(TOP["unready_after"]),
        polling=_polling(top.table("polling")),
        queues=read_queues(top),
        targets=read_targets(top.table("targets")),
        aws=_aws(top.table("aws")),
        periodic=read_periodic(top.table("periodic")) if top.has("periodic") else None,
        fleet=read_fleet(top.table("fleet")) if top.has("fleet") else None,
        tracing=_tracing(top.table("tracing")) if top.has("tracing") else None,
    )
    config = dataclasses.replace(config, idempotency=idempotency_of(config, top))
    status.finish()
    top.finish()
    _check_cross_references(config, top)
    return config


def _polling(table: Table) -> PollingConfig:
    polling = PollingConfig(**table.fields(POLLING, "strategy", "poll_for", "sleep", "batch_size"))
    table.finish()
    return polling


def _tracing(table: Table) -> TracingConfig:
    tracing = TracingConfig(**table.fields(TRACING, "exporter"))
    table.finish()
    return tracing


def _metrics_interval(table: Table) -> int:
    interval = table.integer(TOP["metrics_interval"])
    table.finish()
    return interval


def _status_listen(table: Table) -> str | None:
    listen = table.optional_string(TOP["status_listen"])
    if listen is not None and listen.isdigit():
        listen = f"127.0.0.1:{listen}"  # a bare port stays on loopback
    if listen is not None and not (re.fullmatch(r"[^:\s]+:\d{1,5}", listen) and int(listen.rsplit(":", 1)[1]) <= 65535):
        raise table.fail("listen", "must be HOST:PORT or PORT", listen)
    return listen


def _aws(table: Table) -> AwsConfig:
    ca_bundle = table.optional_string(AWS["ca_bundle"])
    if ca_bundle is not None:
        # Relative to the config file, like every path in it; a missing file fails here, not at the first call.
        ca_bundle = table.file_path(ca_bundle)
        if not os.path.isfile(ca_bundle):
            raise table.fail("ca_bundle", "must be a PEM file of CA certificates that exists", ca_bundle)
    aws = AwsConfig(**table.fields(AWS, "region", "endpoint_url", "profile"), ca_bundle=ca_bundle)
    table.finish()
    return aws


def _check_cross_references(config: Config, top: Table) -> None:
    names = {queue.name for queue in config.queues}
    for index, queue in enumerate(config.queues):
        item = top.tables("queues")[index]
        if queue.target not in config.targets:
            problem = "names a target that is not defined in [targets]"
            if queue.target == "default":
                problem = "has no target: define [targets.default] or pass --http=URL or --function=NAME"
            raise item.fail("target", problem, queue.target)
        if queue.dead_letter_queue in names:
            raise item.fail("dead_letter_queue", "must not be one of the polled queues", queue.dead_letter_queue)
        target = config.targets[queue.target]
        if queue.is_fifo and (target.max_batching_window or target.batch_size > 10):
            raise item.fail("target", "a FIFO queue takes batches of at most 10 and no max_batching_window, as in "
                            f"Lambda; target {queue.target} has batch_size={target.batch_size}, "
                            f"max_batching_window={target.max_batching_window:g}", queue.target)
    if config.periodic is not None and config.periodic.queue not in names:
        raise top.fail("periodic.queue", "must name one of the [[queues]]", config.periodic.queue)
    if config.fleet is None:
        check_no_fleet_keys(config, top)
