"""A message's life as the three records saw it (the SQS model's events, the app's attempts, the DynamoDB
proxy's calls naming its key), for a finding's reader and a replay."""

from __future__ import annotations

from .facts import Facts, Fate, gather
from .run import Run
from .schedule import short_key

HISTORY_ENTRIES = 40


def history(facts: Facts, fate: Fate) -> str:
    """One message's life as the three records saw it, timed from the daemon's start: for a finding's reader."""
    run = facts.run
    entries: list[tuple[float, str]] = []
    for event in run.sqs.model.events:
        if event.message_id == fate.message_id:
            seconds = f" {event.seconds}s" if event.seconds is not None and event.kind != "receive" else ""
            if event.kind == "receive":  # its number, as the handle carries it
                seconds = f" {event.handle.split('#')[1]}"
            entries.append((event.at, f"sqs {event.kind}{seconds}{' (old handle)' if event.stale else ''}"
                                      f"{' ' + event.detail if event.detail else ''}"))
    if fate.copied_at is not None:
        entries.append((fate.copied_at, "sqs dead-letter copy sent"))
    for delivery in fate.deliveries:
        refused = f" ({delivery.refused})" if delivery.refused else ""
        entries.append((delivery.arrived, f"app {delivery.via} (receive {delivery.receive_count}) -> "
                                          f"{delivery.status or 'no answer'}{refused}"))
    for sqs_call in run.sqs.calls:
        if sqs_call.fault and sqs_call.fault != "slow" and fate.message_id in sqs_call.message_ids:
            entries.append((sqs_call.arrived, f"sqs {sqs_call.action} naming it -> fault {sqs_call.fault}"))
    for call in run.store.calls:
        if fate.slot and fate.slot in call.slots:
            index = call.slots.index(fate.slot)
            state = " ".join(part for part in (call.states[index], call.owners[index][:6]) if part)
            outcome = f"fault {call.fault}" if call.fault else str(call.status)
            late = f" (answered at {call.ended - run.started:.2f}s)" if call.ended - call.arrived > 0.5 else ""
            entries.append((call.arrived, f"dynamodb {call.action}{' ' + state if state else ''} -> {outcome}{late}"))
    entries.sort(key=lambda entry: entry[0])
    shown = entries[:HISTORY_ENTRIES]
    more = f"\n      ... {len(entries) - len(shown)} more" if len(entries) > len(shown) else ""
    return "\n".join(f"      {at - run.started:6.2f}s {text}" for at, text in shown) + more


def every_history(run: Run) -> str:
    """Each message's history (a replay prints them all)."""
    facts = gather(run)
    return "\n".join(f"  #{fate.spec.serial} ({fate.message_id[:8]}, key {short_key(fate.key)}"
                     f"{', group ' + fate.spec.group if fate.spec.group else ''}):\n{history(facts, fate)}"
                     for fate in facts.fates)
