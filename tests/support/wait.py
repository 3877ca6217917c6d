"""Polling with a deadline: tests never sleep a fixed time and hope."""

from __future__ import annotations

import time
from typing import Callable, TypeVar

import gevent

T = TypeVar("T")


def wait_until(
    predicate: Callable[[], T],
    timeout: float,
    interval: float = 0.02,
    message: str | Callable[[], str] = "condition not met",
) -> T:
    """Return the first truthy value of `predicate()`, or fail once `timeout` seconds pass.

    Sleeps with gevent so servers running in this process keep serving while we wait.
    `message` may be a callable, so the failure can show state as it was at the deadline.
    """
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() >= deadline:
            text = message() if callable(message) else message
            raise AssertionError(f"after {timeout:g}s: {text}")
        gevent.sleep(interval)
