"""Idempotent delivery as the settler asks for it: at receive, each keyed message's claim (one transaction
per receive) says deliver, delete as a duplicate, or wait for the claim held elsewhere; after a success the
key becomes `completed` before the delete (`completions.py`); a message that fails or is released gives its
claim up first, so its next receive may claim it again at once."""

from __future__ import annotations

import logging
import math
import random
import time
from collections.abc import Callable
from dataclasses import dataclass, field

import gevent
import gevent.pool

from ..config.idempotency import IdempotencyConfig, KeySpec, parse_key
from ..config.model import Config
from ..errors import AWS_ERRORS, describe_error
from ..logs import fields
from ..message import Message
from ..rules import MAX_VISIBILITY_SECONDS, receipt_seconds_left
from .completions import Completions, Count
from .health import StoreGate, StoreHealth
from .keys import item_key, key_of
from .store import Claim, IdempotencyStore

logger = logging.getLogger(__name__)

REMOVE_SECONDS = 5.0  # what releasing claims may add to a release (a stop, a failed FIFO group)
REMOVE_AT_ONCE = 10


@dataclass
class Admission:
    """What the settler does with a receive's keyed messages."""
    deliver: list[Message] = field(default_factory=list)
    duplicates: list[Message] = field(default_factory=list)  # completed: delete undelivered
    later: list[tuple[Message, int]] = field(default_factory=list)  # visible again in so many seconds
    missing: int = 0  # delivered without a key


class Idempotency:
    def __init__(self, config: Config, store: IdempotencyStore, count: Count, rng: random.Random) -> None:
        assert config.idempotency is not None
        self.config: IdempotencyConfig = config.idempotency
        self.specs: dict[str, KeySpec] = {}
        self.unwraps: dict[str, bool] = {}
        self.update(config)
        self.store = store
        self.count = count
        self.rng = rng
        self.health = StoreHealth(self.config, rng)
        self.gate = StoreGate(self.health)
        self.completions = Completions(store, self.health, self.config.expires_after, count, rng)

    def update(self, config: Config) -> None:
        """The queues' keys, at start and after a reload (a claimed message keeps the key it was claimed under)."""
        self.specs = {queue.name: spec for queue in config.queues
                      if queue.idempotency_key and (spec := parse_key(queue.idempotency_key)) is not None}
        self.unwraps = {queue.name: queue.sns == "unwrap" for queue in config.queues}

    def has_key(self, queue: str) -> bool:
        return queue in self.specs

    def admit(self, queue: str, messages: list[Message]) -> Admission:
        """Read each message's key and claim the keys (one transaction); DynamoDB failing, `hold` keeps the
        keyed messages hidden for a back-off, `deliver` delivers them without claims."""
        admission = Admission()
        spec, unwrap = self.specs[queue], self.unwraps[queue]
        keyed: dict[str, tuple[Message, Claim]] = {}
        for message in messages:
            key = key_of(spec, message, unwrap)
            message.idempotency_key = key
            if key is None:
                admission.missing += 1
                admission.deliver.append(message)
                continue
            slot = item_key(queue, key)
            if slot in keyed:  # the same key twice in one receive: the second waits for the first's claim
                admission.later.append((message, claim_seconds(message)))
                continue
            keyed[slot] = (message, Claim(slot, f"{self.rng.getrandbits(64):016x}", claim_deadline(message)))
        if not keyed:
            return admission
        if self.health.is_waiting_for_table:  # a watcher's receive at start
            admission.later.extend((message, 1) for message, _ in keyed.values())
            return admission
        claims = [claim for _, claim in keyed.values()]
        try:
            verdicts = self.store.claim_all(claims)
        except AWS_ERRORS as error:
            self.count(queue, "IdempotencyStoreErrors", 1)
            seconds = self.health.failed(describe_error(error))
            pairs = list(keyed.values())
            if self.health.is_holding:
                admission.later.extend((message, seconds) for message, _ in pairs)
            else:
                admission.deliver.extend(message for message, _ in pairs)
            return admission
        self.health.answered()
        for (message, claim), verdict in zip(keyed.values(), verdicts):
            if verdict.kind == "claimed":
                message.claim = claim.token
                admission.deliver.append(message)
            elif verdict.kind == "completed":
                admission.duplicates.append(message)
            else:
                admission.later.append((message, within_limits(message, verdict.seconds)))
        return admission

    def claim_of(self, message: Message, deadline: int = 0) -> Claim:
        assert message.claim is not None and message.idempotency_key is not None
        return Claim(item_key(message.queue, message.idempotency_key), message.claim, deadline)

    def complete(self, message: Message, delete: Callable[[], None]) -> None:
        """After a success: `completed`, then `delete`."""
        claim = self.claim_of(message)
        message.claim = None
        self.completions.add(message, claim, delete)

    def give_up(self, messages: list[Message]) -> None:
        """Before these messages are visible again (a failure, a release) or dead-lettered: their claims go,
        several at once, within REMOVE_SECONDS. A claim left behind only delays its message until its deadline."""
        claims = [(message, self.claim_of(message)) for message in messages if message.claim is not None]
        for message, _ in claims:
            message.claim = None
        if not claims:
            return
        pool = gevent.pool.Pool(REMOVE_AT_ONCE)
        for message, claim in claims:
            pool.spawn(self._remove, message, claim)
        if not pool.join(timeout=REMOVE_SECONDS):
            pool.kill(block=False)
            logger.warning("%d idempotency claims not given up within %.0fs: their messages wait for the claims' "
                           "deadlines before they are delivered again", len(pool), REMOVE_SECONDS)

    def _remove(self, message: Message, claim: Claim) -> None:
        try:
            self.store.remove(claim)
        except AWS_ERRORS as error:
            self.count(message.queue, "IdempotencyStoreErrors", 1)
            self.health.failed(describe_error(error))
            logger.warning("queue=%s message=%s key=%s claim not given up (%s): the message waits until the claim's "
                           "deadline before it is delivered again", message.queue, message.message_id,
                           message.idempotency_key, describe_error(error),
                           extra=fields(queue=message.queue, message_id=message.message_id))

    def extend(self, messages: list[Message]) -> None:
        """The heartbeat kept these messages hidden longer: their claims follow (in the background)."""
        claimed = [message for message in messages if message.claim is not None]
        if claimed:
            gevent.spawn(self._extend, claimed)

    def _extend(self, messages: list[Message]) -> None:
        for message in messages:
            if message.claim is None:
                continue
            claim = self.claim_of(message, claim_deadline(message))
            try:
                if not self.store.extend(claim):
                    logger.warning("queue=%s message=%s key=%s: its claim lapsed and another took the key; both may "
                                   "deliver it", message.queue, message.message_id, message.idempotency_key,
                                   extra=fields(queue=message.queue, message_id=message.message_id))
            except AWS_ERRORS as error:
                self.count(message.queue, "IdempotencyStoreErrors", 1)
                self.health.failed(describe_error(error))


def claim_deadline(message: Message) -> int:
    """A claim lasts as long as its message stays hidden: epoch seconds, for other hosts to compare."""
    return math.ceil(time.time() + max(1.0, message.visible_until - time.monotonic()))


def claim_seconds(message: Message) -> int:
    """A copy behind a claim of ours: visible again when that claim would lapse."""
    return within_limits(message, max(1.0, message.visible_until - time.monotonic()))


def within_limits(message: Message, seconds: float) -> int:
    return int(max(1, min(math.ceil(seconds), MAX_VISIBILITY_SECONDS,
                          receipt_seconds_left(message.received_at, time.time()))))
