"""The settler's side of idempotent delivery at receive: what each keyed message of a receive becomes (delivered,
deleted as a duplicate, failed as a reused key, hidden behind another claim or a hold, left to lapse), with a
FIFO group's order kept whatever its messages' keys. `DeliveryGuard` is what the settler asks of idempotency."""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Protocol

from ..idempotency.admission import Admission
from ..idempotency.keys import shown_key
from ..logs import fields
from ..message import Message
from ..metrics import Registry
from ..targets import Outcome
from .queue import SqsQueue

logger = logging.getLogger(__name__)


class DeliveryGuard(Protocol):
    """What the settler asks of idempotent delivery (`idempotency.guard.Idempotency`): claims on a receive's
    keys, then each claim completed (after a success) or given up (before the message is visible again)."""

    def has_key(self, queue: str) -> bool: ...

    def claim(self, queue: str, messages: list[Message]) -> Admission: ...

    def is_claimed(self, message: Message) -> bool: ...

    def complete(self, message: Message, delete: Callable[[], None]) -> None: ...

    def give_up(self, messages: list[Message]) -> None: ...


class Actions(Protocol):
    """What sorting a receive out asks of the settler (`outcomes.Settler`): its counts, and each message's
    last action."""

    registry: Registry

    def delete(self, queue: SqsQueue, message: Message) -> None: ...

    def change_visibility(self, queue: SqsQueue, message: Message, seconds: int) -> None: ...

    def fail(self, queue: SqsQueue, message: Message, outcome: Outcome, target: str) -> tuple[str, int]: ...

    def release(self, messages: list[Message]) -> None: ...

    def note_undelivered(self, message: Message) -> None: ...


def sort_out(settler: Actions, queue: SqsQueue, messages: list[Message], guard: DeliveryGuard) -> list[Message]:
    """Keyed messages: those whose claim is ours are delivered, copies of a success deleted in place, copies
    of a key held elsewhere (or every keyed one while the table fails, holding) hidden until they may be
    claimed. On a FIFO queue, what follows a hidden message in its group is released, not delivered ahead
    of it. Returns the messages to deliver, in the receive's order."""
    admission = guard.claim(queue.name, messages)
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
        let_lapse(settler, queue, admission.lapsed, guard)
    deliver, behind = split_behind(messages, admission.deliver, [message for message, _ in admission.later]
                                   + admission.reused + admission.lapsed)
    if behind:
        settler.release(behind)
    return deliver


def let_lapse(settler: Actions, queue: SqsQueue, messages: list[Message], guard: DeliveryGuard) -> None:
    """Claims that came back after their messages' visibility ended: SQS may have handed a message out again,
    so this receipt is left alone (no delete, no visibility change) and its claim given up at once."""
    for message in messages:
        logger.warning("queue=%s message=%s key=%s: its claim came back after its visibility ended (the "
                       "table answered slowly): not delivered from this receive", queue.name, message.message_id,
                       shown_key(message), extra=fields(queue=queue.name, message_id=message.message_id))
        settler.note_undelivered(message)
        message.settled = True
    guard.give_up(messages)


def fail_reused(settler: Actions, queue: SqsQueue, messages: list[Message]) -> None:
    """validate_payload: a copy of a completed key with another payload is a failed attempt that never
    reaches the target (the key's claim is not taken): retried or dead-lettered by the usual rules."""
    for message in messages:
        settler.registry.count(queue.name, "IdempotencyKeyConflicts")
        settler.fail(queue, message, Outcome.failure("IdempotencyKeyReused", f"key {shown_key(message)} already "
                                                     "succeeded with another payload; not delivered"),
                     queue.config.target)


def split_behind(received: list[Message], deliver: list[Message], hidden: list[Message]) -> tuple[list[Message],
                                                                                                  list[Message]]:
    """FIFO: the messages of `deliver` that come after a hidden one of their group in the receive (`received`'s
    order) go back to the queue instead, so the group is never delivered out of its order."""
    first_hidden: dict[str, int] = {}
    position = {id(message): index for index, message in enumerate(received)}
    for message in hidden:
        if message.fifo_group is not None:
            first_hidden[message.fifo_group] = min(first_hidden.get(message.fifo_group, len(received)),
                                                 position[id(message)])
    if not first_hidden:
        return deliver, []
    behind = [message for message in deliver if message.fifo_group in first_hidden
              and position[id(message)] > first_hidden[message.fifo_group]]
    behind_ids = set(map(id, behind))
    return [message for message in deliver if id(message) not in behind_ids], behind
