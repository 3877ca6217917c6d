"""A `[targets.NAME]` table with `type = "lambda"` read into `LambdaTargetConfig`, `endpoint_url` included."""

from __future__ import annotations

import re
import urllib.parse
from typing import Any

from .descriptions import WINDOW_BATCH_SIZE, keys_of
from .model import LambdaTargetConfig
from .schema import Table

EMULATOR_FUNCTION = "function"  # the one name the Runtime Interface Emulator always serves
ENDPOINT_URL = re.compile(r"https?://[^/?#\s@]+(/[^?#\s]*)?")
LAMBDA = keys_of(LambdaTargetConfig)


def read_lambda_target(table: Table, name: str, flow: dict[str, Any]) -> LambdaTargetConfig:
    """`flow`: the flow-control keys every target has, read by the caller."""
    window = table.number(LAMBDA["max_batching_window"])
    endpoint_url = read_endpoint_url(table)
    if endpoint_url is not None and flow["max_concurrency"] is None:
        flow = {**flow, "max_concurrency": 1}  # the emulator runs one invocation at a time: see read_endpoint_url
    return LambdaTargetConfig(
        name=name,
        function=table.string(LAMBDA["function"], EMULATOR_FUNCTION if endpoint_url is not None else None),
        qualifier=table.optional_string(LAMBDA["qualifier"]),
        max_batching_window=window,
        batch_size=table.integer(LAMBDA["batch_size"].up_to(WINDOW_BATCH_SIZE) if window else LAMBDA["batch_size"]),
        timeout=table.integer(LAMBDA["timeout"]),
        endpoint_url=endpoint_url,
        **flow,
    )


def read_endpoint_url(table: Table) -> str | None:
    """The Invoke API of a container beside the daemon: scheme, host, port, maybe a path prefix, before the
    daemon's /2015-03-31/functions/<function>/invocations. The emulator in AWS's Lambda images runs one
    invocation at a time, and one more sent meanwhile crashes it (aws-lambda-rie of aws-sam-cli 1.170.0 panics
    on ReserveFailed: AlreadyReserved), hence `max_concurrency = 1` unless the table sets it."""
    url = table.optional_string(LAMBDA["endpoint_url"])
    if url is None:
        return None
    if not ENDPOINT_URL.fullmatch(url) or not has_host_and_port(url):
        raise table.fail("endpoint_url", "must be an http:// or https:// URL with a host, as http://127.0.0.1:8080",
                         url)
    if "/2015-03-31/" in url:
        raise table.fail("endpoint_url", "must be the endpoint alone, as http://127.0.0.1:8080: the daemon adds "
                         "/2015-03-31/functions/<function>/invocations", url)
    return url


def has_valid_port(url: str) -> bool:
    """urllib's reading of the URL's port succeeds (a number from 0 to 65535, or none)."""
    try:
        urllib.parse.urlsplit(url).port
    except ValueError:
        return False
    return True


def has_host_and_port(url: str) -> bool:
    return has_valid_port(url) and bool(urllib.parse.urlsplit(url).hostname)
