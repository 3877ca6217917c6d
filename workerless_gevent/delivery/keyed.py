"""The settler's side of idempotent delivery at receive: what each keyed message of a receive becomes (delivered,
deleted as a duplicate, failed as a reused key, hidden behind another claim or a hold, left to lapse), with a
FIFO group's order kept whatever its messages' keys. `DeliveryGuard` is what the settler asks of idempotency."""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Protocol

from ..idempotency.admission import Admission
from ..idempotency.store import Claim
from ..idempotency.keys import shown_key
from ..logs import fields
from ..message import Message
from ..metrics import Registry
from ..targets import Outcome
from .queue import SqsQueue

logger = logging.getLogger(__name__)

# Puts messages admitted after their receive (claims retried in place) in their queue's buffer; False if the
# queue is no longer served (the caller releases them)
HandOver = Callable[[SqsQueue, list[Message]], bool]


class DeliveryGuard(Protocol):
    """What the settler asks of idempotent delivery (`idempotency.guard.Idempotency`): claims on a receive's
    keys (those the table did not take claimed again in place), then each claim completed (after a success) or
    given up (before the message is visible again)."""

    def has_key(self, queue: str) -> bool: ...

    def claim(self, queue: str, messages: list[Message]) -> Admission: ...

    def retry(self, queue: str, carried: list[Message], pending: list[tuple[Message, Claim]],
              done: Callable[[Admission | None], None]) -> None: ...

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

    def let_go_settled(self, messages: list[Message]) -> None: ...

    hand_over: HandOver


def sort_out(settler: Actions, queue: SqsQueue, messages: list[Message], guard: DeliveryGuard) -> list[Message]:
    """Keyed messages: those whose claim is ours are delivered, copies of a success deleted in place, copies
    of a key held elsewhere hidden until they may be claimed, those whose claims the table did not take kept
    and claimed again in place. On a FIFO queue, what follows a hidden message in its group is released, and
    what follows a kept one waits with it, neither delivered ahead of it. Returns the messages to deliver now,
    in the receive's order."""
    admission = guard.claim(queue.name, messages)
    if admission.missing:
        settler.registry.count(queue.name, "IdempotencyKeyMissing", admission.missing)
    return carry_out(settler, queue, messages, admission, guard)


def carry_out(settler: Actions, queue: SqsQueue, received: list[Message], admission: Admission,
              guard: DeliveryGuard) -> list[Message]:
    """Each message's part of `admission` (of `received`, a receive or what was kept from one), as `sort_out`
    says; the messages to deliver now."""
    for message in admission.duplicates:
        settler.registry.count(queue.name, "Duplicates")
        logger.info("queue=%s message=%s key=%s already delivered: deleted as a duplicate", queue.name,
                    message.message_id, shown_key(message),
                    extra=fields(queue=queue.name, message_id=message.message_id, outcome="duplicate"))
        settler.delete(queue, message)
    fail_reused(settler, queue, admission.reused)
    if admission.later:
        settler.registry.count(queue.name, "IdempotencyInProgress", len(admission.later))
    for message, seconds in admission.later:
        logger.info("queue=%s message=%s key=%s is claimed elsewhere: visible again in %ds", queue.name,
                    message.message_id, shown_key(message), seconds,
                    extra=fields(queue=queue.name, message_id=message.message_id))
        settler.note_undelivered(message)
        settler.change_visibility(queue, message, seconds)
    if admission.lapsed:
        let_lapse(settler, queue, admission.lapsed, guard)
    is_pending = set(id(message) for message, _ in admission.pending)
    is_candidate = is_pending | set(map(id, admission.deliver))
    candidates = [message for message in received if id(message) in is_candidate]
    kept, behind = split_behind(received, candidates, [message for message, _ in admission.later]
                                + admission.reused + admission.lapsed)
    if behind:
        settler.release(behind)
    is_kept = set(map(id, kept))
    pending = [pair for pair in admission.pending if id(pair[0]) in is_kept]
    deliver = [message for message in kept if id(message) not in is_pending]
    return keep_pending(settler, queue, received, deliver, pending, guard) if pending else deliver


def keep_pending(settler: Actions, queue: SqsQueue, received: list[Message], deliver: list[Message],
                 pending: list[tuple[Message, Claim]], guard: DeliveryGuard) -> list[Message]:
    """Claims the table did not take are claimed again in place, their messages kept (leased) with, on a FIFO
    queue, every group-mate from the receive, those before them too: one delivered meanwhile that failed would be
    received again behind the ones kept, out of its group's order. Returns the rest of `deliver`."""
    groups = {message.fifo_group for message, _ in pending if message.fifo_group is not None}
    riding = [message for message in deliver if message.fifo_group in groups] if groups else []
    deliver = [message for message in deliver if message.fifo_group not in groups] if groups else deliver
    is_carried = set(map(id, riding)) | set(id(message) for message, _ in pending)
    carried = [message for message in received if id(message) in is_carried]
    logger.debug("queue=%s %d idempotency claims not taken by the table: kept (with %d group-mates) and "
                 "claimed again in place", queue.name, len(pending), len(riding), extra=fields(queue=queue.name))
    guard.retry(queue.name, carried, pending, lambda answer: readmit(settler, queue, carried, answer, guard))
    return deliver


def readmit(settler: Actions, queue: SqsQueue, carried: list[Message], admission: Admission | None,
            guard: DeliveryGuard) -> None:
    """Messages kept after their receive while their claims were retried in place: what the claims said
    (`carry_out`), the ones to deliver into their queue's buffer; all released (visible again now, the receive
    not counted toward max_retries) if the retries were given up."""
    if admission is None:
        settler.release([message for message in carried if not message.settled])
        return
    deliver = carry_out(settler, queue, carried, admission, guard)
    settler.let_go_settled(carried)
    if deliver and not settler.hand_over(queue, deliver):
        settler.release(deliver)


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
