"""Deletes or visibility changes of one queue: coalesced into batches of 10, retried until each
message's own deadline, and never given up without a log line and a count."""

from __future__ import annotations

import logging
import math
import random
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import gevent
import gevent.event
import gevent.pool

from ..errors import AWS_ERRORS, describe_error, error_code
from ..logs import fields
from ..message import Message
from ..metrics import OVERALL
from ..wire.retries import THROTTLE_CODES, TRANSIENT_CODES, retry_cost

logger = logging.getLogger(__name__)

BATCH_SIZE = 10
FLUSH_DELAY_SECONDS = 0.05  # a delete that waits this long costs nothing: the message stays hidden
RETRY_BASE_SECONDS = 0.25
RETRY_CAP_SECONDS = 5.0  # a settlement is tried again at least this often until its deadline
MIN_RETRY_WINDOW_SECONDS = 5.0  # even a message about to be visible again gets this long
STALE_HANDLE_CODES = ("ReceiptHandleIsInvalid", "InvalidParameterValue", "MessageNotInflight")
# Refreshable credentials are fetched anew on the next signature: worth another try.
REFRESHED_CODES = ("ExpiredToken", "ExpiredTokenException", "RequestExpired")

Count = Callable[..., None]  # Registry.count(queue, name, amount=1)


@dataclass(slots=True, eq=False)
class BatchEntry:
    message: Message
    visibility_timeout_seconds: int | None  # None means delete
    deadline: float  # time.monotonic() past which no retry starts: the message is visible again by then
    is_heartbeat: bool = False
    attempts: int = 0
    not_before: float = 0.0  # time.monotonic() of its next try


class UnexpectedAnswer(ValueError):
    """SQS answered 200 with something that is not a batch result."""


