"""Readiness gates: for each HTTP target with `ready_path`, a supervised loop that checks its app, and the pause
its queues keep until the app answers. A gate comes and goes with its target (start, reload, stop)."""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass

import gevent
import gevent.event

from ..config.model import HttpTargetConfig, TargetConfig
from ..metrics import Count
from ..supervision import spawn_supervised
from ..targets.readiness import AppReadiness


@dataclass(eq=False)
class Gate:
    readiness: AppReadiness
    stopped: gevent.event.Event
    greenlet: gevent.Greenlet | None = None


class ReadinessGates:
    def __init__(self, on_ready: Callable[[], None], count: Count, rng: random.Random) -> None:
        self.on_ready = on_ready  # wakes the poller: the target's queues may receive again
        self.count = count
        self.rng = rng
        self.gates: dict[str, Gate] = {}

    def readiness(self, target: str) -> AppReadiness | None:
        gate = self.gates.get(target)
        return gate.readiness if gate is not None else None

    def paused_seconds(self, target: str, pause: Callable[[], float]) -> Callable[[], float]:
        """How long the target's queues wait: its own pause (`pause`), or longer while its app is not ready."""
        readiness = self.readiness(target)
        if readiness is None:
            return pause
        return lambda: max(pause(), readiness.remaining_seconds())

    def add(self, target: TargetConfig, ca_bundle: str | None) -> None:
        if isinstance(target, HttpTargetConfig) and target.ready_path:
            readiness = AppReadiness(target, on_ready=self.on_ready, ca_bundle=ca_bundle)
            self.gates[target.name] = Gate(readiness, gevent.event.Event())

    def start(self) -> None:
        """The checking loops of the gates added since the last start."""
        for name, gate in self.gates.items():
            if gate.greenlet is None:
                readiness, stopped = gate.readiness, gate.stopped
                gate.greenlet = spawn_supervised(f"target={name} readiness", lambda: readiness.run(stopped), stopped,
                                                 self.count, self.rng)

    def stop(self, target: str) -> None:
        gate = self.gates.pop(target, None)
        if gate is not None:
            gate.stopped.set()

    def stop_all(self) -> None:
        for name in list(self.gates):
            self.stop(name)

    def loops(self) -> list[gevent.Greenlet]:
        return [gate.greenlet for gate in self.gates.values() if gate.greenlet is not None]
