"""The [idempotency] table and a queue's `idempotency_key`: a success is remembered in DynamoDB so that a
copy of the message is deleted without a delivery (the claims and their items are `idempotency/`)."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import TYPE_CHECKING

from .cron import TABLE_NAME
from .schema import Table

if TYPE_CHECKING:
    from .model import Config

DEFAULT_TABLE = "workerless-idempotency"
STORE_FAILURES = ("hold", "deliver")
KEY_FORMS = '"message_id", "dedup_id", "attribute:NAME" or "body:PATH" (a dotted JSON path, e.g. body:order.id)'
ATTRIBUTE_NAME = re.compile(r"[A-Za-z0-9_.-]{1,256}\Z")
PATH_SEGMENT = re.compile(r"[^.\s]+\Z")


@dataclass(frozen=True, slots=True, kw_only=True)
class IdempotencyConfig:
    table: str = DEFAULT_TABLE  # DynamoDB, created if missing; its key is `slot`, like the claims and fleet tables
    expires_after: int = 3600  # seconds a success is remembered
    on_store_failure: str = "hold"  # "hold": deliver nothing under a key while DynamoDB fails; "deliver"
    validate_payload: bool = False  # a copy of a completed key with another payload fails as IdempotencyKeyReused


@dataclass(frozen=True, slots=True)
class KeySpec:
    """Where a message's key is: `source` is message_id, dedup_id, attribute or body; `path` the name or the
    dotted path's segments."""
    source: str
    path: tuple[str, ...] = ()


def read_idempotency(table: Table) -> IdempotencyConfig:
    name = table.string("table", DEFAULT_TABLE)
    if not TABLE_NAME.match(name):
        raise table.fail("table", "must be 3-255 letters, digits, _ - or . (a DynamoDB table name)", name)
    idempotency = IdempotencyConfig(table=name, expires_after=table.integer("expires_after", 3600, 60, 31_536_000),
                                    on_store_failure=table.string("on_store_failure", "hold", STORE_FAILURES),
                                    validate_payload=table.boolean("validate_payload", False))
    table.finish()
    return idempotency


def parse_key(text: str) -> KeySpec | None:
    """The spec of an `idempotency_key` value, None when it is none of the forms."""
    if text in ("message_id", "dedup_id"):
        return KeySpec(text)
    kind, _, rest = text.partition(":")
    if kind == "attribute" and ATTRIBUTE_NAME.match(rest):
        return KeySpec("attribute", (rest,))
    segments = tuple(rest.split("."))
    if kind == "body" and rest and all(PATH_SEGMENT.match(segment) for segment in segments):
        return KeySpec("body", segments)
    return None


def read_key(table: Table, is_fifo: bool) -> str | None:
    key = table.optional_string("idempotency_key")
    if key is None:
        return None
    if parse_key(key) is None:
        raise table.fail("idempotency_key", f"must be {KEY_FORMS}", key)
    if key == "dedup_id" and not is_fifo:
        raise table.fail("idempotency_key", "dedup_id needs a FIFO queue (a name ending in .fifo)", key)
    return key


def idempotency_of(config: Config, top: Table) -> IdempotencyConfig | None:
    """[idempotency] as written, or its defaults when a queue has a key and the table is not written."""
    if top.has("idempotency"):
        return read_idempotency(top.table("idempotency"))
    if any(queue.idempotency_key for queue in config.queues):
        return IdempotencyConfig()
    return None
