"""The [[queues]] tables read into `QueueConfig`s: one per queue, in priority order, names unique."""

from __future__ import annotations

import re

from ..errors import ConfigError
from ..filtering import FilterError, Pattern, parse_filters
from ..rules import is_fifo_queue
from .descriptions import MAX_FILTERS, QUEUE_NAME_RULE, keys_of
from .idempotency_table import read_key
from .model import QUEUE_NAME, QueueConfig
from .schema import Table

QUEUE = keys_of(QueueConfig)
NAME_PROBLEM = "must be " + QUEUE_NAME_RULE.replace("`", "")  # the error's words: no Markdown


def read_queues(top: Table) -> tuple[QueueConfig, ...]:
    if not top.has("queues"):
        raise ConfigError(top.source, "queues", "at least one queue is required (a [[queues]] table or --queues)")
    tables = top.tables("queues")
    if not tables:
        raise top.fail("queues", "at least one queue is required", [])
    queues = tuple(read_queue(table) for table in tables)
    seen: set[str] = set()
    for table, queue in zip(tables, queues):
        if queue.name in seen:
            raise table.fail("name", "duplicate queue", queue.name)
        seen.add(queue.name)
    return queues


def read_queue(table: Table) -> QueueConfig:
    url = table.optional_string(QUEUE["url"])
    if url is not None and not re.fullmatch(r"https?://[^/\s]+/\S+", url):
        raise table.fail("url", "must be an http(s) queue URL", url)
    default_name = url.rstrip("/").rsplit("/", 1)[-1] if url else None
    name = table.string(QUEUE["name"], default_name)
    if not QUEUE_NAME.match(name):
        raise table.fail("name", NAME_PROBLEM, name)
    queue = QueueConfig(
        name=name,
        url=url,
        **table.fields(QUEUE, "visibility_timeout", "weight", "target", "error_visibility_timeout", "backoff",
                       "max_retries", "dead_letter_queue", "retention_period", "max_concurrency",
                       "fleet_max_concurrency", "max_concurrency_per_group"),
        filter=read_filter(table),
        **table.fields(QUEUE, "sns", "large_payloads", "delete_payloads"),
        idempotency_key=read_key(table, is_fifo_queue(name)),
    )
    if queue.max_concurrency_per_group is not None and queue.is_fifo:
        raise table.fail("max_concurrency_per_group", "is for standard queues: a FIFO queue delivers one message "
                         "of a group at a time already", queue.max_concurrency_per_group)
    if queue.delete_payloads and not queue.large_payloads:
        raise table.fail("delete_payloads", "needs large_payloads = true", True)
    if queue.dead_letter_queue is not None and not QUEUE_NAME.match(queue.dead_letter_queue):
        raise table.fail("dead_letter_queue", NAME_PROBLEM, queue.dead_letter_queue)
    if queue.dead_letter_queue == name:
        raise table.fail("dead_letter_queue", "must differ from the queue itself", name)
    table.finish()
    return queue


def read_filter(table: Table) -> tuple[Pattern, ...]:
    """One pattern or a list of up to MAX_FILTERS (any may match), each a JSON string as Lambda takes it."""
    raw = table.raw("filter")
    if raw is None:
        return ()
    texts = raw if isinstance(raw, list) else [raw]
    if not texts or len(texts) > MAX_FILTERS or not all(isinstance(text, str) for text in texts):
        raise table.fail("filter", f"must be a JSON pattern string or a list of 1 to {MAX_FILTERS} of them", raw)
    try:
        return parse_filters(texts)
    except FilterError as error:
        raise table.fail("filter", str(error), raw) from None
