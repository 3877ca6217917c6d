"""The delivery side of the running configuration: its live parts, leases, settler, poller and slots,
and a readiness gate per HTTP target with `ready_path`. A reload (`reload.py`) takes queues out of the
poller, waits for them to drain and puts their successors in; the daemon stops it (`Daemon.shut_down`)."""

from __future__ import annotations

import dataclasses
import logging
import random
import time
from collections.abc import Callable, Collection
from dataclasses import dataclass
from typing import TYPE_CHECKING

import gevent
import gevent.event

from ..aws.clients import Clients
from ..config.model import Config, HttpTargetConfig, TargetConfig
from ..delivery.flow import SharedLimit, TargetFlow, build_flow, build_flows
from ..delivery.leases import Leases
from ..delivery.ordering import STRATEGIES
from ..delivery.outcomes import Settler
from ..delivery.poller import Poller, Work
from ..delivery.queue import SqsQueue
from ..delivery.queue_state import QueueRow, QueueState, queue_row, take_buffered
from ..delivery.receiving import Release
from ..delivery.slots import Slots
if TYPE_CHECKING:  # imported only with [tracing]
    from ..tracing.spans import Tracing
from ..fleet.membership import Fleet
from ..idempotency.guard import Idempotency
from ..metrics import Registry
from ..observability.snapshot import TargetRow
from ..supervision import log_greenlet_failure, spawn_supervised
from ..targets import Target
from ..targets.http_batch import BatchHttpTarget
from ..targets.readiness import AppReadiness
from .assembly import build_idempotency, build_parts, make_table, queue_info

logger = logging.getLogger(__name__)

DRAIN_CHECK_SECONDS = 0.1
DRAIN_LOG_SECONDS = 30.0


@dataclass(eq=False)
class Gate:
    readiness: AppReadiness
    stopped: gevent.event.Event
    greenlet: gevent.Greenlet | None = None


@dataclass(frozen=True, slots=True)
class Successors:
    """What replaces parts of the running configuration, made (queues resolved) before anything drains."""
    queues: dict[str, SqsQueue | None]  # None: the queue is removed
    dead_letter_queues: dict[str, SqsQueue]  # by source queue, for the queues above that have one
    targets: dict[str, tuple[TargetConfig, Target] | None]  # None: the target is removed
    replaces_idempotency: bool = False  # [idempotency] changed: `idempotency` (None: removed) takes over
    idempotency: Idempotency | None = None


