"""The watchers of idle queues: one greenlet per idle queue that long-polls it until it yields messages."""

from __future__ import annotations

import logging
import random
import time
from collections.abc import Callable
from dataclasses import dataclass

import gevent.event

from ..errors import AWS_ERRORS
from ..logs import fields
from ..message import Message
from ..metrics import OVERALL, Count
from ..rules import backoff_seconds
from ..supervision import log_unexpected, spawn_supervised
from .receive_failures import log_receive_failure, note_failure, note_success
from .receive_state import Receiving

logger = logging.getLogger("workerless_gevent.delivery.receiving")  # one logger for the receives' lines

MAX_BACKOFF_SECONDS = 10.0  # a failing queue is tried again at least this often: it heals within that
HOLD_LOOK_SECONDS = 1.0  # a held watcher looks again at least this often (the hold may end early)

Receive = Callable[[Receiving, int], list[Message]]  # the receiver's: one receive, its messages admitted


@dataclass(eq=False)
class Watchers:
    """`Receiver` hands them a queue whose receives came back empty (`start`); its watcher ends once the queue
    yields messages (ready again, the poller woken), or at a stop or the queue's retirement."""
    receive: Receive
    poll_for_seconds: int
    sleep_seconds: float  # the pause after an empty long poll
    rng: random.Random
    stopping: gevent.event.Event
    count: Count
    wake: gevent.event.Event

    def start(self, state: Receiving) -> None:
        state.is_ready = False
        state.watcher = spawn_supervised(f"queue={state.queue.name} watcher", lambda: self._watch(state),
                                         self.stopping, self.count, self.rng)

    def _watch(self, state: Receiving) -> None:
        """Long-poll one idle queue until it yields messages, backing off on its own errors."""
        while not self.stopping.is_set() and not state.is_retired:
            if (held := state.hold_seconds()) > 0:  # every receive spends one of a message's receives
                self.stopping.wait(min(held, HOLD_LOOK_SECONDS))
                continue
            try:
                messages = self.receive(state, self.poll_for_seconds)
            except AWS_ERRORS as error:
                self._back_off(state, error)
                continue
            except Exception as error:  # a malformed reply or a bug must not silence this queue for good
                self.count(OVERALL, "InternalErrors")
                log_unexpected(logger, f"queue={state.queue.name} receive", error, **fields(queue=state.queue.name))
                self._back_off(state, error)
                continue
            note_success(state)
            state.is_drained = not messages
            if messages:
                state.is_ready = True
                state.watcher = None
                self.wake.set()
                return
            if self.sleep_seconds:
                self.stopping.wait(self.sleep_seconds)

    def _back_off(self, state: Receiving, error: BaseException) -> None:
        # Jitter between 1 s and a cap that doubles up to 10 s: a dead endpoint is never hot-looped.
        state.failures += 1
        now = time.monotonic()
        state.failing_since = state.failing_since or now
        note_failure(state, error)
        seconds = backoff_seconds(state.failures + 1, self.rng, MAX_BACKOFF_SECONDS, least_seconds=1.0)
        state.warnings_logged = log_receive_failure(state.queue.name, state.failures, now - state.failing_since,
                                                    state.warnings_logged, error, seconds)
        self.stopping.wait(seconds)
