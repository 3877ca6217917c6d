"""The invariants checked after each schedule (`check`), each a list of findings named by the invariant:

- lost: every message is deleted after its own successful delivery, deleted as a copy of a completed key,
  in a dead-letter queue, or still in its queue (a delete needs one of the first three before it);
- claimed-before-delivery: a keyed message (hold) reaches the app only under a live claim of its key made for
  that receive (so a copy waits, and a success is remembered): its deadline, as written or extended, not past;
- after-completed: nothing is delivered after its key was completed (idempotent queues, hold);
- fifo-order: within a group a message is not delivered before every earlier one of its group is done
  (succeeded, deleted, dead-lettered);
- dead-lettered-undelivered: nothing reaches a dead-letter queue (the daemon's, or the redrive policy's) that
  the app never saw fail (`tries.py` says what may spend a receive instead);
- outage-receives: a store outage (a spell of DynamoDB faults, whole or a share of one kind of call, else a run
  of failed item calls) adds at most 2 to any message's receive count;
- backoff-counted: exponential back-off doubles on the tries max_retries counts (`tries.py`);
- holds-counted-as-tries: the daemon dead-letters after max_retries tries, not counting receives a store
  outage held (nor overloaded attempts);
- header-size: every request fits what nginx and gunicorn accept (header lines up to 8 KB);
- stop-deadline: every stop ends within shutdown_timeout + 1 s of the request (SIGTERM during a reload, a hold,
  stalled calls);
- daemon: Daemon.run raised, or never ended.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

from .facts import Facts, Fate, gather
from .histories import history
from .run import Run
from .schedule import short_key
from .store_proxy import StoreCall
from .tries import backoff_counted, dead_lettered_undelivered

OUTAGE_RECEIVES = 2  # DESIGN.md 8: a store outage of any length adds at most 2 to a message's receive count
STOP_SLACK_SECONDS = 1.0  # the stop's deadline: shutdown_timeout + 1 s


@dataclass(frozen=True)
class Finding:
    invariant: str
    detail: str
    history: str = ""  # the life of the message it is about

    def __str__(self) -> str:
        return f"{self.invariant}: {self.detail}" + (f"\n    its history:\n{self.history}" if self.history else "")


def check(run: Run) -> list[Finding]:
    facts = gather(run)
    findings = [Finding("daemon", problem) for problem in run.problems]
    findings += stop_deadline(run)
    for fate in facts.fates:
        findings += lost(facts, fate) + claimed_before_delivery(facts, fate) + after_completed(facts, fate)
        findings += outage_receives(facts, fate) + holds_counted(facts, fate) + header_size(facts, fate)
        findings += [about(facts, fate, invariant, detail) for invariant, detail in
                     dead_lettered_undelivered(facts, fate) + backoff_counted(facts, fate)]
    findings += fifo_order(facts)
    return findings


def at(facts: Facts, moment: float | None) -> str:
    return facts.at(moment)


def about(facts: Facts, fate: Fate, invariant: str, detail: str) -> Finding:
    """A finding about one message, with its history."""
    return Finding(invariant, f"{name(fate)} {detail}", history(facts, fate))


def name(fate: Fate) -> str:
    group = f", group {fate.spec.group}" if fate.spec.group else ""
    return f"#{fate.spec.serial} ({fate.message_id[:8]}, key {short_key(fate.key)}{group})"


def lost(facts: Facts, fate: Fate) -> list[Finding]:
    deleted = fate.deleted_at
    if deleted is None:
        return []
    reasons = (fate.first_success, facts.completed(fate), fate.copied_at)
    if any(moment is not None and moment <= deleted for moment in reasons):
        return []
    return [about(facts, fate, "lost", f"deleted at {at(facts, deleted)} with no successful delivery (first at "
                                       f"{at(facts, fate.first_success)}), no completed key (at "
                                       f"{at(facts, facts.completed(fate))}) and no dead-letter copy before it")]


def claimed_before_delivery(facts: Facts, fate: Fate) -> list[Finding]:
    if fate.key is None or facts.run.schedule.on_store_failure != "hold":
        return []
    for receive in fate.receives:
        for delivery in receive.deliveries if receive.keyed else []:
            claims = [call for call in facts.claims_of(fate)
                      if call.applied and receive.at <= call.arrived and call.ended <= delivery.arrived]
            if not claims:
                return [about(facts, fate, "claimed-before-delivery",
                              f"delivered at {at(facts, delivery.arrived)}, received under the key at "
                              f"{at(facts, receive.at)}, with no claim of its key made for that receive")]
            deadline = claim_deadline(facts, fate, claims[-1], delivery.arrived)
            if deadline < int(delivery.arrived_at):  # DynamoDB lets another claim take it: `expires_at < now`
                return [about(facts, fate, "claimed-before-delivery",
                              f"delivered at {at(facts, delivery.arrived)} under a claim that had lapsed "
                              f"{delivery.arrived_at - deadline:.2f}s before (its deadline written at "
                              f"{at(facts, claims[-1].ended)})")]
    return []


def claim_deadline(facts: Facts, fate: Fate, claim: StoreCall, moment: float) -> int:
    """The claim's deadline as the table held it at `moment`: as claimed, or as extended since."""
    token = claim.owners[claim.slots.index(fate.slot)]
    deadline = claim.deadlines[claim.slots.index(fate.slot)]
    for call in facts.run.store.calls:
        if call.action == "UpdateItem" and call.applied and call.ended <= moment and fate.slot in call.slots:
            index = call.slots.index(fate.slot)
            if call.owners[index] == token:
                deadline = max(deadline, call.deadlines[index])
    return deadline


