"""The timeline's parts, drawn from a schedule's rng: spells of faults (intervals of time, each a `Mode`) for
DynamoDB, SQS and the target (the app's POSTs, the Lambda Invokes), the app's modes, and the control events
(reloads and the stop). `as_steps` turns one service's spells into the steps that switch its modes."""

from __future__ import annotations

import random

from .faults import Mode
from .schedule import Step

Spell = tuple[float, float, Mode]  # start, end (seconds after the daemon's start), what is on meanwhile

APP_MODES = (("answer", 45), ("fail", 20), ("hang", 12), ("overload", 8), ("slow", 15))
OUTAGE_KINDS = ("throughput", "throttling", "limit", "cancel_throttle", "cancel_throttle", "cancel_throttle", "error",
                "unavailable", "reset", "stall_reset")
FLAKY_KINDS = ("throughput", "cancel_throttle", "error", "reset", "reset_after", "stall", "conflict")
SQS_ACTIONS = ("ReceiveMessage", "DeleteMessageBatch", "ChangeMessageVisibilityBatch", "SendMessage")
SQS_KINDS = ("error", "unavailable", "throttle", "reset", "reset_after", "stall")
STOP_STALLS = frozenset({"DeleteMessageBatch", "ChangeMessageVisibilityBatch"})
# One kind of DynamoDB call refused in part while the others answer: (action, the kinds it is refused with)
PARTIAL_STORE = (("TransactWriteItems", ("cancel_throttle",)),
                 ("TransactWriteItems", ("cancel_throttle_one", "throughput")),
                 ("BatchWriteItem", ("throughput", "throttling")), ("UpdateItem", ("throughput", "cancel_throttle")),
                 ("DeleteItem", ("throttling", "error")), ("PutItem", ("throughput",)))
PARTIAL_SQS = (("ChangeMessageVisibilityBatch", ("error", "throttle")), ("DeleteMessageBatch", ("unavailable",)),
               ("ReceiveMessage", ("throttle", "error")), ("ChangeMessageVisibilityBatch", ("unavailable", "entries")),
               ("DeleteMessageBatch", ("entries",)))
SLOW_SECONDS = (0.02, 0.4)  # a slow call's added latency: a far region, a busy endpoint
STALLED_FOR_GOOD = (40.0, 60.0)  # a call that does not answer within the run (the stop must not wait for it)


def app_steps(rng: random.Random, stop_at: float) -> list[Step]:
    names, weights = [name for name, _ in APP_MODES], [weight for _, weight in APP_MODES]
    return [Step(rng.uniform(0.0, stop_at), "app", app_mode=rng.choices(names, weights)[0])
            for _ in range(rng.randint(0, 3))]


def store_spells(rng: random.Random, stop_at: float) -> list[Spell]:
    """Outages (every item call fails; half of them from the start, as the first receives land) and flaky
    spells (a share of every call)."""
    spells: list[Spell] = []
    for _ in range(rng.choice((0, 1, 1, 2))):
        if rng.random() < 0.6:
            start = rng.uniform(0.0, 0.3) if rng.random() < 0.5 else rng.uniform(0.0, max(0.1, stop_at - 1.0))
            kinds = tuple(rng.sample(OUTAGE_KINDS, rng.choice((1, 1, 2))))
            spells.append((start, start + rng.uniform(1.5, 8.0), Mode(kinds, 1.0, stall=(0.3, 2.0))))
        else:
            start = rng.uniform(0.0, max(0.1, stop_at - 1.0))
            kinds = tuple(rng.sample(FLAKY_KINDS, rng.randint(1, 3)))
            spells.append((start, start + rng.uniform(1.0, 6.0), Mode(kinds, rng.uniform(0.2, 0.5), stall=(0.2, 3.0))))
    if rng.random() < 0.2:  # completions stalled across the stop: their flush must fit the stop's deadline
        spells.append((stop_at - 0.5, stop_at + 8.0, Mode(("stall",), 1.0, frozenset({"BatchWriteItem"}), (1.0, 3.5))))
    return spells


def partial_store_spells(rng: random.Random, stop_at: float) -> list[Spell]:
    """A share (10-90 %) of one kind of DynamoDB call refused while the others answer; slow calls."""
    spells: list[Spell] = []
    if rng.random() < 0.35:
        action, kinds = rng.choice(PARTIAL_STORE)
        start = rng.uniform(0.0, max(0.1, stop_at - 1.0))
        spells.append((start, start + rng.uniform(2.0, 9.0), Mode(kinds, rng.uniform(0.1, 0.9), frozenset({action}))))
    if rng.random() < 0.2:
        spells.append((0.0, stop_at + 10.0, Mode(("slow",), rng.uniform(0.3, 1.0), stall=SLOW_SECONDS)))
    return spells


