"""One seed, one schedule: the queue and the daemon's settings, the messages (keys, FIFO groups, poison ones,
copies sent later), and a timeline of what the app does, which DynamoDB and SQS faults are on, a reload, and
the stop. Pure: the same seed gives the same schedule (its timing on the machine is what varies)."""

from __future__ import annotations

import dataclasses
import random
from dataclasses import dataclass, field

from .faults import Mode

APP_MODES = (("answer", 45), ("fail", 20), ("hang", 12), ("overload", 8), ("slow", 15))
OUTAGE_KINDS = ("throughput", "throttling", "limit", "cancel_throttle", "cancel_throttle", "cancel_throttle", "error",
                "unavailable", "reset", "stall_reset")
FLAKY_KINDS = ("throughput", "cancel_throttle", "error", "reset", "reset_after", "stall", "conflict")
SQS_ACTIONS = ("ReceiveMessage", "DeleteMessageBatch", "ChangeMessageVisibilityBatch", "SendMessage")
SQS_KINDS = ("error", "unavailable", "throttle", "reset", "reset_after", "stall")
STOP_STALLS = frozenset({"DeleteMessageBatch", "ChangeMessageVisibilityBatch"})


@dataclass(frozen=True)
class MessageSpec:
    serial: int
    key: str | None  # the body's order.id (None: the body has no key)
    group: str | None  # FIFO
    send_at: float  # seconds after the start; 0: before the daemon starts
    poison: bool  # the app fails it every time


@dataclass(frozen=True)
class Step:
    at: float  # seconds after the daemon's start
    what: str  # app | store | sqs | send | reload | stop
    app_mode: str = ""
    modes: tuple[Mode, ...] = ()
    serial: int = -1


@dataclass(frozen=True)
class Schedule:
    seed: int
    fifo: bool
    key: str | None  # the queue's idempotency_key
    on_store_failure: str
    reload_adds_key: bool  # the daemon starts without [idempotency]; a reload adds it and the key
    concurrency: int
    batch_size: int
    visibility_timeout: int
    error_visibility_timeout: int
    shutdown_timeout: int
    max_retries: int
    dead_letter_queue: bool  # the daemon's own (dead_letter_queue, after max_retries)
    max_receive_count: int | None  # the queue's redrive policy
    messages: tuple[MessageSpec, ...]
    timeline: tuple[Step, ...] = field(default=())

    @property
    def stop_at(self) -> float:
        return next(step.at for step in self.timeline if step.what == "stop")

    @property
    def is_keyed(self) -> bool:
        return self.key is not None

    def describe(self) -> str:
        settings = (f"seed {self.seed}: {'FIFO' if self.fifo else 'standard'} queue, key={self.key}, "
                    f"on_store_failure={self.on_store_failure}, reload_adds_key={self.reload_adds_key}, "
                    f"concurrency={self.concurrency}, batch_size={self.batch_size}, "
                    f"visibility_timeout={self.visibility_timeout}, "
                    f"error_visibility_timeout={self.error_visibility_timeout}, "
                    f"shutdown_timeout={self.shutdown_timeout}, max_retries={self.max_retries}, "
                    f"dead_letter_queue={self.dead_letter_queue}, maxReceiveCount={self.max_receive_count}")
        messages = "; ".join(f"#{m.serial} key={short_key(m.key)}{' group=' + m.group if m.group else ''}"
                             f"{' poison' if m.poison else ''}{f' at {m.send_at:.1f}s' if m.send_at else ''}"
                             for m in self.messages)
        steps = "\n".join(f"  {step.at:5.2f}s {describe_step(step)}" for step in self.timeline)
        return f"{settings}\n  messages: {messages}\n{steps}"


def describe_step(step: Step) -> str:
    if step.what == "app":
        return f"app {step.app_mode}"
    if step.what in ("store", "sqs"):
        modes = ", ".join(describe_mode(mode) for mode in step.modes)
        return f"{'DynamoDB' if step.what == 'store' else 'SQS'} faults: {modes or 'none'}"
    if step.what == "send":
        return f"send #{step.serial}"
    return step.what


def describe_mode(mode: Mode) -> str:
    stalls = any(kind.startswith("stall") for kind in mode.kinds)
    return (f"{'/'.join(mode.kinds)} x{mode.share:.2f}{' on ' + ','.join(sorted(mode.actions)) if mode.actions else ''}"
            f"{f' stall {mode.stall[0]:.1f}-{mode.stall[1]:.1f}s' if stalls else ''}")


def short_key(key: str | None) -> str:
    """A key as the reports show it: a long one cut, with its length."""
    return str(key) if key is None or len(key) <= 24 else f"{key[:20]}..({len(key)})"


def weighted(rng: random.Random, choices: tuple[tuple[str, int], ...]) -> str:
    return rng.choices([name for name, _ in choices], [weight for _, weight in choices])[0]


