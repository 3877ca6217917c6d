"""The general schedules: every knob drawn from the seed. The settings and messages, then the timeline: the app's
modes, DynamoDB spells (outages, flaky spells, a share of one kind of call, slow calls), SQS spells, Lambda
throttles, late copies, reloads and the stop. `scenarios.py` builds on the same parts."""

from __future__ import annotations

import dataclasses
import random

from .schedule import MessageSpec, Schedule, Step
from .spells import (app_steps, as_steps, partial_store_spells, reload_steps, sqs_spells, stop_step, store_spells,
                     target_spells)


def weighted(rng: random.Random, choices: tuple[tuple[str, int], ...]) -> str:
    return rng.choices([name for name, _ in choices], [weight for _, weight in choices])[0]


def build_general(seed: int) -> Schedule:
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
    schedule = with_partial_faults(rng, schedule, stop_at)
    if key != "none":
        spells += partial_store_spells(rng, stop_at)
    reloads = reload_steps(rng, schedule.reload_adds_key, stop_at)
    outages = [(start, end) for start, end, mode in spells if mode.share == 1.0 and not mode.actions]
    timeline = [*app_steps(rng, stop_at), *as_steps("store", spells),
                *as_steps("sqs", sqs_spells(rng, stop_at, tuple(reloads))),
                *as_steps("lambda", target_spells(rng, stop_at)), *reloads, stop_step(rng, stop_at, reloads, outages),
                *(Step(m.send_at, "send", serial=m.serial) for m in messages if m.send_at)]
    return dataclasses.replace(schedule, timeline=tuple(sorted(timeline, key=lambda step: step.at)))


def with_partial_faults(rng: random.Random, schedule: Schedule, stop_at: float) -> Schedule:
    """Issue 48's dimensions, drawn after the ones above (so that a seed's older knobs keep their values): the
    target, the back-off, large payloads (one object missing at times)."""
    target = weighted(rng, (("http", 55), ("http_batch", 25), ("lambda", 20)))
    large = rng.random() < (0.5 if schedule.fifo and target != "http" else 0.12)
    messages = schedule.messages
    if large:
        missing = rng.randrange(len(messages)) if rng.random() < 0.6 else -1
        messages = tuple(dataclasses.replace(m, payload="missing" if m.serial == missing else "s3")
                         for m in messages)
    return dataclasses.replace(schedule, target=target, target_batch_size=1 if target == "http" else
                               rng.choice((2, 3, 5, 10)), backoff="exponential" if rng.random() < 0.4 else "constant",
                               large_payloads=large, messages=messages)


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
