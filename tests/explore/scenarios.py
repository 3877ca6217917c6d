"""Scenarios: schedules whose knobs are fixed on one kind of partial fault, the rest drawn from the seed. Each is
named after what it makes, and says which finding of issue 48 it reproduces on the code before that issue's fixes
(18d15f8) and which invariant that breaks; after the fixes every seed of it keeps every invariant. The CI runs
`CI_SEEDS` of each (test_explore_faults.py::test_scenario); WORKERLESS_SEED=SCENARIO:SEED replays one.

- throttled_claims (issue 48, finding 1): a table that cancels 50-90 % of the claim transactions with
  ThrottlingError reasons and answers every other write, keyed messages on a queue whose redrive policy
  dead-letters at the 3rd receive. Breaks dead-lettered-undelivered and outage-receives.
- stop_during_reload (finding 2): a SIGHUP that adds a queue by name whose GetQueueUrl never answers (at times a
  second SIGHUP), then a SIGTERM while the reload waits on it. Breaks stop-deadline.
- fifo_batch_payloads (finding 4): a FIFO queue with large_payloads delivered in batches (batch HTTP or Lambda),
  one message's S3 object missing with group-mates after it. Breaks dead-lettered-undelivered.
- released_backoff (finding 5): exponential back-off on a FIFO group of poison messages, the later ones
  released behind the first until it is dead-lettered, then failing themselves. Breaks backoff-counted."""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass, replace

from .faults import Mode
from .generate import weighted
from .schedule import MessageSpec, Schedule, Step
from .spells import STALLED_FOR_GOOD, as_steps


@dataclass(frozen=True)
class Scenario:
    finding: str  # what it reproduces before the fixes
    breaks: str  # the invariants that finding breaks
    build: Callable[[int], Schedule]


def base(seed: int, scenario: str, rng: random.Random, **knobs: object) -> Schedule:
    settings: dict[str, object] = dict(
        seed=seed, scenario=scenario, fifo=False, key=None, on_store_failure="hold", reload_adds_key=False,
        concurrency=rng.choice((2, 3, 4)), batch_size=10, visibility_timeout=rng.choice((3, 4, 5)),
        error_visibility_timeout=1, shutdown_timeout=rng.choice((1, 2, 3)), max_retries=3, dead_letter_queue=False,
        max_receive_count=None, messages=(), target="http", target_batch_size=1)
    settings.update(knobs)
    return Schedule(**settings)  # type: ignore[arg-type]


def throttled_claims(seed: int) -> Schedule:
    rng = random.Random(f"throttled_claims:{seed}")
    spell_end = rng.uniform(7.0, 10.0)
    count, late = rng.randint(8, 14), rng.randint(4, 8)  # some sent while the claims are throttled
    messages = tuple(MessageSpec(serial, f"order-{serial}", None, 0.0 if serial < count else
                                 rng.uniform(0.5, spell_end - 4.0), False) for serial in range(count + late))
    target = weighted(rng, (("http", 60), ("http_batch", 20), ("lambda", 20)))
    claims = Mode(("cancel_throttle", "cancel_throttle_one"), rng.uniform(0.5, 0.9), frozenset({"TransactWriteItems"}))
    schedule = base(seed, "throttled_claims", rng, key="body:order.id", messages=messages, max_receive_count=2,
                    dead_letter_queue=rng.random() < 0.5, target=target,
                    target_batch_size=1 if target == "http" else rng.choice((5, 10)))
    timeline = [*as_steps("store", [(0.0, spell_end, claims)]), Step(spell_end + 2.0, "stop"),
                *(Step(m.send_at, "send", serial=m.serial) for m in messages if m.send_at)]
    return with_timeline(schedule, timeline)


def stop_during_reload(seed: int) -> Schedule:
    rng = random.Random(f"stop_during_reload:{seed}")
    messages = tuple(MessageSpec(serial, f"order-{serial}" if rng.random() < 0.5 else None, None, 0.0, False)
                     for serial in range(rng.randint(2, 6)))
    keyed = rng.random() < 0.5
    reload_at = rng.uniform(0.5, 2.0)
    stalled = Mode(("stall",), 1.0, frozenset({"GetQueueUrl"}), STALLED_FOR_GOOD)
    timeline = [*as_steps("sqs", [(reload_at - 0.05, reload_at + 90.0, stalled)]),
                Step(reload_at, "reload", change="adds_queue")]
    if rng.random() < 0.3:  # a second SIGHUP while the first reload waits
        timeline.append(Step(reload_at + rng.uniform(0.05, 0.4), "reload", change="settings"))
    timeline.append(Step(reload_at + rng.uniform(0.2, 1.5), "stop"))
    schedule = base(seed, "stop_during_reload", rng, key="body:order.id" if keyed else None, messages=messages,
                    shutdown_timeout=rng.choice((1, 2, 3, 6)))
    return with_timeline(schedule, timeline)


def fifo_batch_payloads(seed: int) -> Schedule:
    rng = random.Random(f"fifo_batch_payloads:{seed}")
    count, groups = rng.randint(4, 8), rng.choice((1, 2))
    group_of = [f"g{rng.randrange(groups)}" for _ in range(count)]
    # the missing object's message has a group-mate after it
    candidates = [serial for serial in range(count) if group_of[serial] in group_of[serial + 1:]] or [0]
    missing = rng.choice(candidates)
    messages = tuple(MessageSpec(serial, None, group_of[serial], 0.0, False,
                                 payload="missing" if serial == missing else "s3") for serial in range(count))
    target = rng.choice(("http_batch", "lambda"))
    schedule = base(seed, "fifo_batch_payloads", rng, fifo=True, messages=messages, dead_letter_queue=True,
                    max_retries=rng.choice((2, 3)), error_visibility_timeout=rng.choice((0, 1)), target=target,
                    target_batch_size=rng.choice((3, 5, 10)), large_payloads=True)
    return with_timeline(schedule, [Step(rng.uniform(6.0, 8.0), "stop")])


def released_backoff(seed: int) -> Schedule:
    rng = random.Random(f"released_backoff:{seed}")
    mates = rng.randint(1, 3)  # released behind the poison head of their group, then failing themselves
    messages = tuple(MessageSpec(serial, None, "g0", 0.0, True) for serial in range(1 + mates))
    schedule = base(seed, "released_backoff", rng, fifo=True, messages=messages, dead_letter_queue=True,
                    max_retries=3, backoff="exponential", batch_size=10)
    return with_timeline(schedule, [Step(rng.uniform(6.0, 8.0), "stop")])


def with_timeline(schedule: Schedule, timeline: list[Step]) -> Schedule:
    return replace(schedule, timeline=tuple(sorted(timeline, key=lambda step: step.at)))


SCENARIOS = {"throttled_claims": Scenario("issue 48, 1: a partly throttled table dead-letters what it never delivered",
                                          "dead-lettered-undelivered, outage-receives", throttled_claims),
             "stop_during_reload": Scenario("issue 48, 2: a SIGTERM during a stalled reload misses its deadline",
                                            "stop-deadline", stop_during_reload),
             "fifo_batch_payloads": Scenario("issue 48, 4: a FIFO batch fails the group-mates of a payload that "
                                             "cannot be fetched", "dead-lettered-undelivered", fifo_batch_payloads),
             "released_backoff": Scenario("issue 48, 5: back-off doubles on receives max_retries does not count",
                                          "backoff-counted", released_backoff)}
CI_SEEDS = {"throttled_claims": (0, 1, 2), "stop_during_reload": (0, 1, 2), "fifo_batch_payloads": (0, 1, 2),
            "released_backoff": (0, 1)}
