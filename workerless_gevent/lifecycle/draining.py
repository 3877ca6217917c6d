"""The wait for queues a reload took out of the poller: until each one's receives have landed, its watcher
has ended its last long poll and its deliveries have ended, or until the daemon starts stopping."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Collection

import gevent.event

from ..delivery.poller import Work
from ..delivery.queue_state import QueueState

# The wait's progress line keeps the logger name it has always had (log filters and searches select on it).
logger = logging.getLogger("workerless_gevent.lifecycle.engine")

DRAIN_CHECK_SECONDS = 0.1
DRAIN_LOG_SECONDS = 30.0


def has_drained(state: QueueState, in_flight: Collection[Work]) -> bool:
    """Its receives have landed, its watcher has ended its last long poll, its deliveries have ended."""
    return state.receiving.is_quiet() and not any(work.state is state for work in list(in_flight))


def wait_for_all_drained(states: list[QueueState], in_flight: Callable[[], Collection[Work]],
                         stopping: gevent.event.Event) -> bool:
    """True once every one of `states` has drained; False if the daemon started stopping first."""
    started = logged = time.monotonic()
    while not all(has_drained(state, in_flight()) for state in states):
        if stopping.wait(DRAIN_CHECK_SECONDS):
            return False
        if time.monotonic() - logged >= DRAIN_LOG_SECONDS:
            logged = time.monotonic()
            busy = [state.queue.name for state in states if not has_drained(state, in_flight())]
            logger.info("reload: still draining %s after %.0fs (deliveries running, or a long poll ending)",
                        ",".join(busy), logged - started)
    return True
