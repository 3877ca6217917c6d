"""The delivery side of the running configuration: its live parts, leases, settler, poller and slots,
and its targets' readiness gates (`gates.py`). A reload (`reload.py`) takes queues out of the poller,
waits for them to drain (`draining.py`) and puts their successors in (`successors.py`); the daemon stops
it (`Daemon.shut_down`)."""

from __future__ import annotations

import dataclasses
import random
import time
from collections.abc import Callable, Collection
from typing import TYPE_CHECKING

import gevent
import gevent.event

from ..aws.clients import Clients
from ..config.model import Config
from ..delivery.flow import TargetFlow, build_flow, build_flows
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
from ..supervision import log_greenlet_failure
from ..targets import Target
from ..targets.http_batch import BatchHttpTarget
from .assembly import build_idempotency, build_parts
from .draining import wait_for_all_drained
from .gates import ReadinessGates
from .queue_states import build_queue_state
from .successors import Successors, swap_queues, swap_target
from .target_rows import target_row


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
        self.idempotency = build_idempotency(config, clients, registry, rng, stopping)
        self.replaced_idempotency: list[Idempotency] = []  # a reload's predecessors: their last completions at stop
        self.leases = Leases(self.parts.queues, self.idempotency.extend if self.idempotency else None)
        self.settler = Settler(self.parts.queues, self.parts.dead_letter_queues, registry, self.leases,
                               idempotency=self.idempotency)
        self.settler.note = tracing.note if tracing is not None else None
        self.flows: dict[str, TargetFlow] = build_flows(config)  # each target's in-flight limit and rate
        self.fleet = Fleet(config, clients.dynamodb, rng, wake=lambda: self.poller.wake.set())  # fleet-wide limits
        self.gates = ReadinessGates(lambda: self.poller.wake.set(), registry.count, rng)
        for target in config.targets.values():
            self.gates.add(target, config.aws.ca_bundle)
        for built in self.parts.targets.values():
            self.join_target(built)
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
        self.settler.hand_over = poller.hand_over
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
        target_name = queue.config.target
        target = self.parts.targets[target_name]
        paused_seconds = self.gates.paused_seconds(target_name, target.pause.remaining_seconds)
        return build_queue_state(queue, target, self.config.targets.get(target_name), paused_seconds,
                                 self.flows[target_name], self.fleet.gates_for(queue.config), self.idempotency)

    def start(self) -> None:
        """The gates' checking loops, then the slots (which find every gated queue paused)."""
        self.gates.start()
        self.start_table_maker()
        self.dispatcher = gevent.spawn(self.slots.dispatch)
        self.dispatcher.link_exception(log_greenlet_failure)

    def start_table_maker(self) -> None:
        """Queues with a key receive once the idempotency table is usable (or deliver, unclaimed)."""
        idempotency = self.idempotency
        if idempotency is not None:
            self.table_maker = gevent.spawn(idempotency.make_table, self.stopping)
            self.table_maker.link_exception(log_greenlet_failure)

    def use_idempotency(self, idempotency: Idempotency | None) -> None:
        """A reload's [idempotency] (None: removed), once every queue that claimed under the running one drained."""
        if self.table_maker is not None:
            self.table_maker.kill(block=False)
            self.table_maker = None
        if self.idempotency is not None:
            self.replaced_idempotency.append(self.idempotency)
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
        return self.gates.loops()

    def queue_rows(self) -> list[QueueRow]:
        now = time.monotonic()
        return self.poller.rows() + [queue_row(state, now) for state in self.draining]

    def target_rows(self) -> list[TargetRow]:
        return [target_row(name, target, getattr(target, "config", None) or self.config.targets.get(name),
                           self.gates.readiness(name), self.flows.get(name))
                for name, target in self.parts.targets.items()]

    def target_limits(self) -> dict[str, float]:
        """The TargetLimit gauge: each queue's target's current in-flight limit."""
        return {state.queue.name: float(state.flow.limit) for state in self.poller.states if state.flow is not None}

    def stop_gates(self) -> None:
        self.gates.stop_all()

    def retire(self, names: Collection[str]) -> list[QueueState]:
        """Take queues out of the poller: nothing more is received from them or taken from their buffers,
        which are released now; their deliveries go on."""
        retired = self.poller.retire(names)
        if self.idempotency is not None:  # their claims retried in place are given up, their messages released
            self.idempotency.abandon(names)
        self.draining.extend(retired)
        self.release_buffers(retired)
        return retired

    def release_buffers(self, states: list[QueueState]) -> None:
        self.settler.release(take_buffered(states))

    def wait_for_drained(self, states: list[QueueState]) -> bool:
        """Until every retired queue has drained (what landed meanwhile is released); False if the daemon
        started stopping first, which then finishes the job."""
        if not wait_for_all_drained(states, lambda: self.slots.in_flight, self.stopping):
            return False
        self.release_buffers(states)
        for state in states:
            self.draining.remove(state)
        return True

    def replace(self, successors: Successors) -> None:
        """Swap in new queues and targets once their predecessors have drained; close what they replace."""
        self.replaced_queues += swap_queues(self.parts, successors, self.clients)
        for name, successor in successors.targets.items():
            self.gates.stop(name)
            config = swap_target(self.parts, name, successor)
            if config is not None:
                self.join_target(self.parts.targets[name])
                self.flows[name] = build_flow(config, self.config.concurrency)
                self.gates.add(config, self.config.aws.ca_bundle)
        self.gates.start()

    def join_target(self, target: Target) -> None:
        """A target joins the running parts (at start, or as a reload's successor): a batch HTTP target's POST
        carries its batch's span, from the tracer's header source."""
        if self.tracing is not None and isinstance(target, BatchHttpTarget):
            target.trace_headers = self.tracing.batch_headers

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
