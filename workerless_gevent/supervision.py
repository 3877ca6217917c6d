"""Long-lived greenlets that outlive their own bugs: a loop that dies while the process looks
healthy is the worst failure a daemon can have, so every one runs under `run_supervised`."""

from __future__ import annotations

import logging
import random
from collections.abc import Callable

import gevent
import gevent.event

from .metrics import OVERALL

logger = logging.getLogger(__name__)

MAX_RESTART_SECONDS = 30.0
Count = Callable[[str, str], None]  # Registry.count(queue, name)


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
            pause = rng.uniform(0.5, 1.0) * min(MAX_RESTART_SECONDS, 2.0 ** (failures - 1))
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
