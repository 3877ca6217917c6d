"""This daemon's part in its fleet: a gate and a lease loop per fleet-wide limit of the configuration, the
table they share, and what the status page, /readyz and the metrics read of them."""

from __future__ import annotations

import logging
import os
import random
import socket
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import gevent
import gevent.event
import gevent.lock

from ..aws.tables import KEY, DynamoTable
from ..config.model import Config, QueueConfig
import botocore.exceptions

from ..errors import StartupError, describe_error, error_code
from .gate import FleetGate
from .lease import Lease
from .table import LimitItem

logger = logging.getLogger(__name__)

LEAVE_SECONDS = 2.0  # at stop, for every limit's leaving write together
Loop = tuple[str, Callable[[], None]]


@dataclass(frozen=True, slots=True)
class FleetRow:
    """One fleet-wide limit as the status page and /status show it: plain values."""
    limit_id: str
    kind: str  # "concurrency" or "rate"
    limit: float
    share: float  # usable now (0 once the lease has lapsed)
    in_flight: int
    waits: int  # deliveries that waited for the fleet's share
    members: list[dict[str, Any]]  # the live members as the last answer showed them (this one marked)
    requests: int  # DynamoDB requests made for this limit
    state: str  # "idle" (no share, none wanted), "holding", "waiting" (wants more than it holds), "lapsed"
    reason: str


class Fleet:
    def __init__(self, config: Config, dynamodb: Any, rng: random.Random, wake: Callable[[], None]) -> None:
        self.config = config
        self.dynamodb = dynamodb
        self.rng = rng
        self.member_id = f"{socket.gethostname()}:{os.getpid()}:{rng.getrandbits(32):08x}"
        self.gates: dict[str, FleetGate] = {}
        self.leases: dict[str, Lease] = {}
        self.table_ready = gevent.event.Event()
        self.checking_table = gevent.lock.Semaphore()
        fleet = config.fleet
        if fleet is None:
            return
        for kind, limit_id, limit, local_most in fleet_limits(config):
            gate = FleetGate(limit_id, kind, limit, local_most, wake)
            item = LimitItem(dynamodb, fleet.table, f"fleet/{fleet.name}/{limit_id}", self.member_id)
            self.gates[limit_id] = gate
            self.leases[limit_id] = Lease(gate, item, fleet.lease, socket.gethostname(), rng)

    def gates_for(self, queue: QueueConfig) -> tuple[FleetGate, ...]:
        ids = (limit_id("queue", queue.name, "concurrency"), limit_id("target", queue.target, "concurrency"),
               limit_id("target", queue.target, "rate"))
        return tuple(self.gates[limit_id] for limit_id in ids if limit_id in self.gates)

    def loops(self, stopping: gevent.event.Event) -> list[Loop]:
        """One loop per limit; the first to run makes sure of the table, the others wait for it."""
        return [(f"fleet limit {limit_id}", self.lease_loop(lease, stopping)) for limit_id, lease in self.leases.items()]

    def lease_loop(self, lease: Lease, stopping: gevent.event.Event) -> Callable[[], None]:
        def run() -> None:
            with self.checking_table:
                self.wait_for_table(stopping)
            if self.table_ready.is_set():
                lease.run(stopping)
        return run

    def wait_for_table(self, stopping: gevent.event.Event) -> None:
        """Create the table if missing (`aws.tables.DynamoTable`); until it is ACTIVE no share is taken."""
        if self.config.fleet is None:
            return
        table = DynamoTable(self.dynamodb, self.config.fleet.table)
        if table.wait_until_usable(stopping, self.rng, "nothing starts under a fleet-wide limit"):
            self.table_ready.set()

    def wind_down(self) -> None:
        """The daemon is stopping: no lease joins or grows any more; what runs keeps its share."""
        for lease in self.leases.values():
            lease.winding_down.set()

    def leave(self) -> None:
        """At stop, after the deliveries: free every share at once rather than a lease later."""
        jobs = [gevent.spawn(lease.leave) for lease in self.leases.values() if lease.counter is not None]
        gevent.joinall(jobs, timeout=LEAVE_SECONDS)
        for job in jobs:
            if job.exception is not None or not job.dead:
                logger.info("fleet: a share could not be freed at stop (%s); it is free a lease from now",
                            job.exception or "no answer in time")
        gevent.killall(jobs, block=False)

    def shares(self) -> dict[str, float]:
        """The FleetShare gauge: what this member may use under each limit now."""
        return {limit_id: gate.usable() for limit_id, gate in self.gates.items()}

    def paused_reason(self, queue: QueueConfig) -> str:
        return next((reason for gate in self.gates_for(queue) if (reason := gate.lapsed_reason())), "")

    def rows(self) -> list[FleetRow]:
        return [fleet_row(lease) for lease in self.leases.values()]


