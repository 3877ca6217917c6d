"""One queue's receive side (`Receiving`): its buffer, receives on their way, watcher and run of failures."""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field

import gevent

from ..message import Message
from .queue import SqsQueue


@dataclass(eq=False)
class Receiving:
    """One queue's receive side. The receiver alone writes it (`Receiver`, its `Watchers`, `receive_failures`);
    the poller reads it and takes from `buffer`, the one hand-off between them (the receiver appends what
    lands, the poller takes or empties it)."""
    queue: SqsQueue
    take_size: int  # messages per delivery: the target's batch_size (1 for the aws-sqsd contract)
    buffer: deque[Message] = field(default_factory=deque)
    is_ready: bool = True
    watcher: gevent.Greenlet | None = None
    failures: int = 0  # failed long polls in a row
    short_failures: int = 0  # failed short receives in a row
    failing_since: float | None = None  # time.monotonic() of the first of the receive failures in a row
    warnings_logged: int = 0  # WARNING lines about the current run of failures
    last_error: str = ""  # of the latest failed receive
    last_error_at: float = 0.0  # its time.time()
    receives: int = 0  # short receives on their way
    receive_width: int = 1  # how many may be on their way at once
    receive_seconds: float = 0.0  # moving average of a short receive's round trip
    is_drained: bool = False  # its latest long poll came back empty
    has_received: bool = False  # a receive of it has completed: it is no longer starting
    is_retired: bool = False  # a reload took its queue out of the poller: no new receive, no watcher
    last_empty_at: float = -math.inf  # time.monotonic() of its latest receive that came back empty
    is_fifo: bool = field(init=False)  # its queue's, read on every take
    # Seconds until the queue may receive at all (its watcher included): a store outage holds a keyed queue
    hold_seconds: Callable[[], float] = field(default=lambda: 0.0)
    # So many received messages wait for their groups' cap (`groups.Groups`) that it should receive no more
    is_full: Callable[[], bool] = field(default=lambda: False)

    def __post_init__(self) -> None:
        self.is_fifo = self.queue.config.is_fifo

    def is_held(self) -> bool:
        """No new receive for now: a store outage holds it, or enough messages wait for their groups' cap."""
        return self.hold_seconds() > 0 or self.is_full()

    def is_quiet(self) -> bool:
        """No receive on its way, and its watcher (if any) has ended its last long poll."""
        return not self.receives and not self.is_polling()

    def is_polling(self) -> bool:
        """Its watcher is still on its way (at a stop: in its last long poll)."""
        return self.watcher is not None and not self.watcher.dead