class Engine:
    def __init__(self, config: Config, clients: Clients, registry: Registry, rng: random.Random,
                 stopping: gevent.event.Event, request_stop: Callable[[str], None],
                 tracing: Tracing | None = None) -> None:
        self.config = config
        self.tracing = tracing  # [tracing]: a span per delivery
        self.started_config = config  # what the clients were built for
        self.clients = clients
        self.registry = registry
        self.rng = rng
        self.stopping = stopping
        self.request_stop = request_stop
        self.parts = build_parts(config, clients, registry, rng)
        self.idempotency = build_idempotency(config, clients, registry, rng)
        self.leases = Leases(self.parts.queues, self.idempotency.extend if self.idempotency else None)
        self.settler = Settler(self.parts.queues, self.parts.dead_letter_queues, registry, self.leases,
                               idempotency=self.idempotency)
        self.settler.note = tracing.note if tracing is not None else None
        self.flows: dict[str, TargetFlow] = build_flows(config)  # each target's in-flight limit and rate
        self.fleet = Fleet(config, clients.dynamodb, rng, wake=lambda: self.poller.wake.set())  # fleet-wide limits
        self.gates: dict[str, Gate] = {}
        for target in config.targets.values():
            self.add_gate(target)
        self.draining: list[QueueState] = []  # retired by a reload, deliveries still running
        self.replaced_queues: list[SqsQueue] = []  # flushed at stop with the others
        self.poller = self.build_poller(config, [self.queue_state(queue.name) for queue in config.queues])
        self.slots = self.build_slots(config, self.poller)
        self.dispatcher: gevent.Greenlet | None = None
        self.table_maker: gevent.Greenlet | None = None  # makes the idempotency table if missing
        for gate in self.fleet.gates.values():
            gate.has_work = lambda gate=gate: any(state.has_work() for state in self.poller.states  # type: ignore[misc]
                                                  if gate in state.fleet_gates)

    def build_poller(self, config: Config, states: list[QueueState]) -> Poller:
        """The poller, which the settler tells of every delivery's end from now on."""
        polling = config.polling
        poller = Poller(states, STRATEGIES[polling.strategy], batch_size=polling.batch_size,
                        poll_for_seconds=polling.poll_for, sleep_seconds=polling.sleep, rng=self.rng,
                        stopping=self.stopping, admit=self.settler.admit, count=self.registry.count)
        self.settler.finish = poller.finish
        if self.idempotency is not None:  # a probe that answers resumes the held queues at once
            self.idempotency.wake = poller.wake.set
        return poller

    def build_slots(self, config: Config, poller: Poller) -> Slots:
        slots = Slots(config, self.parts.targets, self.parts.queue_infos, self.parts.preparer, poller, self.settler,
                      self.registry, self.stopping, self.request_stop)
        slots.tracer = self.tracing
        return slots

    def queue_state(self, name: str) -> QueueState:
        queue = self.parts.queues[name]
        target = self.parts.targets[queue.config.target]
        gate = self.gates.get(queue.config.target)
        paused_seconds = target.pause.remaining_seconds
        if gate is not None:
            pause, readiness = target.pause, gate.readiness
            paused_seconds = lambda: max(pause.remaining_seconds(), readiness.remaining_seconds())  # noqa: E731
        target_config = self.config.targets.get(queue.config.target)
        window = target_config.max_batching_window if target_config is not None else 0.0
        one_group = isinstance(target_config, HttpTargetConfig) and target_config.batch_size > 1
        if self.tracing is not None and isinstance(target, BatchHttpTarget):  # its POST carries the batch's span
            target.trace_headers = self.tracing.batch_headers
        gates: tuple[SharedLimit, ...] = self.fleet.gates_for(queue.config)
        hold = None
        if self.idempotency is not None and queue.config.idempotency_key:
            gates += (self.idempotency.gate,)  # a holding queue waits while the table fails
            hold = self.idempotency.gate.hold_seconds  # and its watcher too
        return QueueState(queue, target.messages_per_delivery, paused_seconds, flow=self.flows[queue.config.target],
                          window_seconds=window, takes_one_group=one_group, fleet_gates=gates, receive_hold=hold)

    def start(self) -> None:
        """The gates' checking loops, then the slots (which find every gated queue paused)."""
        self.start_gates()
        self.start_table_maker()
        self.dispatcher = gevent.spawn(self.slots.dispatch)
        self.dispatcher.link_exception(log_greenlet_failure)

    def start_table_maker(self) -> None:
        """Queues with a key receive once the idempotency table is usable (or deliver, unclaimed)."""
        idempotency = self.idempotency
        if idempotency is not None:
            self.table_maker = gevent.spawn(make_table, idempotency, idempotency.store.dynamodb, self.stopping,
                                            self.rng, self.poller.wake.set)
            self.table_maker.link_exception(log_greenlet_failure)

    def use_idempotency(self, idempotency: Idempotency | None) -> None:
        """A reload's [idempotency] (None: removed), once every queue that claimed under the running one drained."""
        if self.table_maker is not None:
            self.table_maker.kill(block=False)
            self.table_maker = None
        self.idempotency = self.settler.idempotency = idempotency
        self.leases.extend_claims = idempotency.extend if idempotency is not None else None
        if idempotency is not None:
            self.clients = dataclasses.replace(self.clients, idempotency=idempotency.store.dynamodb)
            idempotency.wake = self.poller.wake.set
            self.start_table_maker()

    @property
    def in_flight(self) -> set[Work]:
        return self.slots.in_flight

    def loops(self) -> list[gevent.Greenlet]:
        return [gate.greenlet for gate in self.gates.values() if gate.greenlet is not None]

    def queue_rows(self) -> list[QueueRow]:
        now = time.monotonic()
        return self.poller.rows() + [queue_row(state, now) for state in self.draining]

    def target_rows(self) -> list[TargetRow]:
        rows = []
        for name, target in self.parts.targets.items():
            config = getattr(target, "config", None) or self.config.targets.get(name)  # the one in use, mid-reload too
            gate = self.gates.get(name)
            paused = max(0.0, target.pause.remaining_seconds())
            readiness = gate.readiness if gate is not None else None
            state = "waiting" if readiness is not None and not readiness.is_ready else "paused" if paused else "ready"
            endpoint = config.url if isinstance(config, HttpTargetConfig) else getattr(config, "function", "")
            flow = self.flows.get(name)
            rows.append(TargetRow(name, config.type if config is not None else "", endpoint, state, paused,
                                  readiness.last_error if readiness else "", readiness.last_error_at if readiness else 0.0,
                                  flow.limit if flow else 0, flow.ceiling if flow else 0,
                                  flow.bucket.rate if flow and flow.bucket else None,
                                  flow.in_flight if flow and target.messages_per_delivery > 1 else None))
        return rows

    def target_limits(self) -> dict[str, float]:
        """The TargetLimit gauge: each queue's target's current in-flight limit."""
        return {state.queue.name: float(state.flow.limit) for state in self.poller.states if state.flow is not None}

    def add_gate(self, target: TargetConfig) -> None:
        if isinstance(target, HttpTargetConfig) and target.ready_path:
            readiness = AppReadiness(target, on_ready=lambda: self.poller.wake.set(), ca_bundle=self.config.aws.ca_bundle)
            self.gates[target.name] = Gate(readiness, gevent.event.Event())

    def start_gates(self) -> None:
        for name, gate in self.gates.items():
            if gate.greenlet is None:
                readiness, stopped = gate.readiness, gate.stopped
                gate.greenlet = spawn_supervised(f"target={name} readiness", lambda: readiness.run(stopped), stopped,
                                                 self.registry.count, self.rng)

    def stop_gate(self, name: str) -> None:
        gate = self.gates.pop(name, None)
        if gate is not None:
            gate.stopped.set()

    def stop_gates(self) -> None:
        for name in list(self.gates):
            self.stop_gate(name)

    def retire(self, names: Collection[str]) -> list[QueueState]:
        """Take queues out of the poller: nothing more is received from them or taken from their buffers,
        which are released now; their deliveries go on."""
        retired = self.poller.retire(names)
        self.draining.extend(retired)
        self.release_buffers(retired)
        return retired

    def release_buffers(self, states: list[QueueState]) -> None:
        self.settler.release(take_buffered(states))

    def has_drained(self, state: QueueState) -> bool:
        """Its receives have landed, its watcher has ended its last long poll, its deliveries have ended."""
        return state.receiving.is_quiet() and not any(work.state is state for work in list(self.slots.in_flight))

    def wait_for_drained(self, states: list[QueueState]) -> bool:
        """Until every retired queue has drained (what landed meanwhile is released); False if the daemon
        started stopping first, which then finishes the job."""
        started = logged = time.monotonic()
        while not all(self.has_drained(state) for state in states):
            if self.stopping.wait(DRAIN_CHECK_SECONDS):
                return False
            if time.monotonic() - logged >= DRAIN_LOG_SECONDS:
                logged = time.monotonic()
                busy = [state.queue.name for state in states if not self.has_drained(state)]
                logger.info("reload: still draining %s after %.0fs (deliveries running, or a long poll ending)",
                            ",".join(busy), logged - started)
        self.release_buffers(states)
        for state in states:
            self.draining.remove(state)
        return True

    def replace(self, successors: Successors) -> None:
        """Swap in new queues and targets once their predecessors have drained; close what they replace."""
        parts = self.parts
        for name, queue in successors.queues.items():
            old = parts.queues.pop(name, None)
            if old is not None and old is not queue:
                self.replaced_queues.append(old)
            parts.queue_infos.pop(name, None)
            parts.dead_letter_queues.pop(name, None)
            if queue is not None:
                parts.queues[name] = queue
                parts.queue_infos[name] = queue_info(queue, self.clients)
                if name in successors.dead_letter_queues:
                    parts.dead_letter_queues[name] = successors.dead_letter_queues[name]
        for name, successor in successors.targets.items():
            self.stop_gate(name)
            old_target = parts.targets.pop(name, None)
            close = getattr(old_target, "close", None)
            if close is not None:
                close()
            if successor is not None:
                config, parts.targets[name] = successor
                self.flows[name] = build_flow(config, self.config.concurrency)
                self.add_gate(config)
        self.start_gates()

    def install(self, config: Config, names: Collection[str]) -> None:
        """Put queues (new ones, or the successors of drained ones) into the poller, in the configuration's order."""
        position = {queue.name: index for index, queue in enumerate(config.queues)}
        if self.idempotency is not None:
            self.idempotency.update(config)  # the keys of the queues it installs
        states = [state for state in self.poller.states if state.queue.name in position and state.queue.name not in names]
        states += [self.queue_state(name) for name in names]
        states.sort(key=lambda state: position[state.queue.name])
        self.poller.states = states
        self.poller.wake.set()

    def restart_slots(self, config: Config) -> None:
        """With every queue drained: new slots and a new poller, for a new concurrency or [polling]."""
        started_messages = self.slots.started_messages
        self.slots.pool.kill(block=True, timeout=2)  # each is waiting for work that no queue has
        if self.dispatcher is not None:
            self.dispatcher.kill(block=True, timeout=2)
        self.poller = self.build_poller(config, [])
        self.flows = build_flows(config)  # their ceilings follow concurrency
        self.slots = self.build_slots(config, self.poller)
        self.slots.started_messages = started_messages  # --max-messages counts across reloads
        self.dispatcher = gevent.spawn(self.slots.dispatch)
        self.dispatcher.link_exception(log_greenlet_failure)

    def stop_receiving(self, release: Release) -> None:
        """Every buffered message, the draining queues' included, goes to `release` now, and what receives on
        their way bring back goes there as it lands (one receiver serves the draining queues too)."""
        release(self.poller.stop(release) + take_buffered(self.draining))
