"""The [idempotency] table's settings and the forms of a queue's `idempotency_key`: a success is remembered in
DynamoDB so that a copy of the message is deleted without a delivery (`idempotency_table.py` reads them; the
claims and their items are `idempotency/`)."""

from __future__ import annotations

import re
from dataclasses import dataclass

DEFAULT_TABLE = "workerless-idempotency"
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
