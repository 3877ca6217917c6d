"""Per-call faults for the explorer's servers (the SQS model's front, the DynamoDB proxy, the app's Lambda side):
what the next call of an action gets, from the modes a schedule's timeline switches on and off, drawn by a seeded
rng per action (so the n-th call of an action gets the same draw whatever the interleaving with other actions).

A mode names the actions it faults (a share of one kind of call failing while the others answer) and the share
of their calls it takes, from 10 % to 100 %. The kind `slow` adds latency to the calls it takes and lets them go
on to the other modes (a slow call may also fail); any other kind is the call's one fault."""

from __future__ import annotations

import errno
import random
import socket
import struct
from dataclasses import dataclass, field
from typing import Any

import gevent.event
from gevent import pywsgi

LINGER_ZERO = struct.pack("ii", 1, 0)
STALL_KINDS = ("stall", "stall_reset")
SLOW = "slow"  # a call answered late: `Mode.stall` is its added latency


@dataclass(frozen=True)
class Fault:
    kind: str  # error kinds per service (see each server), or reset | reset_after | stall | stall_reset | slow
    seconds: float = 0.0  # how long a stall holds the call
    latency: float = 0.0  # added before anything else (a slow call)

    @property
    def delay(self) -> float:
        """How long the server holds the call before it answers (or faults) it."""
        return self.latency + self.seconds


@dataclass(frozen=True)
class Mode:
    """While on: `share` of the calls of `actions` (empty: every action the server faults) get one of `kinds`."""
    kinds: tuple[str, ...]
    share: float = 1.0
    actions: frozenset[str] = frozenset()
    stall: tuple[float, float] = (0.5, 2.0)


@dataclass
class FaultPlan:
    seed: int
    modes: list[Mode] = field(default_factory=list)  # switched by the schedule's timeline
    rngs: dict[str, random.Random] = field(default_factory=dict)
    ended: gevent.event.Event = field(default_factory=gevent.event.Event)  # set: stalls end at once

    def hold(self, seconds: float) -> None:
        """A stall or a slow call: `seconds`, or less once the run ends its stalls (a stop that never came)."""
        if seconds > 0:
            self.ended.wait(seconds)

    def choose(self, action: str) -> Fault | None:
        rng = self.rngs.setdefault(action, random.Random(f"{self.seed}:{action}"))
        latency = 0.0
        for mode in list(self.modes):
            if mode.actions and action not in mode.actions:
                continue
            draw = rng.random()
            if draw >= mode.share:
                continue
            kind = rng.choice(mode.kinds)
            if kind == SLOW:
                latency += rng.uniform(*mode.stall)
                continue
            return Fault(kind, rng.uniform(*mode.stall) if kind in STALL_KINDS else 0.0, latency)
        return Fault(SLOW, 0.0, latency) if latency else None


class ResetConnection(ConnectionResetError):
    """Raised out of a WSGI app once SO_LINGER 0 is set: pywsgi drops the connection unanswered and the close
    sends the client a RST (as tests/support/chaos.py does)."""

    def __init__(self) -> None:
        super().__init__(errno.ECONNRESET, "reset by the explorer")


class SocketHandler(pywsgi.WSGIHandler):  # type: ignore[misc]
    """pywsgi's handler, with the client socket in the environ so that a fault can reset it."""

    def get_environ(self) -> dict[str, Any]:
        environ: dict[str, Any] = super().get_environ()
        environ["explore.socket"] = self.socket
        return environ


def reset(environ: dict[str, Any]) -> None:
    try:
        environ["explore.socket"].setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, LINGER_ZERO)
    except OSError:
        pass  # the client left already
    raise ResetConnection()
