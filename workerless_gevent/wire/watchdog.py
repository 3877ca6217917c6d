"""The watchdog of `wire.http`'s exchanges: the one timer that enforces every read timeout and deadline.

Sockets block without a timeout of their own: a gevent timeout costs a timer per blocking read, which was about
a tenth of the daemon's CPU per message. Instead each exchange under way is a `Watch`, and one greenlet per pool
shuts the socket of an exchange past its deadline or silent for read_timeout: its blocked read or send returns
at once, and the exchange raises the error the watchdog marked.
"""

from __future__ import annotations

import socket
import time
from dataclasses import dataclass

import gevent
import gevent.socket

WATCH_SECONDS = 0.25  # the longest the watchdog sleeps: timeouts strike up to this late


class DeadlineExceeded(TimeoutError):
    """The whole exchange took longer than the caller allowed."""


@dataclass(slots=True)
class Watch:
    """An exchange under way, as the watchdog sees it."""

    deadline: float  # the whole exchange ends by then (time.monotonic())
    quiet_until: float  # the last read plus read_timeout
    expired: type[TimeoutError] | None = None  # set by the watchdog, which has shut the socket

    def timeout_error(self, read_timeout: float) -> TimeoutError:
        """What the exchange raises once the watchdog has marked it."""
        assert self.expired is not None
        if self.expired is DeadlineExceeded:
            return DeadlineExceeded("no complete answer before the deadline")
        return self.expired(f"no data for {read_timeout:g}s")


def watch_exchanges(watched: dict[gevent.socket.socket, Watch]) -> None:
    """Until no exchange is under way: mark and shut each one past its deadline or quiet_until."""
    while watched:
        now = time.monotonic()
        for sock, watch in list(watched.items()):
            if watch.expired is None and (now >= watch.deadline or now >= watch.quiet_until):
                watch.expired = DeadlineExceeded if now >= watch.deadline else TimeoutError
                try:
                    sock.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass
        soonest = min((min(w.deadline, w.quiet_until) for w in watched.values() if w.expired is None),
                      default=now + WATCH_SECONDS)
        gevent.sleep(min(WATCH_SECONDS, max(0.01, soonest - now)))
