"""A SIGHUP that comes while the daemon starts (systemd's ExecReload, a config tool) is held, not fatal.

Python's default for SIGHUP ends the process. The daemon's own handler, which re-reads the configuration,
is installed only once it runs; before that, `hold` records the signal, and the daemon then reloads once,
as the configuration it read may already be older than the file. A handler, unlike SIG_IGN, is not
inherited by the processes started meanwhile (the credentials child keeps the default)."""

from __future__ import annotations

import signal
from types import FrameType

_held: list[int] = []


def _record(signum: int, frame: FrameType | None) -> None:
    _held.append(signum)


def hold() -> None:
    """From now until the daemon's handler replaces this one, a SIGHUP is only recorded."""
    signal.signal(signal.SIGHUP, _record)


def held() -> bool:
    """Whether a SIGHUP came while held (and forget it)."""
    came = bool(_held)
    _held.clear()
    return came
