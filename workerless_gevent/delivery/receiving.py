"""Receiving for the poller: short receives for the free slots (several at once on a busy queue, and
enough ahead to cover one round trip at the recent pace), one long-polling watcher per idle queue, and
back-off and warnings while a queue's receives fail. What it receives lands in the queue's buffer,
from which the poller chooses."""

from __future__ import annotations

import logging
import math
import random
import time
from collections.abc import Callable
from typing import TYPE_CHECKING

import gevent
import gevent.event
import gevent.pool

from ..errors import AWS_ERRORS, describe_error, error_code
from ..logs import duration_text, fields
from ..message import Message
from ..metrics import OVERALL
from ..supervision import log_unexpected, spawn_supervised
from .queue import SqsQueue

if TYPE_CHECKING:
    from .poller import QueueState

logger = logging.getLogger(__name__)

CREDENTIAL_CODES = ("SignatureDoesNotMatch", "InvalidClientTokenId", "RequestExpired", "InvalidSignatureException",
                    "AccessDenied", "AccessDeniedException", "ExpiredToken", "UnrecognizedClientException")

MAX_BACKOFF_SECONDS = 10.0  # a failing queue is tried again at least this often: it heals within that
MAX_RECEIVES_PER_QUEUE = 32  # 320 messages per round trip: 6,400 a second at 50 ms
AHEAD_PER_SLOT = 8  # the most deliveries per slot that receives ahead count on during one round trip
# A queue whose receives keep failing is logged at WARNING when it starts, after these many seconds
# of failing, then every REPEAT_WARNING_SECONDS: never silent, never a flood.
WARN_AFTER_SECONDS = (60.0, 300.0)
REPEAT_WARNING_SECONDS = 900.0
FILL_RETRY_SECONDS = 0.5  # while a batching window fills: the pause after an empty receive
SMOOTHING = 0.1  # weight of the newest sample in the moving averages of receive time and delivery pace

Admit = Callable[[SqsQueue, list[Message]], list[Message]]
Count = Callable[[str, str], None]


