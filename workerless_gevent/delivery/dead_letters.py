"""A failed message's copy to its dead-letter queue: the original attributes, then ours (source queue, receive
count, error) while SQS's limit of 10 attributes allows."""

from __future__ import annotations

import logging
from typing import Any

from ..errors import AWS_ERRORS, describe_error
from ..logs import fields
from ..message import Message
from ..metrics import Registry
from ..targets import Outcome
from .queue import SqsQueue

logger = logging.getLogger("workerless_gevent.delivery.outcomes")  # a dead letter's lines keep the settler's name

MAX_MESSAGE_ATTRIBUTES = 10


def dead_letter(queue: SqsQueue, dead_letter_queue: SqsQueue, message: Message, outcome: Outcome,
                registry: Registry) -> bool:
    """Copy to the dead-letter queue; True once the copy is safely there (then the caller deletes)."""
    extra: dict[str, str] = {}
    if dead_letter_queue.config.is_fifo:
        extra.update(MessageGroupId=message.group_id or "workerless", MessageDeduplicationId=message.message_id)
    elif message.group_id:  # a fair queue's tenant stays its tenant in a standard dead-letter queue too
        extra["MessageGroupId"] = message.group_id
    try:
        dead_letter_queue.send(message.body, dead_letter_attributes(queue.name, message, outcome), **extra)
    except AWS_ERRORS as error:
        logger.error("queue=%s message=%s could not be dead-lettered to %s, will retry: %s",
                     queue.name, message.message_id, dead_letter_queue.name, describe_error(error),
                     extra=fields(queue=queue.name, message_id=message.message_id,
                                  dead_letter_queue=dead_letter_queue.name))
        return False
    registry.count(queue.name, "DeadLettered")
    logger.warning("queue=%s message=%s dead-lettered to %s after %d receives",
                   queue.name, message.message_id, dead_letter_queue.name, message.receive_count,
                   extra=fields(queue=queue.name, message_id=message.message_id, outcome="dead-lettered",
                                dead_letter_queue=dead_letter_queue.name, receive_count=message.receive_count))
    return True


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
