"""Claims the table throttled or failed, kept by the daemon: claimed again in place after a jittered back-off
while their messages stay leased (the heartbeat keeps them hidden), never sent back to SQS to be received again,
which would spend one of each message's receives (a queue's redrive policy counts them, delivered or not)."""

from __future__ import annotations

import logging
import random
import time
from collections.abc import Callable, Collection

import gevent
import gevent.event
import gevent.pool

from ..message import Message
from ..rules import backoff_seconds, receipt_seconds_left
from ..supervision import log_unexpected
from .admission import Admission
from .store import Claim

logger = logging.getLogger(__name__)

RETRY_BASE_SECONDS = 0.2  # the first retry's ceiling; it doubles per try
RETRY_CAP_SECONDS = 5.0  # a table back on its feet is tried within this (a probe that answers nudges sooner)
RECEIPT_MARGIN_SECONDS = 60.0  # given up this long before SQS's receipt limit: the messages are released

# A receive's keys, claimed once: fills the admission (its `pending` the claims still not taken) and `deferred`
ClaimKeys = Callable[[str, list[tuple[Message, Claim]], Admission, dict[int, int]], None]
Done = Callable[[Admission | None], None]


class PendingClaims:
    def __init__(self, claim_keys: ClaimKeys, rng: random.Random, stopping: gevent.event.Event) -> None:
        self.claim_keys = claim_keys
        self.rng = rng
        self.stopping = stopping
        self.nudged = gevent.event.Event()  # replaced at each nudge: the retries waiting try again now
        self.generations: dict[str, int] = {}  # per queue, raised when a reload takes the queue out
        self.retries = gevent.pool.Group()

    def retry(self, queue: str, carried: list[Message], pending: list[tuple[Message, Claim]], done: Done) -> None:
        self.retries.spawn(self._retry, queue, self.generations.get(queue, 0), carried, pending, done)

    def abandon(self, queues: Collection[str]) -> None:
        for queue in queues:
            self.generations[queue] = self.generations.get(queue, 0) + 1
        self.nudge()

    def nudge(self) -> None:
        """The table answered a probe, or was made, or queues were taken out: every retry looks again now."""
        nudged, self.nudged = self.nudged, gevent.event.Event()
        nudged.set()

    def _retry(self, queue: str, generation: int, carried: list[Message], pending: list[tuple[Message, Claim]],
               done: Done) -> None:
        admission: Admission | None = Admission()
        deferred: dict[int, int] = {}
        attempt = 0
        try:
            while pending and admission is not None:
                attempt += 1
                if not self._wait(queue, generation, carried, attempt):
                    admission = None
                    break
                answer = Admission()
                self.claim_keys(queue, pending, answer, deferred)
                admission.duplicates += answer.duplicates
                admission.reused += answer.reused
                admission.lapsed += answer.lapsed
                pending = answer.pending
        except Exception as error:  # a bug: the messages are released, not left hidden until their deadline
            log_unexpected(logger, f"queue={queue} idempotency claims retried in place", error)
            admission = None
        if admission is not None and (self.stopping.is_set() or self.generations.get(queue, 0) != generation):
            admission = None  # a stop or a reload came while the last try was on its way
        if admission is not None:
            admission.sort(carried, deferred)
        elif not self.stopping.is_set():
            logger.info("queue=%s %d messages whose idempotency claims were being retried are released (%s)", queue,
                        len(carried), "the queue was taken out by a reload" if self.generations.get(queue, 0)
                        != generation else "close to SQS's 12-hour receipt limit, or an error")
        try:
            done(admission)
        except Exception as error:
            log_unexpected(logger, f"queue={queue} admitting messages whose claims were retried", error)

    def _wait(self, queue: str, generation: int, carried: list[Message], attempt: int) -> bool:
        """A jittered back-off (cut short by a nudge); False once the retries are to be given up."""
        seconds = backoff_seconds(attempt, self.rng, RETRY_CAP_SECONDS, RETRY_BASE_SECONDS)
        if gevent.wait([self.nudged, self.stopping], count=1, timeout=seconds) and not self.stopping.is_set():
            gevent.sleep(self.rng.uniform(0, RETRY_BASE_SECONDS))  # a nudge wakes every retry: spread them out
        if self.stopping.is_set() or self.generations.get(queue, 0) != generation:
            return False
        now = time.time()
        return all(receipt_seconds_left(message.received_at, now) > RECEIPT_MARGIN_SECONDS for message in carried)
