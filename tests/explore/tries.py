"""Invariants on what a message's receives and tries were spent on (issue 48):

- dead-lettered-undelivered: nothing reaches a dead-letter queue that the app never saw fail. The daemon's
  own dead letter needs an attempt the app (or the function) answered with a failure, timed out or refused,
  unless the message's payload object is missing (a failure that never reaches the app, by design). A move by
  the queue's redrive policy needs an attempt of any answer, unless every receive it spent is one the daemon
  cannot help: an answer SQS lost (a reset after the receive took effect), a visibility change SQS refused
  (its extension failed, so it lapsed), a release at once (visibility 0: a stop, a reload's drain, a FIFO
  group-mate behind a failure), a copy deferred behind its key's claim elsewhere. A receive the store's
  failure held is not one of them: a store failure never sends a message back to be received again.
- backoff-counted: under exponential back-off, a failed attempt is hidden for at most
  error_visibility_timeout x 2^(tries - 1), tries counted as max_retries counts them: the receives that
  attempted it and those SQS spent (a lost answer, a lapse), not those that only met an overload, nor those
  the daemon released, deferred or held (a message released ten times behind a poison group-mate waits
  error_visibility_timeout after its own first failure, not 2^10 times that). A change to the queue's
  visibility timeout is not judged: a lease extension sets that too.
"""

from __future__ import annotations

from .facts import Facts, Fate, Receive
from .sqs_model import SqsEvent

MAX_VISIBILITY_SECONDS = 43_200
OVERLOADS = (429, 503)  # an overloaded attempt (a Lambda throttle too) does not count toward max_retries


def visibility_changes(facts: Facts, receive: Receive) -> list[SqsEvent]:
    return [event for event in facts.run.sqs.model.events
            if event.kind == "visibility" and event.handle == receive.handle]


def sqs_spent(facts: Facts, fate: Fate, receive: Receive) -> bool:
    """SQS lost this receive's answer, or refused a visibility change of it while it was the latest."""
    for call in facts.run.sqs.calls:
        if not call.fault or call.fault == "slow" or fate.message_id not in call.message_ids:
            continue
        if call.action == "ReceiveMessage" and abs(call.ended - receive.at) < 1.0:
            return True
        if call.action.startswith("ChangeMessageVisibility") and receive.at <= call.arrived < receive.until:
            return True
    return False


def released(facts: Facts, receive: Receive) -> bool:
    return any(event.seconds == 0 for event in visibility_changes(facts, receive))


def deferred(receive: Receive) -> bool:
    """Not delivered while the table answered for its key: a copy waiting behind its key's claim elsewhere, by
    design. (The claims are known by the key's slot, which copies share: any answered one excuses.)"""
    return not receive.deliveries and any(not call.failed for call in receive.claims)


def excused(facts: Facts, fate: Fate, receive: Receive) -> bool:
    return sqs_spent(facts, fate, receive) or released(facts, receive) or deferred(receive)


def dead_lettered_undelivered(facts: Facts, fate: Fate) -> list[tuple[str, str]]:
    """(invariant, detail) of a dead letter the app never saw fail."""
    if fate.spec.payload == "missing":
        return []  # its every try fails before the app, by design
    if fate.copied_at is not None:
        attempts = [d for d in fate.deliveries if d.arrived <= fate.copied_at]
        if not any(not d.succeeded for d in attempts):
            return [("dead-lettered-undelivered", f"copied to the daemon's dead-letter queue at "
                                                  f"{facts.at(fate.copied_at)} after {len(fate.receives)} receives "
                                                  f"and {len(attempts)} attempts, none that the app saw fail")]
    if fate.moved_at is not None and not fate.deliveries:
        wasted = [receive for receive in fate.receives if not excused(facts, fate, receive)]
        if wasted:
            held = sum(1 for receive in wasted if receive.keyed and receive.store_held)
            return [("dead-lettered-undelivered", f"moved to the redrive policy's queue at {facts.at(fate.moved_at)} "
                                                  f"never delivered, after {len(fate.receives)} receives: "
                                                  f"{len(wasted)} spent by the daemon ({held} held by the store's "
                                                  f"failure)")]
    return []


def counts_as_try(facts: Facts, fate: Fate, receive: Receive) -> bool:
    """As max_retries counts: not a receive that only met an overload, nor one released, deferred or held."""
    if receive.deliveries:
        return any(d.status not in OVERLOADS for d in receive.deliveries)
    return not (released(facts, receive) or deferred(receive) or receive.store_held)


def backoff_counted(facts: Facts, fate: Fate) -> list[tuple[str, str]]:
    schedule = facts.run.schedule
    base = schedule.error_visibility_timeout
    if schedule.backoff != "exponential" or base == 0:
        return []
    extensions = {schedule.visibility_timeout + bump for bump in range(len(facts.run.reloads) + 1)}
    for receive in fate.receives:
        failed = [d for d in receive.deliveries if d.answered and not d.succeeded and d.status not in OVERLOADS]
        if not failed:
            continue
        # A lease extension (the queue's visibility timeout) may still come while the failure settles (a claim
        # given up first, a change SQS refused): only the other changes are the back-off.
        after = [event.seconds or 0 for event in visibility_changes(facts, receive)
                 if event.at >= failed[0].answered and event.seconds not in extensions]
        index = fate.receives.index(receive)
        tries = sum(1 for earlier in fate.receives[:index + 1] if counts_as_try(facts, fate, earlier))
        bound = min(MAX_VISIBILITY_SECONDS, base * 2 ** max(0, tries - 1))
        if after and min(after) > bound:
            return [("backoff-counted", f"hidden {min(after)}s after a failed attempt at "
                                        f"{facts.at(failed[0].arrived)} (receive {fate.receives.index(receive) + 1}, "
                                        f"{tries} tries as max_retries counts: at most {base} x 2^{tries - 1} = "
                                        f"{bound}s)")]
    return []
