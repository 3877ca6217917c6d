"""A dead letter's attributes: the original message's, then ours (source queue, receive count, error) while
SQS's limit of 10 attributes allows."""

from __future__ import annotations

import logging
from typing import Any

from ..message import Message
from ..targets import Outcome

logger = logging.getLogger(__name__)

MAX_MESSAGE_ATTRIBUTES = 10


def dead_letter_attributes(source: str, message: Message, outcome: Outcome) -> dict[str, Any]:
    """The original attributes, then ours while SQS's limit of 10 attributes allows."""
    attributes: dict[str, Any] = {}
    for name, value in message.message_attributes.items():
        attributes[name] = {key: value[key] for key in ("DataType", "StringValue", "BinaryValue") if key in value}
    ours = {
        "workerless.source_queue": source,
        "workerless.receive_count": str(message.receive_count),
        "workerless.error": ": ".join(part for part in (outcome.error_type, outcome.error) if part)[:1000] or "failure",
    }
    for name, text in ours.items():
        if len(attributes) >= MAX_MESSAGE_ATTRIBUTES:
            logger.warning("queue=%s message=%s has too many attributes to add %s", source, message.message_id, name)
            continue
        data_type = "Number" if name == "workerless.receive_count" else "String"
        attributes[name] = {"DataType": data_type, "StringValue": text}
    return attributes