class Receiver:
    """The receives of every queue; the poller asks for them (`receive_for`, `receive_ahead`) and is woken
    (`wake`) when messages land or a queue goes idle."""

    def __init__(self, *, batch_size: int, poll_for_seconds: int, sleep_seconds: float, rng: random.Random,
                 stopping: gevent.event.Event, admit: Admit, count: Count, wake: gevent.event.Event,
                 pace: Callable[[], float]) -> None:
        self.batch_size = batch_size
        self.poll_for_seconds = poll_for_seconds
        self.sleep_seconds = sleep_seconds
        self.rng = rng
        self.stopping = stopping
        self.admit = admit
        self.count = count
        self.wake = wake
        self.pace = pace  # seconds between two deliveries ending, on average (the poller's moving average)
        self.receivers = gevent.pool.Group()

    def stop(self, states: list[QueueState], cancel_watchers: bool, wait_seconds: float = 5.0) -> None:
        """Let short receives land (their messages are released with the buffer); kill the watchers if asked.
        A receive abandoned on its way is still answered by SQS, which hides its messages for the visibility
        timeout: the last stop waits longer (`wait_seconds`) and names the queues of any still unanswered."""
        self.receivers.join(timeout=wait_seconds)
        if cancel_watchers:
            for state in states:
                if state.receiving:
                    logger.warning("queue=%s %d receives still unanswered at stop: the up to %d messages SQS hands "
                                   "them stay invisible until their visibility timeout (%ds)", state.queue.name,
                                   state.receiving, state.receiving * self.batch_size,
                                   state.queue.config.visibility_timeout, extra=fields(queue=state.queue.name))
            watchers = [state.watcher for state in states if state.watcher is not None]
            gevent.killall(watchers, block=True, timeout=2)

    def receive_for(self, state: QueueState, free_slots: int) -> bool:
        """Start receives on an emptied ready queue, one per batch the free slots can take at once
        (one round trip per batch would cap a queue at 10 messages per SQS latency); True while
        any is in flight."""
        if not state.is_ready or state.buffer or state.watcher is not None:
            return False  # a buffer held back by busy FIFO groups is the one batch we keep
        wanted = min(state.receive_width, -(-free_slots * state.take_size // self.batch_size))
        while state.receiving < wanted:
            self._start_receive(state)
        return state.receiving > 0

    def receive_ahead(self, state: QueueState, free_slots: int, busy_slots: int, pace_seconds: float = 0.0) -> None:
        """On a standard queue with a backlog, keep enough receives on their way that the buffer never
        runs dry: messages for the other free slots, and for the deliveries that will end while a receive
        is on its way (Little's law: the recent pace of deliveries times the receive round trip; on a
        real network that is several receives in flight, not one)."""
        if not state.is_ready or state.watcher is not None or state.queue.config.is_fifo:
            return
        slots = free_slots + busy_slots
        # A rate limit paces the queue's deliveries more slowly than the daemon's pace may say.
        soon = min(state.receive_seconds / max(self.pace(), pace_seconds), AHEAD_PER_SLOT * slots)
        wanted = (free_slots + soon) * state.take_size
        coming = len(state.buffer) + state.receiving * self.batch_size
        while coming < wanted and state.receiving < state.receive_width:
            self._start_receive(state)
            coming += self.batch_size

    def fill(self, state: QueueState, wanted_messages: int) -> float:
        """While a batching window is open: receive until the batch could be full. After a receive came
        back empty, wait FILL_RETRY_SECONDS before the next (SQS answers a short receive empty now and then
        even with a backlog); after a failed one, stop (the watcher's back-off takes over at the window's
        end). Returns how long until it may try again, 0 when receives are on their way or not needed."""
        if not state.is_ready or state.watcher is not None or state.short_failures:
            return 0.0
        retry = state.last_empty_at + FILL_RETRY_SECONDS - time.monotonic()
        if retry > 0 and not state.receiving:
            return retry
        coming = len(state.buffer) + state.receiving * self.batch_size
        while coming < wanted_messages and state.receiving < state.receive_width:
            self._start_receive(state)
            coming += self.batch_size
        return 0.0

    def _start_receive(self, state: QueueState) -> None:
        state.receiving += 1
        self.receivers.spawn(self._receive_now, state)

    def _receive_now(self, state: QueueState) -> None:
        started = time.monotonic()
        failed = False
        try:
            messages = self._receive(state, 0)
            state.receive_seconds = moving_average(state.receive_seconds, time.monotonic() - started)
            self._note_success(state)
            state.short_failures = 0
        except AWS_ERRORS as error:
            # One failure (after the wire's own retries) on a busy queue is a blip: keep receiving. Two in a
            # row hand the queue to its watcher, which backs off.
            failed = True
            state.short_failures += 1
            state.last_error = describe_error(error)
            state.last_error_at = time.time()
            if state.short_failures == 1:
                logger.info("queue=%s receive failed, trying again: %s", state.queue.name, state.last_error,
                            extra=fields(queue=state.queue.name))
            else:
                # The watcher's first back-off is the WARNING (with how long it has failed), not this.
                logger.debug("queue=%s receive failed, watching it instead: %s", state.queue.name, state.last_error,
                             extra=fields(queue=state.queue.name))
                state.failing_since = state.failing_since or time.monotonic()
            messages = []
        except Exception as error:  # the watcher takes over, with its backoff
            self.count(OVERALL, "InternalErrors")
            log_unexpected(logger, f"queue={state.queue.name} receive", error, **fields(queue=state.queue.name))
            messages = []
        finally:
            state.receiving -= 1
        # Full batches mean a backlog: widen to more receives at once. A short one halves the width (real
        # SQS answers short receives with fewer messages now and then, backlog or not); an empty one
        # narrows it back to one.
        if len(messages) >= self.batch_size:
            state.receive_width = min(MAX_RECEIVES_PER_QUEUE, state.receive_width * 2)
        else:
            state.receive_width = max(1, state.receive_width // 2) if messages else 1
        if not messages and not (failed and state.short_failures == 1):
            state.is_ready = False  # no more receives on it; the last one in flight decides what next
        if not state.receiving and not state.is_ready and state.watcher is None:
            if state.buffer:
                state.is_ready = True  # another receive brought messages: try again once they are taken
            elif not self.stopping.is_set() and not state.is_retired:
                self.go_idle(state)
        self.wake.set()

    def _receive(self, state: QueueState, wait_seconds: int) -> list[Message]:
        messages = state.queue.receive(self.batch_size, wait_seconds)
        if not messages:
            state.last_empty_at = time.monotonic()
        admitted = self.admit(state.queue, messages)
        state.buffer.extend(admitted)
        return messages

    def go_idle(self, state: QueueState) -> None:
        state.is_ready = False
        state.watcher = spawn_supervised(f"queue={state.queue.name} watcher", lambda: self._watch(state),
                                         self.stopping, self.count, self.rng)

    def _watch(self, state: QueueState) -> None:
        """Long-poll one idle queue until it yields messages, backing off on its own errors."""
        while not self.stopping.is_set() and not state.is_retired:
            try:
                messages = self._receive(state, self.poll_for_seconds)
            except AWS_ERRORS as error:
                self._back_off(state, error)
                continue
            except Exception as error:  # a malformed reply or a bug must not silence this queue for good
                self.count(OVERALL, "InternalErrors")
                log_unexpected(logger, f"queue={state.queue.name} receive", error, **fields(queue=state.queue.name))
                self._back_off(state, error)
                continue
            self._note_success(state)
            state.is_drained = not messages
            if messages:
                state.is_ready = True
                state.watcher = None
                self.wake.set()
                return
            if self.sleep_seconds:
                self.stopping.wait(self.sleep_seconds)

    def _back_off(self, state: QueueState, error: BaseException) -> None:
        # Full jitter between 1 s and a cap that doubles up to 10 s: a dead endpoint is never hot-looped.
        state.failures += 1
        now = time.monotonic()
        state.failing_since = state.failing_since or now
        failing_seconds = now - state.failing_since
        state.last_error = describe_error(error)
        state.last_error_at = time.time()
        seconds = self.rng.uniform(1.0, min(MAX_BACKOFF_SECONDS, 2.0 ** min(state.failures, 5)))
        if state.failures == 1 and error_code(error).endswith(CREDENTIAL_CODES):
            logger.error("queue=%s receive refused: %s. Check the credentials, and the clock: SQS rejects "
                         "requests signed more than 5 minutes off. Retrying in %.1fs",
                         state.queue.name, describe_error(error), seconds, extra=fields(queue=state.queue.name))
            state.warnings_logged = 1
        elif state.failures == 1 or failing_seconds >= warning_due_seconds(state.warnings_logged):
            logger.warning("queue=%s receive failed (%d in a row), retrying in %.1fs: %s; failing for %s, "
                           "nothing is received from it meanwhile", state.queue.name, state.failures, seconds,
                           describe_error(error), duration_text(failing_seconds), extra=fields(queue=state.queue.name))
            state.warnings_logged += 1
        else:
            logger.debug("queue=%s receive failed (%d in a row), retrying in %.1fs: %s",
                         state.queue.name, state.failures, seconds, describe_error(error), extra=fields(queue=state.queue.name))
        self.stopping.wait(seconds)

    def _note_success(self, state: QueueState) -> None:
        state.has_received = True
        if state.failing_since is not None:
            logger.warning("queue=%s receiving again after %d failures over %s", state.queue.name, state.failures,
                           duration_text(time.monotonic() - state.failing_since), extra=fields(queue=state.queue.name))
        state.failures = 0
        state.failing_since = None
        state.warnings_logged = 0


def moving_average(average: float, sample: float) -> float:
    """Exponentially smoothed; an average of 0 or infinity means no sample yet."""
    if average == 0 or average == math.inf:
        return sample
    return average + SMOOTHING * (sample - average)


def warning_due_seconds(warnings_logged: int) -> float:
    """How long a queue must have failed before its next WARNING: 1 min, 5 min, then every 15 min."""
    if warnings_logged <= len(WARN_AFTER_SECONDS):
        return WARN_AFTER_SECONDS[warnings_logged - 1] if warnings_logged else 0.0
    return WARN_AFTER_SECONDS[-1] + REPEAT_WARNING_SECONDS * (warnings_logged - len(WARN_AFTER_SECONDS))
