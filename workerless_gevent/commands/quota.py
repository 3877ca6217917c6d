"""What `redrive --max` and `--rate` allow its parallel workers: counts reserved before a receive, so N receives
at once never ask for more than is left to move, and one schedule of slots, so N senders keep to one rate."""

from __future__ import annotations

from collections.abc import Callable

BATCH_MESSAGES = 10  # SQS's most per ReceiveMessage and per SendMessageBatch


class Quota:
    """Shared by the workers of one run; greenlets switch only in `sleep`, so the counts need no lock."""

    def __init__(self, max_messages: int | None, rate: float | None, clock: Callable[[], float],
                 sleep: Callable[[float], None]) -> None:
        self.max_messages, self.rate = max_messages, rate
        self.clock, self.sleep = clock, sleep
        self.reserved = 0  # toward --max: asked for by receives on their way, plus what they brought
        self.scheduled = 0  # toward --rate: messages given a slot since the start
        self.started = clock()

    def take(self) -> int:
        """How many the next receive may ask for, reserved at once (0: --max is reached); with --rate, after
        waiting for that many slots, so no message is held invisible while its batch waits its turn."""
        size = BATCH_MESSAGES if self.max_messages is None else min(BATCH_MESSAGES, self.max_messages - self.reserved)
        if self.rate is not None:  # a batch is at most a second's worth, so pacing stays smooth
            size = min(size, max(1, int(self.rate)))
        if size <= 0:
            return 0
        self.reserved += size
        if self.rate is not None:
            self.scheduled += size
            self.sleep(max(0.0, self.started + self.scheduled / self.rate - self.clock()))
        return size

    def give_back(self, count: int) -> None:
        """A receive brought `count` fewer than it asked for: another receive may have them, and their slots.
        Slots handed back only make later batches wait less; every batch sent still waited for its last slot,
        which is at least all the messages sent before it, so the run never goes past the rate."""
        self.reserved -= count
        if self.rate is not None:
            self.scheduled -= count
