"""The [targets.NAME] tables read: `type` picks an HTTP target (read here) or a Lambda one (`lambda_target.py`),
and both read the flow-control keys every target has."""

from __future__ import annotations

import re
from typing import Any

from .descriptions import keys_of
from .headers import read_headers
from .keys import Key
from .lambda_target import LAMBDA, has_valid_port, read_lambda_target
from .model import HttpTargetConfig, TargetConfig
from .schema import Table

HTTP = keys_of(HttpTargetConfig)


def read_targets(table: Table) -> dict[str, TargetConfig]:
    targets: dict[str, TargetConfig] = {}
    for target_name in list(table.data):
        targets[target_name] = read_target(table.table(target_name), target_name)
    table.finish()
    return targets


def read_target(table: Table, name: str) -> TargetConfig:
    kind = table.string(HTTP["type"])
    target: TargetConfig
    if kind == "http":
        target = read_http_target(table, name)
    else:
        target = read_lambda_target(table, name, read_flow(table, LAMBDA))
    table.finish()
    return target


def read_http_target(table: Table, name: str) -> HttpTargetConfig:
    url = table.string(HTTP["url"])
    if not re.fullmatch(r"https?://[^/?#\s]+(/[^?#\s]*)?", url) or not has_valid_port(url):
        raise table.fail("url", "must be an http:// or https:// URL with a host", url)
    return HttpTargetConfig(
        name=name,
        url=url,
        **table.fields(HTTP, "content_type", "connect_timeout", "inactivity_timeout", "max_connections",
                       "keepalive_idle"),
        ready_path=read_ready_path(table),
        **table.fields(HTTP, "signing_secret_env"),
        **read_flow(table, HTTP),
        headers=read_headers(table.table("headers")),
        **table.fields(HTTP, "batch_size", "max_batching_window"),
    )


def read_flow(table: Table, keys: dict[str, Key]) -> dict[str, Any]:
    """The keys every target has for flow control; `keys`: its type's."""
    return table.fields(keys, "max_concurrency", "rate_limit", "overload", "fleet_max_concurrency", "fleet_rate_limit")


def read_ready_path(table: Table) -> str | None:
    path = table.optional_string(HTTP["ready_path"])
    if path is not None and not re.fullmatch(r"/[^\s#]*", path):
        raise table.fail("ready_path", "must be a path that starts with / (GET on the url's host and port)", path)
    return path