def after_completed(facts: Facts, fate: Fate) -> list[Finding]:
    completed = facts.completed(fate)
    if completed is None or facts.run.schedule.on_store_failure != "hold":
        return []
    late = [delivery for receive in fate.receives if receive.keyed for delivery in receive.deliveries
            if delivery.arrived > completed]
    return [about(facts, fate, "after-completed", f"delivered at {at(facts, delivery.arrived)}, after its key "
                                                  f"completed at {at(facts, completed)}") for delivery in late[:1]]


def held_by_outage(facts: Facts, fate: Fate) -> Counter[int]:
    """The receives of this message that a store outage held, per outage."""
    held: Counter[int] = Counter()
    for receive in fate.receives:
        if receive.keyed and receive.store_held:
            held[facts.episodes[id(receive.claims[-1])]] += 1
    return held


def outage_receives(facts: Facts, fate: Fate) -> list[Finding]:
    held = held_by_outage(facts, fate)
    worst = max(held.values(), default=0)
    if worst <= OUTAGE_RECEIVES:
        return []
    total = sum(held.values())
    return [about(facts, fate, "outage-receives", f"{worst} receives held by one store outage ({total} in "
                                                  f"{len(held)} outages, {len(fate.receives)} receives in all)")]


def holds_counted(facts: Facts, fate: Fate) -> list[Finding]:
    copied = fate.copied_at
    if copied is None:
        return []
    receives = [receive for receive in fate.receives if receive.at <= copied]
    held = sum(1 for receive in receives if receive.keyed and receive.store_held)
    overloads = min(10, sum(1 for d in fate.deliveries if d.arrived <= copied and d.status == 429))
    tries = len(receives) - held - overloads
    max_retries = facts.run.schedule.max_retries
    if not held or tries >= max_retries:
        return []
    return [about(facts, fate, "holds-counted-as-tries",
                  f"dead-lettered at {at(facts, copied)} after {tries} tries (max_retries = {max_retries}): "
                  f"{len(receives)} receives, {held} held by a store outage, {overloads} overloaded")]


def header_size(facts: Facts, fate: Fate) -> list[Finding]:
    refused = [d for d in fate.deliveries if d.refused]
    return [about(facts, fate, "header-size", f"refused by the app: {refused[0].refused}")] if refused else []


def stop_deadline(run: Run) -> list[Finding]:
    if not run.stop_requested:
        return [Finding("daemon", "the daemon ended before the stop was requested")] if run.stopped else []
    seconds = run.stopped - run.stop_requested
    limit = run.schedule.shutdown_timeout + STOP_SLACK_SECONDS
    if seconds <= limit:
        return []
    during = [f"{run.stop_requested - moment:.2f}s after a SIGHUP" for moment in run.reloads
              if moment <= run.stop_requested]
    ended = (f"; it had not stopped {run.stalls_ended - run.stop_requested:.2f}s after the request, when the run "
             f"ended its servers' stalled calls" if run.stalls_ended else "")
    return [Finding("stop-deadline", f"the stop took {seconds:.2f}s (shutdown_timeout = "
                                     f"{run.schedule.shutdown_timeout}: at most {limit:.0f}s), requested "
                                     f"{', '.join(during[-1:]) or 'with no reload before it'}{ended}")]


def fifo_order(facts: Facts) -> list[Finding]:
    if not facts.run.schedule.fifo:
        return []
    groups: dict[str, list[Fate]] = {}
    for fate in sorted(facts.fates, key=lambda fate: fate.sequence):
        groups.setdefault(fate.spec.group or "", []).append(fate)
    return [finding for members in groups.values() for finding in first_backwards(facts, members)]


def done_at(facts: Facts, fate: Fate) -> float | None:
    moments = [m for m in (fate.first_success, facts.completed(fate), fate.deleted_at, fate.moved_at, fate.copied_at)
               if m is not None]
    return min(moments, default=None)


def first_backwards(facts: Facts, members: list[Fate]) -> list[Finding]:
    """The first delivery of a group's message made while an earlier one of the group was not done."""
    for index, fate in enumerate(members):
        for delivery in sorted(fate.deliveries, key=lambda d: d.arrived):
            for earlier in members[:index]:
                if delivery.batch and any(d.batch == delivery.batch and d.position < delivery.position
                                          for d in earlier.deliveries):
                    continue  # before it in the same batch: the target's order
                done = done_at(facts, earlier)
                if done is None or done > delivery.arrived:
                    return [Finding("fifo-order", f"{name(fate)} delivered at {at(facts, delivery.arrived)} before "
                                                  f"{name(earlier)}, sent before it in its group, was done (at "
                                                  f"{at(facts, done)})", history(facts, earlier)
                                    + "\n    and the later one's:\n" + history(facts, fate))]
    return []
