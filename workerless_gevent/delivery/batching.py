"""Deletes or visibility changes of one queue: coalesced into batches of 10, retried until each
message's own deadline, and never given up without a log line and a count."""

from __future__ import annotations

import logging
import math
import random
import time
from collections.abc import Callable
from typing import Any

import gevent
import gevent.event
import gevent.pool

from ..errors import AWS_ERRORS, describe_error
from ..logs import fields
from ..metrics import OVERALL, Count
from ..supervision import log_unexpected
from .batch_answers import RETRY_REASON, Answers, hide_handles, is_beyond_retry
from .batch_failures import RETRY_CAP_SECONDS, BatchEntry, GiveUps, Streak

logger = logging.getLogger(__name__)

BATCH_SIZE = 10
FLUSH_DELAY_SECONDS = 0.05  # a delete that waits this long costs nothing: the message stays hidden
EXPIRY_CHECK_SECONDS = 0.25
MIN_RETRY_WINDOW_SECONDS = 5.0  # even a message about to be visible again gets this long


class Batcher:
    """One kind of batch call (`kind`: "delete" or "visibility") on one queue, with one flusher
    greenlet while anything is pending.

    While calls fail as a whole (SQS unreachable, throttling past the wire's own retries, answers we cannot
    read), the batcher probes instead of storming: one call at a time, after a jittered exponential pause
    (at most RETRY_CAP_SECONDS; `batch_failures.Streak`), with the entries of the failed calls regrouped
    into full batches. Entries whose deadline comes first are given up, counted at once and logged
    together (`batch_failures.GiveUps`). `batch_answers.Answers` reads what an answered call says of each entry."""

    def __init__(self, queue_name: str, kind: str, send: Callable[[list[BatchEntry], float], dict[str, Any]],
                 count: Count, rng: random.Random, max_in_flight: int = 1) -> None:
        self.queue_name = queue_name
        self.kind = kind
        self.send = send
        self.count = count
        self.pending: list[BatchEntry] = []
        self.retrying: list[BatchEntry] = []
        self.flusher: gevent.Greenlet | None = None
        # Calls on their way at once: on a real network a call takes milliseconds, and one at a time
        # would cap a queue at 10 deletes per round trip.
        self.senders = gevent.pool.Pool(max_in_flight)
        # Counted here, not as len(senders): the pool forgets a finished call a hub turn after the call has
        # woken the flusher, which then saw it still on its way and waited for a wake-up that never came.
        self.calls = 0
        self.is_full = gevent.event.Event()
        self.has_new = gevent.event.Event()
        self.is_draining = False
        self.streak = Streak(queue_name, kind, rng)  # while its length > 0, one probe at a time
        self.given_up = GiveUps(queue_name, kind, count)
        self.answers = Answers(queue_name, kind, count, rng, self.given_up)
        self.last_reason = ""  # of the latest failure: the reason of entries whose deadline passes meanwhile
        self.next_expiry_check = 0.0

    def add(self, entry: BatchEntry) -> None:
        entry.deadline = max(entry.deadline, time.monotonic() + MIN_RETRY_WINDOW_SECONDS)
        self.pending.append(entry)
        if not self.streak.length:  # while failing, a new entry waits for the next probe: no need to wake the flusher
            self.has_new.set()
        if len(self.pending) >= BATCH_SIZE:
            self.is_full.set()
        self._ensure_flusher()

    def left(self) -> int:
        return len(self.pending) + len(self.retrying) + self.calls

    def unsent(self) -> list[BatchEntry]:
        """Entries not yet acknowledged (those of calls on their way excepted: their chunks are the senders')."""
        return [*self.pending, *self.retrying]

    def drain(self) -> gevent.Greenlet | None:
        """At stop: send what is pending without waiting for fuller batches; the flusher to wait for."""
        self.is_draining = True
        self.streak.probe_now()
        if self.left():
            self._ensure_flusher()
        self.is_full.set()
        self.has_new.set()
        return self.flusher

    def on_their_way(self) -> list[BatchEntry]:
        """At stop: the entries of calls not answered yet (the process may end before they are)."""
        return [entry for sender in list(self.senders) if not sender.dead for entry in sender.args[0]]

    def _ensure_flusher(self) -> None:
        if self.flusher is None:
            self.flusher = gevent.spawn(self._flush)

    def _flush(self) -> None:
        """The flusher: ends when nothing is left; an unexpected error costs a pause, not the loop."""
        try:
            while self.pending or self.retrying or self.calls:
                try:
                    chunk = self._next_chunk()
                except Exception as error:  # a bug: the entries stay, and are tried again after a pause
                    self.count(OVERALL, "InternalErrors")
                    log_unexpected(logger, f"queue={self.queue_name} {self.kind} flusher", error,
                                   **fields(queue=self.queue_name, batch=self.kind))
                    gevent.sleep(RETRY_CAP_SECONDS)
                    continue
                if chunk:
                    self.senders.spawn(self._send_guarded, chunk)  # waits while max_in_flight are on their way
                    self.calls += 1  # the call has not started yet: spawning does not switch to it
        finally:
            self.flusher = None
            self.given_up.log(force=True)

    def _send_guarded(self, chunk: list[BatchEntry]) -> None:
        probing = self.streak.length > 0
        try:
            self._send(chunk, probing)
        except Exception as error:  # a bug or an answer we never expected: try the chunk again later
            self.count(OVERALL, "InternalErrors")
            log_unexpected(logger, f"queue={self.queue_name} {self.kind} batch", error,
                           **fields(queue=self.queue_name, batch=self.kind))
            self._call_failed(chunk, f"{type(error).__name__}: {error}", probing)
        finally:
            self.calls -= 1
            self.has_new.set()  # the flusher may be waiting for this call to end

    def _next_chunk(self) -> list[BatchEntry]:
        """Up to 10 entries to send now, retries first; waits a little for a fuller batch of fresh ones.
        While failing: nothing until the last probe has ended and the pause is over, then one probe."""
        now = time.monotonic()
        self._expire(now)
        self.given_up.log()
        if self.streak.length and (self.calls or now < self.streak.resume_at):
            self._wait_for(None if self.calls else self.streak.resume_at, now)
            return []
        due = self.retrying if self.streak.length else [entry for entry in self.retrying if entry.not_before <= now]
        if not due and not self.pending:
            self._wait_for(min((entry.not_before for entry in self.retrying), default=None), now)
            return []
        if not due and len(self.pending) < BATCH_SIZE and not self.is_draining:
            self.is_full.clear()
            self.is_full.wait(FLUSH_DELAY_SECONDS)
        chunk = due[:BATCH_SIZE]
        if chunk:
            taken = set(map(id, chunk))
            self.retrying = [entry for entry in self.retrying if id(entry) not in taken]
        fresh = self.pending[:BATCH_SIZE - len(chunk)]
        del self.pending[:len(fresh)]
        chunk.extend(fresh)
        return [entry for entry in chunk if not (entry.is_heartbeat and entry.message.settled)]

    def _wait_for(self, until: float | None, now: float) -> None:
        """Until `until` (time.monotonic(), None: no time of its own), a new entry, the end of a call, or the
        next deadline of an entry left waiting, whichever comes first."""
        deadline = min((entry.deadline for entry in (*self.retrying, *self.pending)), default=math.inf)
        wake = min(math.inf if until is None else until, max(deadline, self.next_expiry_check))
        self.has_new.clear()
        self.has_new.wait(None if wake == math.inf else max(0.0, wake - now))

    def _expire(self, now: float) -> None:
        """Give up the entries that cannot be tried again before their deadline. Fresh entries go out within
        FLUSH_DELAY_SECONDS of their MIN_RETRY_WINDOW_SECONDS, so only retries and a failing streak need this,
        and a look every EXPIRY_CHECK_SECONDS is enough (not one per chunk: the list may be long)."""
        if not (self.streak.length or self.retrying) or now < self.next_expiry_check:
            return
        self.next_expiry_check = now + EXPIRY_CHECK_SECONDS
        earliest = max(now, self.streak.resume_at) if self.streak.length else now
        late = [entry for entry in (*self.retrying, *self.pending)
                if max(earliest, entry.not_before) >= entry.deadline]
        if late:
            gone = set(map(id, late))
            self.retrying = [entry for entry in self.retrying if id(entry) not in gone]
            self.pending = [entry for entry in self.pending if id(entry) not in gone]
            self.given_up.add(late, self.last_reason or "no call succeeded before the message's deadline")

    def _send(self, chunk: list[BatchEntry], probing: bool) -> None:
        self.count(self.queue_name, "SqsRequests")
        # The wire retries a call (botocore's standard mode) until its first message's deadline; a probe is
        # itself the retry, so it is sent once.
        retry_until = 0.0 if probing else min(entry.deadline for entry in chunk)
        try:
            response = self.send(chunk, retry_until)
        except AWS_ERRORS as error:
            text = hide_handles(describe_error(error), chunk)
            if is_beyond_retry(error):
                self.given_up.add(chunk, text)
            else:
                self._call_failed(chunk, text, probing)
            return
        if again := self.answers.judge(chunk, response):  # SQS failed these inside the answered call
            self.retrying.extend(again)
            self.last_reason = RETRY_REASON
            self.has_new.set()
        self._recovered()

    def _call_failed(self, chunk: list[BatchEntry], reason: str, probing: bool) -> None:
        """A whole call failed: its entries wait for the next probe; a failed probe makes the pause longer."""
        self.retrying.extend(chunk)  # first: nothing below may lose them
        for entry in chunk:
            entry.attempts += 1
        self.last_reason = reason
        self.streak.failed(reason, probing, self.is_draining)
        self.has_new.set()

    def _recovered(self) -> None:
        if self.streak.ended():
            self.given_up.log(force=True)
            self.has_new.set()  # what waited behind the probes goes out now
