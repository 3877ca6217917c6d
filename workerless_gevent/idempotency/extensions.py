"""Claims that follow their messages' heartbeat: each extension moves a claim's deadline as far as its message
stays hidden, several at once in the background; failures are summed into one WARNING a minute."""

from __future__ import annotations

import logging
import math
import time

import gevent
import gevent.pool

from ..errors import AWS_ERRORS, describe_error
from ..logs import fields
from ..message import Message
from ..metrics import Count
from .deadlines import claim_deadline
from .health import StoreHealth, StoreTimeout, within
from .keys import claim_of, shown_key
from .store import IdempotencyStore

logger = logging.getLogger("workerless_gevent.idempotency.guard")  # the claims' lines keep the guard's name

EXTEND_AT_ONCE = 25  # claim extensions on their way at once
EXTEND_TIMEOUT_SECONDS = 10.0
EXTEND_WARNING_SECONDS = 60.0  # failed extensions are summed into one WARNING at most this often


class Extensions:
    def __init__(self, store: IdempotencyStore, health: StoreHealth, count: Count) -> None:
        self.store = store
        self.health = health
        self.count = count
        self.failures = 0  # failed claim extensions since the last WARNING about them
        self.warned_at = -math.inf  # time.monotonic() of that WARNING

    def extend(self, messages: list[Message]) -> None:
        """The heartbeat kept these messages hidden longer: their claims follow, several at once in the
        background (one after another, a thousand claims would lapse before the last was extended)."""
        claimed = [message for message in messages if message.claim is not None]
        if claimed:  # the heartbeat does not wait for DynamoDB
            gevent.spawn(self._extend_all, claimed)

    def _extend_all(self, messages: list[Message]) -> None:
        pool = gevent.pool.Pool(EXTEND_AT_ONCE)
        for message in messages:
            pool.spawn(self._extend, message)
        pool.join()

    def _extend(self, message: Message) -> None:
        if message.claim is None:
            return
        claim = claim_of(message, claim_deadline(message))
        try:
            with within(EXTEND_TIMEOUT_SECONDS):
                is_ours = self.store.extend(claim)
        except (*AWS_ERRORS, StoreTimeout) as error:
            self.count(message.queue, "IdempotencyStoreErrors", 1)
            self.health.failed(describe_error(error))
            self.note_failure(message, describe_error(error))
            return
        self.health.succeeded()
        if not is_ours:
            logger.warning("queue=%s message=%s key=%s: its claim lapsed and another took the key; both may "
                           "deliver it", message.queue, message.message_id, shown_key(message),
                           extra=fields(queue=message.queue, message_id=message.message_id))

    def note_failure(self, message: Message, error: str) -> None:
        """Failed extensions: one WARNING per interval with how many failed since the last one."""
        self.failures += 1
        now = time.monotonic()
        if now - self.warned_at < EXTEND_WARNING_SECONDS:
            return
        logger.warning("queue=%s message=%s key=%s: %d idempotency claims not extended in the last %.0fs (%s): a "
                       "claim that lapses lets a copy of its message be delivered meanwhile", message.queue,
                       message.message_id, shown_key(message), self.failures,
                       min(now - self.warned_at, EXTEND_WARNING_SECONDS), error,
                       extra=fields(queue=message.queue, message_id=message.message_id))
        self.failures = 0
        self.warned_at = now
