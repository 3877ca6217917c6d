"""How `redrive` shows its progress: tqdm's bar on a terminal (moved of the approximate total, rate, time
left), otherwise one line per tenth of the total with the rate so far, for logs and pipes."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Protocol, TextIO

STEPS = 10  # lines off a terminal: one per 10 %


class Progress(Protocol):
    def advance(self, count: int) -> None: ...

    def close(self) -> None: ...


def build_progress(total: int, stream: TextIO, description: str) -> Progress:
    if stream.isatty() and has_width(stream):
        return BarProgress(total, stream, description)
    return LineProgress(total, stream)


def has_width(stream: TextIO) -> bool:
    """A terminal that says it is 0 columns wide (a bare pty) would get an empty bar from tqdm: lines instead."""
    import os

    try:
        return os.get_terminal_size(stream.fileno()).columns > 0
    except (OSError, ValueError):
        return False


class BarProgress:
    """tqdm on the terminal; the total grows if more messages arrive than the queue counted at the start."""

    def __init__(self, total: int, stream: TextIO, description: str) -> None:
        from tqdm import tqdm

        self.bar = tqdm(total=total, unit="msg", desc=description, file=stream, dynamic_ncols=True, leave=True)

    def advance(self, count: int) -> None:
        if self.bar.total is not None and self.bar.n + count > self.bar.total:
            self.bar.total = self.bar.n + count
        self.bar.update(count)

    def close(self) -> None:
        self.bar.close()


class NoProgress:
    def advance(self, count: int) -> None:
        pass

    def close(self) -> None:
        pass


class LineProgress:
    """`moved 30 of 100 messages (30 %, 1,520 msg/s)` each time another tenth of the total is done."""

    def __init__(self, total: int, stream: TextIO, clock: Callable[[], float] = time.monotonic) -> None:
        self.total = total
        self.stream = stream
        self.clock = clock
        self.started = clock()
        self.done = 0
        self.steps_shown = 0

    def advance(self, count: int) -> None:
        self.done += count
        total = max(self.total, self.done, 1)
        step = self.done * STEPS // total
        if step > self.steps_shown:
            self.steps_shown = step
            rate = self.done / max(self.clock() - self.started, 1e-3)
            print(f"moved {self.done} of {max(self.total, self.done)} messages ({self.done * 100 // total} %, "
                  f"{rate:,.0f} msg/s)", file=self.stream, flush=True)

    def close(self) -> None:
        pass
