"""The /status document, drawn from the plain rows the daemon publishes and the metrics registry: what
the status page, /readyz and the Prometheus gauges show. It never reads a queue's or a slot's live fields."""

from __future__ import annotations

import time
from collections import Counter, deque
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, Protocol

import gevent.event

from .. import __version__
from ..config.model import Config
from ..delivery.queue_state import QueueRow
from ..delivery.slots import MessageRow
from ..fleet.membership import FleetRow
from ..metrics import COUNTERS, Registry

MAX_LISTED_MESSAGES = 500  # keeps /status and the page small at high concurrency
RATE_WINDOW_SECONDS = 10.0  # deliveries per second are measured over about this long
MIN_SAMPLE_SECONDS = 0.5
DELIVERED = ("Succeeded", "Failed", "Throttled")  # a delivery ends in one of these


@dataclass(frozen=True, slots=True)
class TargetRow:
    """One target as the status page and /readyz see it: plain values."""
    name: str
    kind: str  # "http" or "lambda"
    endpoint: str  # the url, or the function
    state: str  # "ready", "waiting" (its app has not answered ready_path) or "paused" (Retry-After, throttle)
    paused_seconds: float
    last_error: str  # of its latest failed delivery or readiness check
    last_error_at: float  # its time.time(), 0 if none
    limit: int  # its in-flight limit now: max_concurrency, shrunk by overloads (delivery/flow.py)
    max_concurrency: int  # where the limit starts and grows back to
    rate_limit: float | None  # deliveries per second
    batches_in_flight: int | None = None  # a target that delivers batches (Lambda, batch_size > 1): what `limit` counts


class DaemonView(Protocol):
    """What the status server may read from the daemon; it never changes any of it."""

    config: Config
    registry: Registry
    stopping: gevent.event.Event

    def queue_rows(self) -> list[QueueRow]: ...

    def message_rows(self) -> list[MessageRow]: ...

    def target_rows(self) -> list[TargetRow]: ...

    def fleet_rows(self) -> list[FleetRow]: ...

    def are_loops_alive(self) -> bool: ...


class DeliveryRates:
    """Deliveries per second per queue over about the last RATE_WINDOW_SECONDS, from the registry's totals,
    sampled at each look and by the status server's watch loop."""

    def __init__(self, registry: Registry) -> None:
        self.registry = registry
        self.samples: deque[tuple[float, Counter[str]]] = deque()

    def delivered(self) -> Counter[str]:
        delivered: Counter[str] = Counter()
        for (name, queue), value in list(self.registry.totals.items()):
            if name in DELIVERED and queue:
                delivered[queue] += value
        return delivered

    def sample(self) -> None:
        now = time.monotonic()
        if self.samples and now - self.samples[-1][0] < MIN_SAMPLE_SECONDS:
            return
        self.samples.append((now, self.delivered()))
        while len(self.samples) > 2 and now - self.samples[1][0] >= RATE_WINDOW_SECONDS:
            self.samples.popleft()

    def per_second(self) -> dict[str, float] | None:
        """Since the oldest sample in the window, up to now; None until that is a second ago."""
        self.sample()
        now, after = time.monotonic(), self.delivered()
        then, before = self.samples[0]
        if now - then < 1.0:
            return None
        return {queue: (after[queue] - before[queue]) / (now - then) for queue in after}


def check_health(view: DaemonView) -> tuple[bool, str]:
    """Liveness: the hub answers (this runs) and every supervised loop is alive, SQS outage or not."""
    if view.stopping.is_set():
        return False, "stopping"
    if not view.are_loops_alive():
        return False, "a background loop has died"
    return True, "ok"


def check_readiness(view: DaemonView) -> list[str]:
    """Why the daemon should get no traffic now (empty when ready): stopping, a queue whose receives
    have failed for `unready_after` seconds or more, or a queue whose target is paused or waiting for its app."""
    if view.stopping.is_set():
        return ["stopping"]
    return readiness_reasons(view.queue_rows(), view.target_rows(), view.config.unready_after)


def readiness_reasons(rows: list[QueueRow], targets: list[TargetRow], unready_after: float) -> list[str]:
    waiting = {target.name: target for target in targets if target.state == "waiting"}
    reasons = []
    for row in rows:
        if row.failing_seconds and row.failing_seconds >= unready_after:
            reasons.append(f"queue {row.name}: receives failing for {row.failing_seconds:.0f}s ({row.last_error})")
        if row.target in waiting:
            problem = waiting[row.target].last_error or "no answer yet"
            reasons.append(f"queue {row.name}: target {row.target} waiting for its app ({problem})")
        elif row.paused_seconds > 0:
            reasons.append(f"queue {row.name}: target {row.target} paused for {row.paused_seconds:.1f}s more")
        if row.paused_reason:
            reasons.append(f"queue {row.name}: {row.paused_reason}")
    return reasons


