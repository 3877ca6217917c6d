"""What a redriven message becomes: pure functions from a received dead-lettered message to its
SendMessageBatch entry and its destination, and the lines `redrive` prints about them."""

from __future__ import annotations

from collections import Counter
from typing import Any

from ..idempotency.keys import ORIGINAL_ID_ATTRIBUTE
from ..rules import is_fifo_queue

ANNOTATION_PREFIX = "workerless."  # the daemon's dead-letter annotations, dropped on the way back
SOURCE_ATTRIBUTE = "workerless.source_queue"
DEFAULT_GROUP = "workerless-redrive"  # a FIFO destination for a message that had no group (a standard DLQ)
VALUE_KEYS = ("DataType", "StringValue", "BinaryValue")
PREVIEW_CHARACTERS = 60
MAX_ATTRIBUTES = 10  # SQS's limit per message


def source_of(message: dict[str, Any]) -> str | None:
    """The queue the daemon dead-lettered this message from, or None (an SQS redrive policy moved it)."""
    value = message.get("MessageAttributes", {}).get(SOURCE_ATTRIBUTE, {})
    return str(value["StringValue"]) if value.get("StringValue") else None


def own_attributes(message: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """The message's own attributes as sent, without the daemon's `workerless.*` annotations."""
    return {name: {key: value[key] for key in VALUE_KEYS if key in value}
            for name, value in message.get("MessageAttributes", {}).items()
            if not name.startswith(ANNOTATION_PREFIX)}


def identity(message: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """The first copy's message id, which a queue's `idempotency_key = "message_id"` reads: every copy a
    redrive sends (twice, after a crash between its send and its delete) is the same message to the daemon."""
    value = message.get("MessageAttributes", {}).get(ORIGINAL_ID_ATTRIBUTE, {}).get("StringValue")
    return {ORIGINAL_ID_ATTRIBUTE: {"DataType": "String", "StringValue": str(value or message["MessageId"])}}


def send_entry(entry_id: str, message: dict[str, Any], destination: str) -> dict[str, Any]:
    """The body byte for byte and the own attributes, and its group (a standard queue's keeps its tenant); for a
    FIFO destination the original message id as deduplication id, so a batch sent twice (a crash between send and delete)
    within SQS's five-minute deduplication interval arrives once."""
    entry: dict[str, Any] = {"Id": entry_id, "MessageBody": message["Body"]}
    attributes = own_attributes(message)
    if len(attributes) < MAX_ATTRIBUTES:
        attributes.update(identity(message))
    entry["MessageAttributes"] = attributes
    system = message.get("Attributes", {})
    if system.get("AWSTraceHeader"):
        entry["MessageSystemAttributes"] = {"AWSTraceHeader": {"DataType": "String",
                                                               "StringValue": system["AWSTraceHeader"]}}
    group = system.get("MessageGroupId")
    if is_fifo_queue(destination):
        entry["MessageGroupId"] = group or DEFAULT_GROUP
        entry["MessageDeduplicationId"] = message["MessageId"]
    elif group:  # a fair queue's tenant: the message goes back as its tenant's
        entry["MessageGroupId"] = group
    return entry


def preview(message: dict[str, Any], destination: str | None) -> str:
    """One line of `redrive --dry-run` about a message: id, where it would go, its body's start, attributes."""
    body = message["Body"]
    shown = body[:PREVIEW_CHARACTERS].replace("\n", "\\n") + ("..." if len(body) > PREVIEW_CHARACTERS else "")
    names = ", ".join(sorted(own_attributes(message))) or "none"
    where = destination or f"nowhere: it has no {SOURCE_ATTRIBUTE}, give --to=QUEUE"
    return f"  {message['MessageId']} -> {where}: body {shown!r} ({len(body)} characters), attributes: {names}"


def summary_line(moved: Counter[str], total: int, dead_letter_queue: str, to: str | None) -> str:
    """`moved N of M messages from DLQ to A (n), B (m)`."""
    count = sum(moved.values())
    if len(moved) > 1:
        where = ", ".join(f"{name} ({n})" for name, n in sorted(moved.items()))
    else:
        where = next(iter(moved), to or "their source queues")
    return f"moved {count} of {max(total, count)} messages from {dead_letter_queue} to {where}"