def sqs_spells(rng: random.Random, stop_at: float, reloads: tuple[Step, ...] = ()) -> list[Spell]:
    spells: list[Spell] = []
    if rng.random() < 0.35:
        start = rng.uniform(0.0, stop_at)
        actions = frozenset(rng.sample(SQS_ACTIONS, rng.randint(1, 3)))
        kinds = tuple(rng.sample(SQS_KINDS, rng.randint(1, 2)))
        spells.append((start, start + rng.uniform(0.5, 4.0), Mode(kinds, rng.uniform(0.2, 1.0), actions, (0.2, 3.0))))
    if rng.random() < 0.25:  # deletes and visibility changes that hang across the stop
        spells.append((stop_at - rng.uniform(0.0, 1.0), stop_at + 15.0,
                       Mode(("stall",), 1.0, STOP_STALLS, (5.0, 10.0))))
    if rng.random() < 0.3:  # a share of one kind of call failing while the others answer
        action, kinds = rng.choice(PARTIAL_SQS)
        start = rng.uniform(0.0, stop_at)
        spells.append((start, start + rng.uniform(1.0, 6.0), Mode(kinds, rng.uniform(0.1, 0.9), frozenset({action}))))
    if rng.random() < 0.2:
        spells.append((0.0, stop_at + 10.0, Mode(("slow",), rng.uniform(0.3, 1.0), stall=SLOW_SECONDS)))
    for reload in reloads:
        spells += queue_url_spells(rng, reload)
    return spells


def queue_url_spells(rng: random.Random, reload: Step) -> list[Spell]:
    """A reload that adds a queue by name asks SQS for its URL: slow, or stalled past the stop."""
    if reload.change != "adds_queue":
        return []
    draw = rng.random()
    if draw < 0.4:
        seconds = SLOW_SECONDS[1], 1.5
    elif draw < 0.75:
        seconds = STALLED_FOR_GOOD
    else:
        return []
    return [(reload.at - 0.05, reload.at + 60.0, Mode(("stall",), 1.0, frozenset({"GetQueueUrl"}), seconds))]


def target_spells(rng: random.Random, stop_at: float) -> list[Spell]:
    """A share of the Lambda Invokes throttled (or of the app's POSTs overloaded); slow answers."""
    spells: list[Spell] = []
    if rng.random() < 0.3:
        start = rng.uniform(0.0, stop_at)
        kinds = rng.choice((("throttle",), ("throttle", "error"), ("function_error",), ("overload",)))
        spells.append((start, start + rng.uniform(1.0, 6.0),
                       Mode(kinds, rng.uniform(0.1, 0.9), frozenset({"Invoke", "Post"}))))
    if rng.random() < 0.2:
        spells.append((0.0, stop_at + 10.0, Mode(("slow",), rng.uniform(0.3, 1.0), stall=SLOW_SECONDS)))
    return spells


def reload_steps(rng: random.Random, reload_adds_key: bool, stop_at: float) -> list[Step]:
    """SIGHUPs: the one that adds the key, or one that adds a queue or changes the queue's settings; at times a
    second SIGHUP soon after."""
    at = rng.uniform(0.3, max(0.4, stop_at - 0.5))
    if reload_adds_key:
        return [Step(at, "reload", change="adds_key")]
    if rng.random() >= 0.3:
        return []
    steps = [Step(at, "reload", change=rng.choice(("adds_queue", "adds_queue", "settings")))]
    if rng.random() < 0.3:
        steps.append(Step(at + rng.uniform(0.05, 1.5), "reload", change=rng.choice(("adds_queue", "settings"))))
    return steps


def stop_step(rng: random.Random, stop_at: float, reloads: list[Step], outages: list[tuple[float, float]]) -> Step:
    """SIGTERM: at its time, or during a reload (soon after a SIGHUP), or during a hold (inside an outage)."""
    draw = rng.random()
    if reloads and draw < 0.35:
        return Step(reloads[-1].at + rng.uniform(0.05, 1.5), "stop")
    if outages and draw > 0.75:
        start, end = rng.choice(outages)
        return Step(rng.uniform(start + 0.2, max(start + 0.3, end - 0.1)), "stop")
    return Step(stop_at, "stop")


def as_steps(what: str, spells: list[Spell]) -> list[Step]:
    boundaries = sorted({max(0.0, start) for start, _, _ in spells} | {end for _, end, _ in spells})
    return [Step(at, what, modes=tuple(mode for start, end, mode in spells if start <= at < end))
            for at in boundaries]