def build_snapshot(view: DaemonView, started_at: float, rates: DeliveryRates) -> dict[str, Any]:
    """The /status document; the page and the Prometheus gauges are drawn from it too."""
    healthy, health = check_health(view)
    rows, targets = view.queue_rows(), view.target_rows()
    not_ready = ["stopping"] if view.stopping.is_set() else readiness_reasons(rows, targets, view.config.unready_after)
    if healthy and not_ready:
        health = "not ready: " + "; ".join(not_ready)
    registry, config = view.registry, view.config
    messages = [{"id": row.id, "queue": row.queue, "target": row.target, "age_seconds": round(row.age_seconds, 1),
                 "receive_count": row.receive_count} for row in view.message_rows()]
    failures = [{"type": error_type or "unknown", "count": count, "latest_error": error}
                for error_type, (count, error) in sorted(registry.failure_types.items(), key=lambda item: -item[1][0])]
    per_second = rates.per_second()
    queues = queue_rows(rows, messages, registry, per_second)
    return {
        "name": config.name,
        "version": __version__,
        "healthy": healthy,
        "health": health,
        "ready": not not_ready,
        "not_ready": not_ready,
        "stopping": view.stopping.is_set(),
        "uptime_seconds": round(time.monotonic() - started_at, 1),
        "concurrency": config.concurrency,
        "strategy": config.polling.strategy,
        "deliveries_per_second": None if per_second is None else round(sum(per_second.values()), 2),
        "queues": queues,
        "targets": target_rows(targets, queues, registry),
        "in_flight_count": len(messages),
        "in_flight": messages[:MAX_LISTED_MESSAGES],
        "totals": {name: registry.total(name) for name in COUNTERS},
        "failures": failures,
        "fleet": [fleet_document(row) for row in view.fleet_rows()],
    }


def fleet_document(row: FleetRow) -> dict[str, Any]:
    """One fleet-wide limit: the live members and their shares, this member's share, in-flight count and waits."""
    return {"limit": row.limit_id, "kind": row.kind, "value": row.limit, "state": row.state, "reason": row.reason,
            "share": round(row.share, 3), "in_flight": row.in_flight, "waits": row.waits,
            "live_members": len(row.members), "members": row.members, "dynamodb_requests": row.requests}


def queue_rows(rows: list[QueueRow], messages: list[dict[str, Any]], registry: Registry,
               per_second: dict[str, float] | None) -> list[dict[str, Any]]:
    in_flight = Counter(message["queue"] for message in messages)
    gauges = registry.read_gauges()
    documents = []
    for row in rows:
        backlog = gauges.get(("Backlog", row.name))
        receive_error = (row.last_error_at, f"receive: {row.last_error}" if row.last_error else "")
        error, error_at = latest_error([receive_error, registry.last_errors.get(("queue", row.name))])
        documents.append({
            "name": row.name,
            "target": row.target,
            "state": row.state,
            "backlog": None if backlog is None else int(backlog),
            "buffered": row.buffered,
            "in_flight": in_flight[row.name],
            "deliveries_per_second": None if per_second is None else round(per_second.get(row.name, 0.0), 2),
            "receive_failures": row.receive_failures,
            "failing_seconds": round(row.failing_seconds, 1),
            "paused_seconds": round(row.paused_seconds, 1),
            "paused_reason": row.paused_reason,
            "waiting_for_group": row.waiting,
            "groups": [{"group": group.group, "in_flight": group.in_flight, "waiting": group.waiting}
                       for group in row.groups],
            "last_error": error,
            "last_error_seconds": seconds_since(error_at),
            "totals": {name: registry.total(name, row.name) for name in COUNTERS},
        })
    return documents


def target_rows(rows: list[TargetRow], queues: list[dict[str, Any]], registry: Registry) -> list[dict[str, Any]]:
    documents = []
    for row in rows:
        mine = [queue for queue in queues if queue["target"] == row.name]
        rates = [queue["deliveries_per_second"] for queue in mine if queue["deliveries_per_second"] is not None]
        error, error_at = latest_error([(row.last_error_at, row.last_error), registry.last_errors.get(("target", row.name))])
        documents.append({
            "name": row.name,
            "type": row.kind,
            "endpoint": row.endpoint,
            "state": row.state,
            "paused_seconds": round(row.paused_seconds, 1),
            "in_flight": sum(queue["in_flight"] for queue in mine),  # messages
            "batches_in_flight": row.batches_in_flight,
            "limit": row.limit,
            "max_concurrency": row.max_concurrency,
            "rate_limit": row.rate_limit,
            "deliveries_per_second": round(sum(rates), 2) if rates else None,
            "last_error": error,
            "last_error_seconds": seconds_since(error_at),
        })
    return documents


def latest_error(errors: Iterable[tuple[float, str] | None]) -> tuple[str, float]:
    """The most recent (text, time) of several sources; ("", 0) if none has an error."""
    known = [(at, text) for error in errors if error is not None for at, text in [error] if text]
    if not known:
        return "", 0.0
    at, text = max(known)
    return text, at


def seconds_since(moment: float) -> float | None:
    return round(max(0.0, time.time() - moment), 1) if moment else None
