"""The settler's side of idempotent delivery at receive: what each keyed message of a receive becomes (delivered,
deleted as a duplicate, failed as a reused key, hidden behind another claim or a hold, left to lapse), with a
FIFO group's order kept whatever its messages' keys."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from ..idempotency.guard import Idempotency
from ..idempotency.keys import shown_key
from ..logs import fields
from ..message import Message
from ..targets import Outcome
from .queue import SqsQueue

if TYPE_CHECKING:
    from .outcomes import Settler

logger = logging.getLogger(__name__)


def sort_out(settler: Settler, queue: SqsQueue, messages: list[Message], idempotency: Idempotency) -> list[Message]:
    """Keyed messages: those whose claim is ours are delivered, copies of a success deleted in place, copies
    of a key held elsewhere (or every keyed one while the table fails, holding) hidden until they may be
    claimed. On a FIFO queue, what follows a hidden message in its group is released, not delivered ahead
    of it. Returns the messages to deliver, in the receive's order."""
    admission = idempotency.admit(queue.name, messages)
    if admission.missing:
        settler.registry.count(queue.name, "IdempotencyKeyMissing", admission.missing)
    for message in admission.duplicates:
        settler.registry.count(queue.name, "Duplicates")
        logger.info("queue=%s message=%s key=%s already delivered: deleted as a duplicate", queue.name,
                    message.message_id, shown_key(message),
                    extra=fields(queue=queue.name, message_id=message.message_id, outcome="duplicate"))
        settler.delete(queue, message)
    fail_reused(settler, queue, admission.reused)
    if admission.later and not admission.is_held:
        settler.registry.count(queue.name, "IdempotencyInProgress", len(admission.later))
    why = "held while the idempotency table fails" if admission.is_held else "is claimed elsewhere"
    for message, seconds in admission.later:
        logger.info("queue=%s message=%s key=%s %s: visible again in %ds", queue.name, message.message_id,
                    shown_key(message), why, seconds,
                    extra=fields(queue=queue.name, message_id=message.message_id))
        settler.note_undelivered(message)
        settler.change_visibility(queue, message, seconds)
    if admission.lapsed:
        let_lapse(settler, queue, admission.lapsed, idempotency)
    deliver, behind = split_behind(messages, admission.deliver, [message for message, _ in admission.later]
                                   + admission.reused + admission.lapsed)
    if behind:
        settler.release(behind)
    return deliver


def let_lapse(settler: Settler, queue: SqsQueue, messages: list[Message], idempotency: Idempotency) -> None:
    """Claims that came back after their messages' visibility ended: SQS may have handed a message out again,
    so this receipt is left alone (no delete, no visibility change) and its claim given up at once."""
    for message in messages:
        logger.warning("queue=%s message=%s key=%s: its claim came back after its visibility ended (the "
                       "table answered slowly): not delivered from this receive", queue.name, message.message_id,
                       shown_key(message), extra=fields(queue=queue.name, message_id=message.message_id))
        settler.note_undelivered(message)
        message.settled = True
    idempotency.give_up(messages)


def fail_reused(settler: Settler, queue: SqsQueue, messages: list[Message]) -> None:
    """validate_payload: a copy of a completed key with another payload is a failed attempt that never
    reaches the target (the key's claim is not taken): retried or dead-lettered by the usual rules."""
    for message in messages:
        settler.registry.count(queue.name, "IdempotencyKeyConflicts")
        outcome = Outcome.failure("IdempotencyKeyReused", f"key {shown_key(message)} already succeeded with "
                                  "another payload; not delivered")
        action, seconds = settler.decide(queue, message, outcome, queue.config.target)
        if action == "dead-letter" and settler.dead_letter(queue, message, outcome):
            settler.delete(queue, message)
        else:
            settler.change_visibility(queue, message, seconds)


def split_behind(received: list[Message], deliver: list[Message], hidden: list[Message]) -> tuple[list[Message],
                                                                                                  list[Message]]:
    """FIFO: the messages of `deliver` that come after a hidden one of their group in the receive (`received`'s
    order) go back to the queue instead, so the group is never delivered out of its order."""
    first_hidden: dict[str, int] = {}
    position = {id(message): index for index, message in enumerate(received)}
    for message in hidden:
        if message.group_id is not None:
            first_hidden[message.group_id] = min(first_hidden.get(message.group_id, len(received)),
                                                 position[id(message)])
    if not first_hidden:
        return deliver, []
    behind = [message for message in deliver if message.group_id in first_hidden
              and position[id(message)] > first_hidden[message.group_id]]
    behind_ids = set(map(id, behind))
    return [message for message in deliver if id(message) not in behind_ids], behind
