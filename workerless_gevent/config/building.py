"""Every key of a merged config document read, range-checked and cross-checked into `model.Config`;
each rule lives here or in `schema.Table`, and each error is one line naming the file and the key."""

from __future__ import annotations

import dataclasses
import os
import re
import urllib.parse
from collections.abc import Mapping
from typing import Any

from ..errors import ConfigError
from ..filtering import FilterError, Pattern, parse_filters
from .cron import read_periodic, resolve_file
from .idempotency import idempotency_of, read_key
from .fleet import check_no_fleet_keys, fleet_limit_keys, read_fleet
from .headers import read_headers
from .lambda_target import read_lambda_target
from .model import (LOG_LEVELS, METRICS_NAME, QUEUE_NAME, STRATEGIES, AwsConfig, Config, HttpTargetConfig,
                    PollingConfig, QueueConfig, TargetConfig, TracingConfig)
from .schema import Table


def build_config(data: dict[str, Any], source: str, origins: Mapping[str, str]) -> Config:
    """Validate a merged config document; every rule lives here or in `schema.Table`."""
    top = Table(data, "", source, origins)
    name = top.optional_string("name")
    if name is not None and (not METRICS_NAME.match(name) or name.startswith("AWS/")):
        raise top.fail("name", "must be letters, digits and . - _ / # (CloudWatch namespace)", name)
    concurrency = top.integer("concurrency", 50, 1, 10000)
    status = top.table("status")
    config = Config(
        source=source,
        name=name,
        concurrency=concurrency,
        shutdown_timeout=top.integer("shutdown_timeout", 25, 0, 3600),
        log_format=top.string("log_format", "text", ("text", "json")),
        log_level=top.string("log_level", "INFO", LOG_LEVELS),
        drain=top.boolean("drain", False),
        max_messages=top.optional_integer("max_messages", 1),
        metrics_interval=_metrics_interval(top.table("metrics")),
        status_listen=_status_listen(status),
        unready_after=status.integer("unready_after", 60, 1, 86400),
        polling=_polling(top.table("polling")),
        queues=_queues(top),
        targets=_targets(top.table("targets")),
        aws=_aws(top.table("aws"), source),
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
    polling = PollingConfig(
        strategy=table.string("strategy", "priority", STRATEGIES),
        poll_for=table.integer("poll_for", 10, 1, 20),
        sleep=table.number("sleep", 0, 0, 3600),
        batch_size=table.integer("batch_size", 10, 1, 10),
    )
    table.finish()
    return polling


def _queues(top: Table) -> tuple[QueueConfig, ...]:
    if not top.has("queues"):
        raise ConfigError(top.source, "queues", "at least one queue is required (a [[queues]] table or --queues)")
    tables = top.tables("queues")
    if not tables:
        raise top.fail("queues", "at least one queue is required", [])
    queues = tuple(_queue(table) for table in tables)
    seen: set[str] = set()
    for table, queue in zip(tables, queues):
        if queue.name in seen:
            raise table.fail("name", "duplicate queue", queue.name)
        seen.add(queue.name)
    return queues


def _queue(table: Table) -> QueueConfig:
    url = table.optional_string("url")
    if url is not None and not re.fullmatch(r"https?://[^/\s]+/\S+", url):
        raise table.fail("url", "must be an http(s) queue URL", url)
    default_name = url.rstrip("/").rsplit("/", 1)[-1] if url else None
    name = table.string("name", default_name)
    if not QUEUE_NAME.match(name):
        raise table.fail("name", "must be 1-80 letters, digits, - or _ (plus .fifo)", name)
    visibility = table.integer("visibility_timeout", 300, 1, 43200)
    queue = QueueConfig(
        name=name,
        url=url,
        weight=table.integer("weight", 1, 1, 1000),
        target=table.string("target", "default"),
        visibility_timeout=visibility,
        error_visibility_timeout=table.integer("error_visibility_timeout", 2, 0, 43200),
        backoff=table.string("backoff", "constant", ("constant", "exponential")),  # type: ignore[arg-type]
        max_retries=table.integer("max_retries", 10, 1, 1000),
        dead_letter_queue=table.optional_string("dead_letter_queue"),
        retention_period=table.integer("retention_period", 345600, 60, 1209600),
        max_concurrency=table.optional_integer("max_concurrency", 1, 10000),
        fleet_max_concurrency=table.optional_integer("fleet_max_concurrency", 1, 100000),
        filter=_filter(table),
        sns=table.string("sns", "raw", ("raw", "unwrap")),  # type: ignore[arg-type]
        large_payloads=table.boolean("large_payloads", False),
        delete_payloads=table.boolean("delete_payloads", False),
        idempotency_key=read_key(table, name.endswith(".fifo")),
    )
    if queue.delete_payloads and not queue.large_payloads:
        raise table.fail("delete_payloads", "needs large_payloads = true", True)
    if queue.dead_letter_queue is not None and not QUEUE_NAME.match(queue.dead_letter_queue):
        raise table.fail("dead_letter_queue", "must be 1-80 letters, digits, - or _ (plus .fifo)", queue.dead_letter_queue)
    if queue.dead_letter_queue == name:
        raise table.fail("dead_letter_queue", "must differ from the queue itself", name)
    table.finish()
    return queue


def _targets(table: Table) -> dict[str, TargetConfig]:
    targets: dict[str, TargetConfig] = {}
    for target_name in list(table.data):
        targets[target_name] = _target(table.table(target_name), target_name)
    table.finish()
    return targets


def _target(table: Table, name: str) -> TargetConfig:
    kind = table.string("type", None, ("http", "lambda"))
    target: TargetConfig
    if kind == "http":
        url = table.string("url")
        if not re.fullmatch(r"https?://[^/?#\s]+(/[^?#\s]*)?", url) or not has_valid_port(url):
            raise table.fail("url", "must be an http:// or https:// URL with a host", url)
        target = HttpTargetConfig(
            name=name,
            url=url,
            content_type=table.string("content_type", "application/json"),
            connect_timeout=table.integer("connect_timeout", 5, 1, 60),
            inactivity_timeout=table.integer("inactivity_timeout", 180, 1, 1800),
            max_connections=table.integer("max_connections", 50, 1, 10000),
            keepalive_idle=table.number("keepalive_idle", 2, 0, 3600),
            ready_path=_ready_path(table),
            signing_secret_env=table.optional_string("signing_secret_env"),
            **_flow(table),
            headers=read_headers(table.table("headers")),
            batch_size=table.integer("batch_size", 1, 1, 10000),
            max_batching_window=table.number("max_batching_window", 0, 0, 300),
        )
    else:
        target = read_lambda_target(table, name, _flow(table))
    table.finish()
    return target


def _flow(table: Table) -> dict[str, Any]:
    """The keys every target has for flow control."""
    rate = table.raw("rate_limit")
    return {
        "max_concurrency": table.optional_integer("max_concurrency", 1, 10000),
        "rate_limit": None if rate is None else table.number("rate_limit", 1, 0.01, 100000),
        "overload": table.string("overload", "backpressure", ("backpressure", "failure")),
        **fleet_limit_keys(table),
    }


def _filter(table: Table) -> tuple[Pattern, ...]:
    """One pattern or a list of up to 5 (any may match), each a JSON string as Lambda takes it."""
    raw = table.raw("filter")
    if raw is None:
        return ()
    texts = raw if isinstance(raw, list) else [raw]
    if not texts or len(texts) > 5 or not all(isinstance(text, str) for text in texts):
        raise table.fail("filter", "must be a JSON pattern string or a list of 1 to 5 of them", raw)
    try:
        return parse_filters(texts)
    except FilterError as error:
        raise table.fail("filter", str(error), raw) from None


def _ready_path(table: Table) -> str | None:
    path = table.optional_string("ready_path")
    if path is not None and not re.fullmatch(r"/[^\s#]*", path):
        raise table.fail("ready_path", "must be a path that starts with / (GET on the url's host and port)", path)
    return path


def _tracing(table: Table) -> TracingConfig:
    tracing = TracingConfig(exporter=table.string("exporter", "otlp", ("otlp",)))
    table.finish()
    return tracing


def _metrics_interval(table: Table) -> int:
    interval = table.integer("interval", 60, 1, 86400)
    table.finish()
    return interval


def _status_listen(table: Table) -> str | None:
    listen = table.optional_string("listen")
    if listen is not None and listen.isdigit():
        listen = f"127.0.0.1:{listen}"  # a bare port stays on loopback
    if listen is not None and not (re.fullmatch(r"[^:\s]+:\d{1,5}", listen) and int(listen.rsplit(":", 1)[1]) <= 65535):
        raise table.fail("listen", "must be HOST:PORT or PORT", listen)
    return listen


def _aws(table: Table, source: str) -> AwsConfig:
    ca_bundle = table.optional_string("ca_bundle")
    if ca_bundle is not None:
        # Relative to the config file, like every path in it; a missing file fails here, not at the first call.
        ca_bundle = resolve_file(ca_bundle, source)
        if not os.path.isfile(ca_bundle):
            raise table.fail("ca_bundle", "must be a PEM file of CA certificates that exists", ca_bundle)
    aws = AwsConfig(
        region=table.optional_string("region"),
        endpoint_url=table.optional_string("endpoint_url"),
        profile=table.optional_string("profile"),
        ca_bundle=ca_bundle,
    )
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


def has_valid_port(url: str) -> bool:
    try:
        urllib.parse.urlsplit(url).port
    except ValueError:
        return False
    return True