class Batcher:
    """One kind of batch call (`kind`: "delete" or "visibility") on one queue, with one flusher
    greenlet while anything is pending: one call at a time, so visibility changes of one message
    land in order (and moto loses deletes that race on one queue)."""

    def __init__(self, queue_name: str, kind: str, send: Callable[[list[BatchEntry]], dict[str, Any]],
                 count: Count, rng: random.Random, max_in_flight: int = 1) -> None:
        self.queue_name = queue_name
        self.kind = kind
        self.send = send
        self.count = count
        self.rng = rng
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

    def add(self, entry: BatchEntry) -> None:
        entry.deadline = max(entry.deadline, time.monotonic() + MIN_RETRY_WINDOW_SECONDS)
        self.pending.append(entry)
        self.has_new.set()
        if len(self.pending) >= BATCH_SIZE:
            self.is_full.set()
        self._ensure_flusher()

    def left(self) -> int:
        return len(self.pending) + len(self.retrying) + self.sending

    @property
    def sending(self) -> int:
        return self.calls

    def drain(self) -> gevent.Greenlet | None:
        """At stop: send what is pending without waiting for fuller batches; the flusher to wait for."""
        self.is_draining = True
        if self.left():
            self._ensure_flusher()
        self.is_full.set()
        self.has_new.set()
        return self.flusher

    def _ensure_flusher(self) -> None:
        if self.flusher is None:
            self.flusher = gevent.spawn(self._flush)

    def _flush(self) -> None:
        """The flusher: ends when nothing is left; an unexpected error costs a retry, not the loop."""
        try:
            while self.pending or self.retrying or self.sending:
                chunk = self._next_chunk()
                if chunk:
                    self.senders.spawn(self._send_guarded, chunk)  # waits while max_in_flight are on their way
                    self.calls += 1  # the call has not started yet: spawning does not switch to it
        finally:
            self.flusher = None

    def _send_guarded(self, chunk: list[BatchEntry]) -> None:
        try:
            self._send(chunk)
        except Exception as error:  # a bug or an answer we never expected: try the chunk again later
            self.count(OVERALL, "InternalErrors")
            logger.error("queue=%s %s batch of %d raised unexpectedly; trying it again",
                         self.queue_name, self.kind, len(chunk), exc_info=True, extra=fields(queue=self.queue_name, batch=self.kind))
            self._retry_later(chunk, f"{type(error).__name__}: {error}")
        finally:
            self.calls -= 1
            self.has_new.set()  # the flusher may be waiting for this call to end

    def _next_chunk(self) -> list[BatchEntry]:
        """Up to 10 entries due now, retries first; waits a little for a fuller batch of fresh ones."""
        now = time.monotonic()
        due = [entry for entry in self.retrying if entry.not_before <= now]
        if not due and not self.pending:
            self.has_new.clear()
            soonest = min((entry.not_before for entry in self.retrying), default=math.inf)
            self.has_new.wait(None if soonest == math.inf else soonest - now)  # or until a call ends
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

    def _send(self, chunk: list[BatchEntry]) -> None:
        self.count(self.queue_name, "SqsRequests")
        try:
            response = self.send(chunk)
        except AWS_ERRORS as error:
            text = self._hide_handles(describe_error(error), chunk)
            if retry_cost(error) is None and not error_code(error).endswith(REFRESHED_CODES):
                self._give_up(chunk, text)
            else:
                self._retry_later(chunk, text)
            return
        self._judge(chunk, response)

    def _judge(self, chunk: list[BatchEntry], response: dict[str, Any]) -> None:
        """Per-entry results: retry the retryable failures and any entry the answer left out."""
        successful, failed = response.get("Successful", []), response.get("Failed", [])
        if not isinstance(successful, list) or not isinstance(failed, list):
            raise UnexpectedAnswer(f"{self.kind} batch answer has no Successful/Failed lists: {response!r:.200}")
        done = {str(item.get("Id")) for item in successful if isinstance(item, dict)}
        retry: list[BatchEntry] = []
        for failure in failed:
            entry = self._entry(chunk, failure)
            if entry is None:
                logger.warning("queue=%s %s batch answer names an entry we did not send: %r",
                               self.queue_name, self.kind, failure, extra=fields(queue=self.queue_name, batch=self.kind))
                continue
            done.add(str(failure["Id"]))
            code = str(failure.get("Code", ""))
            text = self._hide_handles(f"{code}: {failure.get('Message', '')}", [entry])
            if code.endswith(STALE_HANDLE_CODES):
                self.count(self.queue_name, "StaleReceipts")
                self._give_up([entry], f"stale receipt handle ({code})", quiet=True)
            elif not failure.get("SenderFault", False) or code.endswith(THROTTLE_CODES + TRANSIENT_CODES):
                retry.append(entry)
            else:
                self._give_up([entry], text)
        missing = [entry for position, entry in enumerate(chunk) if str(position) not in done]
        if retry or missing:
            self._retry_later(retry + missing, "entries failed or left out of the answer")

    @staticmethod
    def _entry(chunk: list[BatchEntry], failure: object) -> BatchEntry | None:
        position = str(failure.get("Id", "")) if isinstance(failure, dict) else ""
        return chunk[int(position)] if position.isdigit() and int(position) < len(chunk) else None

    def _retry_later(self, entries: list[BatchEntry], reason: str) -> None:
        """Full-jitter backoff per entry; an entry whose deadline comes first is given up."""
        now = time.monotonic()
        expired: list[BatchEntry] = []
        for entry in entries:
            entry.attempts += 1
            pause = self.rng.uniform(0, min(RETRY_CAP_SECONDS, RETRY_BASE_SECONDS * 2**entry.attempts))
            if now + pause >= entry.deadline:
                expired.append(entry)
                continue
            entry.not_before = now + pause
            self.retrying.append(entry)
        if len(expired) < len(entries):
            logger.info("queue=%s %s of %d messages failed, trying again: %s",
                        self.queue_name, self.kind, len(entries) - len(expired), reason, extra=fields(queue=self.queue_name, batch=self.kind))
        if expired:
            self._give_up(expired, reason)
        self.has_new.set()

    def _give_up(self, entries: list[BatchEntry], reason: str, quiet: bool = False) -> None:
        entries = [entry for entry in entries if not (entry.is_heartbeat and entry.message.settled)]
        if not entries:
            return
        self.count(self.queue_name, "DeleteFailed" if self.kind == "delete" else "VisibilityFailed", len(entries))
        ids = ",".join(entry.message.message_id for entry in entries[:BATCH_SIZE])
        cost = ("SQS will deliver them again" if self.kind == "delete"
                else "they may be delivered again while still running" if entries[0].is_heartbeat
                else "they keep their current visibility")
        log = logger.info if quiet else logger.error
        log("queue=%s gave up on %s of %d messages (message=%s) after %d attempts: %s; %s", self.queue_name,
            self.kind, len(entries), ids, max(entry.attempts for entry in entries) + 1, reason, cost,
            extra=fields(queue=self.queue_name, batch=self.kind, message_id=ids, outcome="given up"))

    @staticmethod
    def _hide_handles(text: str, entries: list[BatchEntry]) -> str:
        """SQS quotes receipt handles in some messages; they stay out of the log."""
        for entry in entries:
            text = text.replace(entry.message.receipt_handle, "<receipt handle>")
        return text