def fleet_row(lease: Lease) -> FleetRow:
    gate, me = lease.gate, lease.item.member_id
    now = lease.clock()
    dead = lease.liveness.dead(lease.view, now, me)
    members = [{"member": member_id, "host": member.host, "share": member.share, "want": member.want,
                "in_flight": member.in_flight, "this": member_id == me}
               for member_id, member in sorted(lease.view.members.items()) if member_id not in dead]
    reason = gate.lapsed_reason()
    share = gate.usable()
    state = "lapsed" if reason else "waiting" if gate.is_hungry else "holding" if share > 0 else "idle"
    return FleetRow(gate.limit_id, gate.kind, gate.limit, share, gate.in_flight, gate.waits, members, lease.requests,
                    state, reason)


def describe_table(dynamodb: Any, table_name: str) -> str:
    """`check --online`: the fleet table is usable, or will be created; StartupError if it cannot serve."""
    try:
        table = dynamodb.describe_table(TableName=table_name)["Table"]
    except botocore.exceptions.ClientError as error:
        if error_code(error) == "ResourceNotFoundException":
            return f"fleet table {table_name}: missing; the daemon creates it at start (dynamodb:CreateTable)"
        raise StartupError(f"fleet table {table_name}: {describe_error(error)}") from None
    except botocore.exceptions.BotoCoreError as error:
        raise StartupError(f"fleet table {table_name}: {describe_error(error)}") from None
    keys = [(key["AttributeName"], key["KeyType"]) for key in table.get("KeySchema", [])]
    if keys != [(KEY, "HASH")]:
        raise StartupError(f"fleet table {table_name}: its key must be the string {KEY!r} alone (got {keys})")
    return f"fleet table {table_name}: {table.get('TableStatus', '?')}, key {KEY!r}"


def limit_id(owner: str, name: str, kind: str) -> str:
    """How a limit is named in metrics, on the status page and in its item's key: "queue/payments/concurrency"."""
    return f"{owner}/{name}/{kind}"


def fleet_limits(config: Config) -> list[tuple[str, str, float, float]]:
    """(kind, limit id, the fleet's limit, the most this daemon could use) for every fleet-wide key."""
    limits: list[tuple[str, str, float, float]] = []
    for queue in config.queues:
        if queue.fleet_max_concurrency is not None:
            local = min(config.concurrency, queue.max_concurrency or config.concurrency)
            limits.append(("concurrency", limit_id("queue", queue.name, "concurrency"), queue.fleet_max_concurrency, local))
    for name, target in config.targets.items():
        if target.fleet_max_concurrency is not None:
            local = min(config.concurrency, target.max_concurrency or config.concurrency)
            limits.append(("concurrency", limit_id("target", name, "concurrency"), target.fleet_max_concurrency, local))
        if target.fleet_rate_limit is not None:
            local_rate = target.rate_limit or target.fleet_rate_limit
            limits.append(("rate", limit_id("target", name, "rate"), target.fleet_rate_limit, local_rate))
    return limits