def build_schedule(seed: int) -> Schedule:
    rng = random.Random(seed)
    fifo = rng.random() < 0.35
    key = weighted(rng, (("body:order.id", 70), ("message_id", 10), ("none", 15))
                   + ((("dedup_id", 5),) if fifo else ()))
    on_store_failure = "deliver" if key != "none" and rng.random() < 0.12 else "hold"
    stop_at = rng.uniform(1.5, 4.0) if rng.random() < 0.4 else rng.uniform(4.0, 10.0)
    spells = store_spells(rng, stop_at) if key != "none" else []
    messages = build_messages(rng, fifo, stop_at, [start for start, _, mode in spells if mode.share == 1.0])
    schedule = Schedule(
        seed=seed, fifo=fifo, key=None if key == "none" else key, on_store_failure=on_store_failure,
        reload_adds_key=key == "body:order.id" and on_store_failure == "hold" and rng.random() < 0.12,
        concurrency=rng.choice((1, 2, 3, 4)), batch_size=rng.choice((10, 10, 5, 3, 1)),
        visibility_timeout=rng.choice((2, 3, 4, 5)), error_visibility_timeout=rng.choice((0, 1, 1, 2)),
        shutdown_timeout=rng.choice((1, 2, 3)), max_retries=rng.choice((2, 3, 4)),
        dead_letter_queue=rng.random() < 0.5,
        max_receive_count=rng.choice((3, 3, 4, 5)) if rng.random() < 0.6 else None, messages=messages)
    timeline = [*app_steps(rng, stop_at), *as_steps("store", spells), *sqs_steps(rng, stop_at),
                *(Step(m.send_at, "send", serial=m.serial) for m in messages if m.send_at)]
    if schedule.reload_adds_key:
        timeline.append(Step(rng.uniform(0.3, max(0.4, stop_at - 1.0)), "reload"))
    timeline.append(Step(stop_at, "stop"))
    return dataclasses.replace(schedule, timeline=tuple(sorted(timeline, key=lambda step: step.at)))


def build_messages(rng: random.Random, fifo: bool, stop_at: float, outages: list[float]) -> tuple[MessageSpec, ...]:
    """A few messages, some sharing keys; a quarter sent later, some of those just as an outage begins."""
    count = rng.randint(3, 8)
    pool = rng.randint(max(1, count // 2), count)
    keys = [f"order-{index}" + ("-" + "x" * rng.choice((300, 9000)) if rng.random() < 0.04 else "")
            for index in range(pool)]
    groups = rng.randint(1, 3)

    def send_at() -> float:
        if rng.random() >= 0.25:
            return 0.0
        if outages and rng.random() < 0.6:
            return min(stop_at * 0.9, rng.choice(outages) + rng.uniform(0.1, 1.0))
        return rng.uniform(0.3, stop_at * 0.8)

    return tuple(MessageSpec(serial=serial, key=None if rng.random() < 0.15 else rng.choice(keys),
                             group=f"g{rng.randrange(groups)}" if fifo else None, send_at=send_at(),
                             poison=rng.random() < 0.08)
                 for serial in range(count))


def app_steps(rng: random.Random, stop_at: float) -> list[Step]:
    return [Step(rng.uniform(0.0, stop_at), "app", app_mode=weighted(rng, APP_MODES))
            for _ in range(rng.randint(0, 3))]


def store_spells(rng: random.Random, stop_at: float) -> list[tuple[float, float, Mode]]:
    """Outages (every item call fails; half of them from the start, as the first receives land) and flaky
    spells (a share of the calls), as intervals of time."""
    spells: list[tuple[float, float, Mode]] = []
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


def sqs_steps(rng: random.Random, stop_at: float) -> list[Step]:
    spells: list[tuple[float, float, Mode]] = []
    if rng.random() < 0.35:
        start = rng.uniform(0.0, stop_at)
        actions = frozenset(rng.sample(SQS_ACTIONS, rng.randint(1, 3)))
        kinds = tuple(rng.sample(SQS_KINDS, rng.randint(1, 2)))
        spells.append((start, start + rng.uniform(0.5, 4.0), Mode(kinds, rng.uniform(0.2, 1.0), actions, (0.2, 3.0))))
    if rng.random() < 0.25:  # deletes and visibility changes that hang across the stop
        spells.append((stop_at - rng.uniform(0.0, 1.0), stop_at + 15.0,
                       Mode(("stall",), 1.0, STOP_STALLS, (5.0, 10.0))))
    return as_steps("sqs", spells)


def as_steps(what: str, spells: list[tuple[float, float, Mode]]) -> list[Step]:
    boundaries = sorted({max(0.0, start) for start, _, _ in spells} | {end for _, end, _ in spells})
    return [Step(at, what, modes=tuple(mode for start, end, mode in spells if start <= at < end))
            for at in boundaries]
