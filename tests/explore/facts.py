"""What happened to each message of a run, from the three records (the SQS model's events, the DynamoDB proxy's
calls, the app's requests): its receives (each with what happened in it: a delivery, its claims, whether the
store's failure held it), deliveries, delete, move to the redrive queue, dead-letter copies, and the time its
key was first recorded `completed` in the table."""

from __future__ import annotations

import hashlib
import json
import math
from dataclasses import dataclass, field

from .app import Delivery
from .run import Run
from .schedule import MessageSpec
from .store_proxy import STORE_FAILURES, StoreCall


@dataclass
class Receive:
    at: float
    until: float  # the message's next receive (inf: none)
    keyed: bool  # received under a configuration with the queue's key
    handle: str = ""
    deliveries: list[Delivery] = field(default_factory=list)
    claims: list[StoreCall] = field(default_factory=list)  # TransactWriteItems naming its slot

    @property
    def store_held(self) -> bool:
        """Not delivered, and every claim of its key made for it failed as the store failing (a hold)."""
        return not self.deliveries and bool(self.claims) and all(call.failed for call in self.claims)

    @property
    def claimed(self) -> bool:
        return any(call.applied for call in self.claims)


@dataclass
class Fate:
    spec: MessageSpec
    message_id: str
    key: str | None  # its idempotency key under the queue's key (None: the message has none)
    slot: str
    sequence: int
    receives: list[Receive] = field(default_factory=list)
    deliveries: list[Delivery] = field(default_factory=list)
    deleted_at: float | None = None
    moved_at: float | None = None  # by the redrive policy
    copied_at: float | None = None  # the daemon's dead-letter copy

    @property
    def first_success(self) -> float | None:
        return min((d.answered for d in self.deliveries if d.succeeded), default=None)

    @property
    def dead_lettered(self) -> bool:
        return self.moved_at is not None or self.copied_at is not None


@dataclass
class Facts:
    run: Run
    fates: list[Fate]
    completed_at: dict[str, float]  # slot -> when the table first held it `completed`
    episodes: dict[int, int]  # id(StoreCall) of a failed call -> its outage (`outage_episodes`)

    def claims_of(self, fate: Fate) -> list[StoreCall]:
        """Every claim (TransactWriteItems) naming this message's slot."""
        return [call for call in self.run.store.calls
                if call.action == "TransactWriteItems" and fate.slot and fate.slot in call.slots]

    def completed(self, fate: Fate) -> float | None:
        return self.completed_at.get(fate.slot) if fate.key is not None else None

    def at(self, moment: float | None) -> str:
        """A moment as the findings show it: seconds from the daemon's start."""
        return "never" if moment is None else f"{moment - self.run.started:.2f}s"


def key_of(run: Run, spec: MessageSpec, message_id: str) -> str | None:
    if spec.payload and run.schedule.key == "body:order.id":
        return None  # the key is read from the body received, an S3 pointer: the message has none
    return {"body:order.id": spec.key, "message_id": message_id, "dedup_id": f"d{spec.serial}"}.get(
        run.schedule.key or "", None)


def slot_of(queue: str, key: str, seen: set[str]) -> str:
    """The table's slot for a key, as the daemon wrote it (hashed or not), else the plain form."""
    digest = hashlib.sha256(key.encode()).hexdigest()
    for slot in seen:
        if slot.endswith("/" + key) or slot.endswith(digest):
            return slot
    return f"idempotency/{queue}/{key}"


def completions(calls: list[StoreCall]) -> dict[str, float]:
    done: dict[str, float] = {}
    for call in calls:
        if not call.applied:
            continue
        unprocessed = json.dumps(call.answer.get("UnprocessedItems", {}))
        for slot, state in zip(call.slots, call.states):
            if state == "completed" and slot and f'"{slot}"' not in unprocessed:
                done[slot] = min(done.get(slot, math.inf), call.ended)
    return done


def store_spells(run: Run) -> list[tuple[float, float]]:
    """When the schedule had DynamoDB failing in whole or in part (monotonic times), merged."""
    steps = [step for step in run.schedule.timeline if step.what == "store"]
    spells: list[tuple[float, float]] = []
    for step, following in zip(steps, [*steps[1:], None]):
        if any(set(mode.kinds) & STORE_FAILURES for mode in step.modes):
            start, end = run.started + step.at, run.started + following.at if following else math.inf
            if spells and spells[-1][1] >= start:
                start = spells.pop()[0]
            spells.append((start, end))
    return spells


