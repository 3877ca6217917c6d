"""The [idempotency] table and a queue's `idempotency_key` read from TOML: the table's defaults apply as soon
as a queue has a key."""

from __future__ import annotations

from .descriptions import TABLE_NAME_PROBLEM, keys_of
from .idempotency import KEY_FORMS, IdempotencyConfig, parse_key
from .model import TABLE_NAME, Config, QueueConfig
from .schema import Table

IDEMPOTENCY = keys_of(IdempotencyConfig)
QUEUE_KEY = keys_of(QueueConfig)["idempotency_key"]


def read_idempotency(table: Table) -> IdempotencyConfig:
    name = table.string(IDEMPOTENCY["table"])
    if not TABLE_NAME.match(name):
        raise table.fail("table", TABLE_NAME_PROBLEM, name)
    idempotency = IdempotencyConfig(table=name, **table.fields(IDEMPOTENCY, "expires_after", "on_store_failure",
                                                               "validate_payload"))
    table.finish()
    return idempotency


def read_key(table: Table, is_fifo: bool) -> str | None:
    key = table.optional_string(QUEUE_KEY)
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
