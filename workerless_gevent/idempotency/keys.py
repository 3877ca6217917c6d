"""A message's idempotency key, as its queue's `idempotency_key` names it, its item in the table (and the claim
on it the message holds), and the digest of its payload that `validate_payload` compares: pure, no I/O. (How a
key is shown outside the table is `rules.short_key`, which the HTTP target uses too.)"""

from __future__ import annotations

import hashlib
import json
from typing import Any

from ..config.idempotency import KeySpec
from ..envelopes import SIZE_ATTRIBUTES, unwrap_sns
from ..message import Message
from ..rules import short_key
from .store import Claim

ORIGINAL_ID_ATTRIBUTE = "workerless.message_id"  # the first copy's id, carried through dead letters and redrive
MAX_KEY_BYTES = 1024  # a longer key is stored as its SHA-256 (DynamoDB's key limit is 2,048 bytes)


def key_of(spec: KeySpec, message: Message, unwrap: bool = False) -> str | None:
    """The key, or None when the message has none (no such attribute, a body that is not JSON or lacks
    the path). `unwrap`: a body path reads the notification inside an SNS envelope."""
    source = spec.source
    if source == "message_id":
        return message.string_attribute(ORIGINAL_ID_ATTRIBUTE) or message.message_id
    if source == "dedup_id":
        return message.attributes.get("MessageDeduplicationId") or None
    if source == "attribute":
        return message.string_attribute(spec.path[0]) or None
    if unwrap:
        message = unwrap_sns(message) or message
    return body_value(message.body, spec.path)


def body_value(body: str, path: tuple[str, ...]) -> str | None:
    """The value at a dotted path of a JSON body: a string as it is, anything else as compact JSON."""
    try:
        value: Any = json.loads(body)
    except (ValueError, RecursionError):
        return None
    for segment in path:
        if isinstance(value, dict):
            value = value.get(segment)
        elif isinstance(value, list) and segment.isdigit() and int(segment) < len(value):
            value = value[int(segment)]
        else:
            return None
    if value is None or value == "":
        return None
    return value if isinstance(value, str) else json.dumps(value, sort_keys=True, separators=(",", ":"))


def item_key(queue: str, key: str) -> str:
    """The table's `slot` of a key: scoped by queue, hashed when too long for DynamoDB."""
    if len(key.encode("utf-8", "surrogatepass")) > MAX_KEY_BYTES:
        key = "sha256:" + hashlib.sha256(key.encode("utf-8", "surrogatepass")).hexdigest()
    return f"idempotency/{queue}/{key}"


def claim_of(message: Message, deadline: int = 0) -> Claim:
    """The claim a message holds (its token, key and payload's digest), with the deadline an extension would write."""
    assert message.claim is not None and message.idempotency_key is not None
    return Claim(item_key(message.queue, message.idempotency_key), message.claim, deadline, message.payload_hash)


def shown_key(message: Message) -> str:
    """The message's key in a log line: its short form (`rules.short_key`), as the HTTP target's header has it."""
    return "-" if message.idempotency_key is None else short_key(message.idempotency_key)


def payload_digest(message: Message, unwrap: bool = False, large_payloads: bool = False) -> str | None:
    """validate_payload's SHA-256 (hex) of the payload: the body, or the notification inside an SNS envelope
    when unwrapping. None for an extended client's S3 pointer the daemon fetches: its content is read only at
    delivery, and each send of the same payload gets a pointer of its own."""
    if unwrap:
        message = unwrap_sns(message) or message
    if large_payloads and any(name in message.message_attributes for name in SIZE_ATTRIBUTES):
        return None
    return hashlib.sha256(message.body.encode("utf-8", "surrogatepass")).hexdigest()
