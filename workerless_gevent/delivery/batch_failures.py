"""What a batcher (`batching.py`) does when its calls fail: the streak that paces its probes and says
when the failing begins and ends, and the entries it gives up, counted at once and logged together."""

from __future__ import annotations

import logging
import random
import time
from dataclasses import dataclass

from ..logs import duration_text, fields
from ..message import Message
from ..metrics import Count
from ..rules import backoff_seconds

logger = logging.getLogger("workerless_gevent.delivery.batching")  # one logger for the batches' lines

RETRY_BASE_SECONDS = 0.25
RETRY_CAP_SECONDS = 5.0  # a settlement is tried again at least this often until its deadline
DRAIN_RETRY_CAP_SECONDS = 0.5  # at stop, within the flush's few seconds, failing calls are probed this often
ANNOUNCE_AFTER_SECONDS = 10.0
QUIET_SECONDS = 60.0
GIVE_UP_LOG_SECONDS = 30.0  # given-up entries are logged together at most this often (counted at once)
IDS_PER_LINE = 100  # message ids per give-up line (a line stays a few KB)



@dataclass(slots=True, eq=False)
class BatchEntry:
    message: Message
    visibility_timeout_seconds: int | None  # None means delete
    deadline: float  # time.monotonic() past which no retry starts: the message is visible again by then
    is_heartbeat: bool = False
    attempts: int = 0
    not_before: float = 0.0  # time.monotonic() of its next try


class Streak:
    """Calls of one batcher that fail as a whole. While `length` > 0 the batcher sends one probe at a time,
    none before `resume_at`. Only a failed probe makes the pause longer: calls already on their way when the
    failures began start the streak, whatever their number. A streak is one WARNING when it begins and one
    INFO line when it ends; one that begins within QUIET_SECONDS of the last announced end is announced only
    once it has lasted ANNOUNCE_AFTER_SECONDS, so a flapping endpoint cannot flood the log."""

    def __init__(self, queue_name: str, kind: str, rng: random.Random) -> None:
        self.queue_name = queue_name
        self.kind = kind
        self.rng = rng
        self.length = 0  # 1 + probes in a row that failed
        self.resume_at = 0.0  # time.monotonic() before which no probe starts
        self.since = 0.0
        self.announced = False  # this streak's WARNING is out
        self.quiet_until = 0.0  # a streak that begins before this is announced late

    def failed(self, reason: str, probing: bool, draining: bool) -> None:
        now = time.monotonic()
        if not self.length:
            self.since = now
            self.announced = False
        self.length = self.length + 1 if probing else max(self.length, 1)
        if not self.announced and (now >= self.quiet_until or now - self.since >= ANNOUNCE_AFTER_SECONDS):
            self.announced = True
            logger.warning("queue=%s %s batches are failing (%s); retrying them until each message's deadline",
                           self.queue_name, self.kind, reason, extra=fields(queue=self.queue_name, batch=self.kind))
        else:
            logger.debug("queue=%s %s batch failed (streak %d): %s", self.queue_name, self.kind, self.length,
                         reason, extra=fields(queue=self.queue_name, batch=self.kind))
        cap = DRAIN_RETRY_CAP_SECONDS if draining else RETRY_CAP_SECONDS
        pause = backoff_seconds(self.length + 1, self.rng, cap, base_seconds=RETRY_BASE_SECONDS, floor=0.5)
        self.resume_at = max(self.resume_at, now + pause)

    def ended(self) -> bool:
        """A call succeeded: whether a streak ended with it."""
        if not self.length:
            return False
        now = time.monotonic()
        log = logger.info if self.announced else logger.debug
        log("queue=%s %s batches succeed again after failing for %s", self.queue_name, self.kind,
            duration_text(now - self.since), extra=fields(queue=self.queue_name, batch=self.kind))
        if self.announced:
            self.quiet_until = now + QUIET_SECONDS
        self.length = 0
        self.resume_at = 0.0
        return True

    def probe_now(self) -> None:
        """At stop the time is short: the next probe goes at once."""
        self.resume_at = min(self.resume_at, time.monotonic())


class GiveUps:
    """Entries given up: counted at once (DeleteFailed, VisibilityFailed); logged with their message ids, by
    reason, when `log(force=True)` is called (the flusher ends, the calls succeed again, the stop flushes)
    or GIVE_UP_LOG_SECONDS after the first of them, in lines of IDS_PER_LINE ids at most."""

    def __init__(self, queue_name: str, kind: str, count: Count) -> None:
        self.queue_name = queue_name
        self.kind = kind
        self.count = count
        self.unlogged: dict[str, list[BatchEntry]] = {}  # reason -> given up and counted, not yet logged
        self.first_unlogged_at = 0.0

    def add(self, entries: list[BatchEntry], reason: str) -> None:
        entries = [entry for entry in entries if not (entry.is_heartbeat and entry.message.settled)]
        if not entries:
            return
        self.count(self.queue_name, "DeleteFailed" if self.kind == "delete" else "VisibilityFailed", len(entries))
        if not self.unlogged:
            self.first_unlogged_at = time.monotonic()
        self.unlogged.setdefault(reason, []).extend(entries)
        self.log()

    def log(self, force: bool = False) -> None:
        if not self.unlogged or (not force and time.monotonic() - self.first_unlogged_at < GIVE_UP_LOG_SECONDS):
            return
        unlogged, self.unlogged = self.unlogged, {}
        for reason, entries in unlogged.items():
            for start in range(0, len(entries), IDS_PER_LINE):
                self._line(entries[start:start + IDS_PER_LINE], reason)

    def _line(self, entries: list[BatchEntry], reason: str) -> None:
        ids = ",".join(entry.message.message_id for entry in entries)
        heartbeats = sum(entry.is_heartbeat for entry in entries)
        cost = ("SQS will deliver them again" if self.kind == "delete"
                else "they may be delivered again while still running" if heartbeats == len(entries)
                else "they keep their current visibility")
        logger.error("queue=%s gave up on %s of %d messages (message=%s) after %d attempts: %s; %s", self.queue_name,
                     self.kind, len(entries), ids, max(entry.attempts for entry in entries) + 1, reason, cost,
                     extra=fields(queue=self.queue_name, batch=self.kind, message_id=ids, outcome="given up"))