def outage_episodes(calls: list[StoreCall], spells: list[tuple[float, float]]) -> dict[int, int]:
    """A failed call's outage: the spell of faults it came in (a share of the calls failing is one outage while
    it lasts), else its run of failed calls."""
    episodes: dict[int, int] = {}
    number, failing = len(spells), False
    for call in sorted(calls, key=lambda call: call.arrived):
        spell = next((index for index, (start, end) in enumerate(spells) if start <= call.arrived < end), None)
        if call.failed and spell is not None:
            episodes[id(call)] = spell
        elif call.failed:
            number += 0 if failing else 1
            failing = True
            episodes[id(call)] = number
        else:
            failing = False
    return episodes


def gather(run: Run) -> Facts:
    calls = list(run.store.calls)
    seen = {slot for call in calls for slot in call.slots if slot}
    model, names = run.sqs.model, run.names
    events = [event for event in model.events if event.queue == names.queue]
    sequences = {event.message_id: index for index, event in enumerate(events) if event.kind == "send"}
    fates = []
    for spec in run.schedule.messages:
        message_id = run.sent.get(spec.serial)
        if message_id is None:
            continue  # a late message the run stopped before sending
        key = key_of(run, spec, message_id)
        fates.append(Fate(spec, message_id, key, slot_of(names.queue, key, seen) if key else "",
                          sequences.get(message_id, -1)))
    by_id = {fate.message_id: fate for fate in fates}
    fill_events(run, by_id)
    fill_receives(run, by_id, calls)
    return Facts(run, fates, completions(calls), outage_episodes(calls, store_spells(run)))


def fill_events(run: Run, by_id: dict[str, Fate]) -> None:
    names = run.names
    for event in run.sqs.model.events:
        fate = by_id.get(event.message_id)
        if event.queue == names.dead_letter and event.kind == "send":
            copied = by_serial(by_id, event_serial(run, event.message_id))
            if copied is not None and copied.copied_at is None:
                copied.copied_at = event.at
        if fate is None or event.queue != names.queue:
            continue
        if event.kind == "receive":
            fate.receives.append(Receive(event.at, math.inf, keyed_at(run, event.at), event.handle))
        elif event.kind == "delete" and fate.deleted_at is None:
            fate.deleted_at = event.at
        elif event.kind == "moved":
            fate.moved_at = event.at
    for delivery in run.app.deliveries:
        fate = by_id.get(delivery.message_id)
        if fate is not None:
            fate.deliveries.append(delivery)


def event_serial(run: Run, message_id: str) -> int:
    """The serial of a dead letter's copy: from its body, or from the S3 key of the pointer it holds."""
    queue = run.sqs.model.queues[run.names.dead_letter]
    body = next((m.body for m in queue.messages if m.message_id == message_id), "")
    try:
        document = json.loads(body)
        if isinstance(document, list):
            return int(str(document[1]["s3Key"]).rsplit("-", 1)[-1])
        return int(document.get("n", -1))
    except (ValueError, AttributeError, LookupError, TypeError):
        return -1


def by_serial(by_id: dict[str, Fate], serial: int) -> Fate | None:
    return next((fate for fate in by_id.values() if fate.spec.serial == serial), None)


def keyed_at(run: Run, at: float) -> bool:
    schedule = run.schedule
    if not schedule.is_keyed:
        return False
    return not schedule.reload_adds_key or (run.reload_applied > 0 and at >= run.reload_applied)


def came_from(delivery: Delivery, receives: list[Receive], receive: Receive) -> bool:
    """The delivery is of this receive: by the receive count it carries (a delivery may start after the message's
    next receive), else by time."""
    if delivery.receive_count.isdigit() and 0 < int(delivery.receive_count) <= len(receives):
        return receives[int(delivery.receive_count) - 1] is receive
    return receive.at <= delivery.arrived < receive.until


def fill_receives(run: Run, by_id: dict[str, Fate], calls: list[StoreCall]) -> None:
    claims_by_slot: dict[str, list[StoreCall]] = {}
    for call in calls:
        if call.action == "TransactWriteItems":
            for slot in set(call.slots):
                claims_by_slot.setdefault(slot, []).append(call)
    for fate in by_id.values():
        for receive, following in zip(fate.receives, fate.receives[1:]):
            receive.until = following.at
        for receive in fate.receives:
            receive.deliveries = [d for d in fate.deliveries if came_from(d, fate.receives, receive)]
            receive.claims = [call for call in claims_by_slot.get(fate.slot, [])
                              if receive.at <= call.arrived < receive.until] if fate.key else []
