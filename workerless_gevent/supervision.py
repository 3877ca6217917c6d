"""Long-lived greenlets that outlive their own bugs: a loop that dies while the process looks
healthy is the worst failure a daemon can have, so every one runs under `run_supervised`."""

from __future__ import annotations

import logging
import random
import time
import traceback
from collections.abc import Callable
from typing import Any

import gevent
import gevent.event

from .metrics import OVERALL, Count
from .rules import backoff_seconds

logger = logging.getLogger(__name__)

MAX_RESTART_SECONDS = 30.0
REPEAT_WARNING_SECONDS = 60.0  # an unexpected error seen before is a one-line WARNING at most this often
SEEN_LIMIT = 1000

_last_logged: dict[tuple[str, str, str, int], float] = {}  # where, error type, file, line -> time.monotonic()


def log_unexpected(log: logging.Logger, where: str, error: BaseException, **extra: Any) -> None:
    """An unexpected error in a loop that goes on (the caller counts it as InternalErrors): ERROR with its
    traceback the first time `where` meets this error at this line of code; after that a one-line WARNING
    at most once a minute, and DEBUG in between, so an answer that stays malformed cannot flood the log."""
    frame = traceback.extract_tb(error.__traceback__)[-1] if error.__traceback__ else None
    key = (where, type(error).__name__, frame.filename if frame else "", (frame.lineno or 0) if frame else 0)
    now = time.monotonic()
    last = _last_logged.get(key)
    if last is None:
        if len(_last_logged) >= SEEN_LIMIT:
            _last_logged.pop(next(iter(_last_logged)))
        _last_logged[key] = now
        log.error("%s raised unexpectedly: %s: %s", where, type(error).__name__, error, exc_info=error, extra=extra)
    elif now - last >= REPEAT_WARNING_SECONDS:
        _last_logged[key] = now
        log.warning("%s raised unexpectedly again (traceback logged before): %s: %s", where, type(error).__name__,
                    error, extra=extra)
    else:
        log.debug("%s raised unexpectedly again: %s: %s", where, type(error).__name__, error, extra=extra)


def run_supervised(name: str, loop: Callable[[], None], stopped: gevent.event.Event, count: Count,
                   rng: random.Random) -> None:
    """Run `loop` until it returns; an unexpected exception is logged (with its traceback the first
    time it is seen), counted as InternalErrors, and the loop restarts after a jittered backoff
    (about 1 s, doubling to 30 s) unless `stopped` is set meanwhile."""
    failures = 0
    last_error = ""
    while True:
        try:
            loop()
            return
        except Exception as error:
            failures += 1
            count(OVERALL, "InternalErrors")
            pause = backoff_seconds(failures, rng, MAX_RESTART_SECONDS, floor=0.5)
            text = f"{type(error).__name__}: {error}"
            if text != last_error:
                logger.error("%s failed unexpectedly; restarting it in %.1fs", name, pause, exc_info=True)
            else:
                logger.error("%s failed again (%d times in a row): %s; restarting it in %.1fs",
                             name, failures, text, pause)
            last_error = text
        if stopped.wait(pause):
            return


def spawn_supervised(name: str, loop: Callable[[], None], stopped: gevent.event.Event, count: Count,
                     rng: random.Random) -> gevent.Greenlet:
    greenlet = gevent.spawn(run_supervised, name, loop, stopped, count, rng)
    greenlet.name = name
    greenlet.link_exception(log_greenlet_failure)
    return greenlet


def log_greenlet_failure(greenlet: gevent.Greenlet) -> None:
    """Linked to every long-lived greenlet, so even a supervisor's own death is never silent."""
    logger.error("greenlet %s died: %r", greenlet, greenlet.exception, exc_info=greenlet.exc_info)
