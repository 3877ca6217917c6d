"""Successes on their way to `completed`: written 25 to a BatchWriteItem, and only then deleted from SQS, so
that a copy received meanwhile finds its key claimed and a copy received later finds it completed."""

from __future__ import annotations

import logging
import random
import time
from collections.abc import Callable
from dataclasses import dataclass

import gevent
import gevent.event
import gevent.pool

from ..errors import AWS_ERRORS, describe_error
from ..logs import fields
from ..message import Message
from ..metrics import OVERALL, Count
from ..rules import backoff_seconds
from ..supervision import log_unexpected
from .health import StoreHealth
from .keys import shown_key
from .store import Claim, IdempotencyStore

logger = logging.getLogger(__name__)

BATCH = 25  # BatchWriteItem's limit
# BatchWriteItems on their way at once. Each holds 25 successes for a round trip, which on a busy daemon is
# DynamoDB's time plus the wait for the hub (30-45 ms at a 10 ms DynamoDB round trip in bench/idempotency.py):
# 4 wrote about 2,500 a second, fewer than were delivered, and the successes waiting to be written (their
# deletes with them) grew without end; 16 never all busy there.
MAX_IN_FLIGHT = 16
RETRY_CAP_SECONDS = 5.0
DEADLINE_MARGIN_SECONDS = 1.0  # the delete must still reach SQS before the message is visible again



@dataclass(eq=False)
class Success:
    message: Message
    claim: Claim
    delete: Callable[[], None]
    attempts: int = 0
    not_before: float = 0.0  # time.monotonic()


class Completions:
    def __init__(self, store: IdempotencyStore, health: StoreHealth, expires_after: int, count: Count,
                 rng: random.Random) -> None:
        self.store = store
        self.health = health
        self.expires_after = expires_after
        self.count = count
        self.rng = rng
        self.pending: list[Success] = []
        self.has_new = gevent.event.Event()
        self.senders = gevent.pool.Pool(MAX_IN_FLIGHT)
        self.writing = 0  # BatchWriteItems on their way
        self.flusher: gevent.Greenlet | None = None

    def add(self, message: Message, claim: Claim, delete: Callable[[], None]) -> None:
        self.pending.append(Success(message, claim, delete))
        if not self.writing or len(self.pending) >= BATCH:
            self.has_new.set()
        if self.flusher is None:
            self.flusher = gevent.spawn(self._flush)

    def left(self) -> int:
        return len(self.pending) + self.writing

    def drain(self, timeout_seconds: float) -> None:
        """At stop: write what is pending now, within `timeout_seconds` (the stop's share for it). A success whose
        `completed` write has not landed by then is not deleted: a copy of it would not be known as a duplicate.
        It keeps its claim (a copy stays undelivered until then) and SQS delivers it again once its visibility
        timeout ends, when the claim lapses too, unless a write still on its way lands first (then its delete
        follows, if the process lives long enough)."""
        deadline = time.monotonic() + timeout_seconds
        while self.left() and time.monotonic() < deadline:
            self.has_new.set()
            gevent.sleep(0.05)
        on_their_way = [success for sender in list(self.senders) if not sender.dead for success in sender.args[0]]
        by_queue: dict[str, list[str]] = {}
        for success in [*self.pending, *on_their_way]:
            by_queue.setdefault(success.message.queue, []).append(success.message.message_id)
        for queue, ids in by_queue.items():
            logger.error("queue=%s %d messages delivered whose `completed` writes to the idempotency table had not "
                         "landed when the stop's time for them ran out: not deleted, since a copy would not be known "
                         "as a duplicate; SQS delivers them again once their visibility timeout ends (their claims "
                         "lapse then too), unless a write still on its way lands first: %s", queue, len(ids),
                         ",".join(ids), extra=fields(queue=queue))

    def _flush(self) -> None:
        """A success goes out at once when no write is on its way; behind one, successes gather into a batch
        until it ends (or 25 are waiting). The window in which a kill after the app's answer leaves the key
        `in progress` (and the message to be delivered again) is then one DynamoDB round trip, not a wait to
        fill a batch, and a busy daemon still writes 25 at a time."""
        try:
            while self.pending:
                now = time.monotonic()
                due = [success for success in self.pending if success.not_before <= now]
                if not due or (self.writing and len(due) < BATCH):
                    self.has_new.clear()
                    later = [success.not_before for success in self.pending if success.not_before > now]
                    # a write ending, a batch filling, or a retry's time (when nothing else wakes this loop)
                    self.has_new.wait(min(later) - now if later and not (due and self.writing) else None)
                    continue
                chunk = due[:BATCH]
                taken = set(map(id, chunk))
                self.pending = [success for success in self.pending if id(success) not in taken]
                self.writing += 1
                self.senders.spawn(self._send, chunk)
        finally:
            self.flusher = None

    def _send(self, chunk: list[Success]) -> None:
        try:
            self._write(chunk)
        finally:
            self.writing -= 1
            self.has_new.set()

    def _write(self, chunk: list[Success]) -> None:
        try:
            written = self.store.complete_all([success.claim for success in chunk],
                                              int(time.time()) + self.expires_after)
        except AWS_ERRORS as error:
            self.count(chunk[0].message.queue, "IdempotencyStoreErrors", 1)
            self.health.failed(describe_error(error))
            self._again(chunk, describe_error(error))
            return
        except Exception as error:  # a bug must not leave these messages undeleted
            self.count(OVERALL, "InternalErrors", 1)
            log_unexpected(logger, "idempotency completions", error)
            self._again(chunk, f"{type(error).__name__}: {error}")
            return
        self.health.succeeded()
        for success in chunk:
            if success.claim.slot in written:
                success.delete()
        self._again([success for success in chunk if success.claim.slot not in written], "left unprocessed")

    def _again(self, successes: list[Success], reason: str) -> None:
        now = time.monotonic()
        for success in successes:
            success.attempts += 1
            success.not_before = now + backoff_seconds(success.attempts + 1, self.rng, RETRY_CAP_SECONDS, 0.05)
            if success.not_before >= success.message.visible_until - DEADLINE_MARGIN_SECONDS:
                self._give_up(success, reason)
            else:
                self.pending.append(success)
        if self.pending and self.flusher is None:
            self.flusher = gevent.spawn(self._flush)

    def _give_up(self, success: Success, reason: str) -> None:
        """The app has the message: delete it all the same, so at least this copy is not delivered again."""
        message = success.message
        logger.warning("queue=%s message=%s key=%s delivered, but its success could not be written to the "
                       "idempotency table (%s): deleted all the same; a copy received later may be delivered "
                       "again", message.queue, message.message_id, shown_key(message), reason,
                       extra=fields(queue=message.queue, message_id=message.message_id))
        success.delete()
