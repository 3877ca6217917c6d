"""The one jittered exponential backoff (rules.py) of the wire, the batchers, the receive watchers, the Lambda
target's throttles and the supervised loops."""

from __future__ import annotations

import random

from workerless_gevent.rules import backoff_seconds


def test_full_jitter_doubles_from_the_base_up_to_the_cap() -> None:
    for attempt, ceiling in ((1, 0.25), (2, 0.5), (3, 1.0), (5, 4.0), (6, 5.0), (9, 5.0)):
        pauses = [backoff_seconds(attempt, random.Random(seed), 5.0, base_seconds=0.25) for seed in range(200)]
        assert 0 <= min(pauses) and max(pauses) <= ceiling and max(pauses) > ceiling * 0.9, (attempt, ceiling)


def test_a_floor_keeps_the_pause_above_that_share_of_its_ceiling() -> None:
    pauses = [backoff_seconds(4, random.Random(seed), 30.0, floor=0.5) for seed in range(200)]
    assert 4.0 <= min(pauses) and max(pauses) <= 8.0


def test_a_loop_that_failed_for_days_still_gets_its_capped_pause() -> None:
    """2.0 ** 1024 raises OverflowError: the supervisor of a loop failing that often would have died."""
    assert 15.0 <= backoff_seconds(5000, random.Random(1), 30.0, floor=0.5) <= 30.0
    assert 0.0 <= backoff_seconds(10**6, random.Random(2), 5.0, base_seconds=0.25) <= 5.0


def test_the_receive_watchers_and_lambda_throttles_pause_as_before_the_shared_formula() -> None:
    """A failing queue: 1 s to a ceiling doubling to 10 s; a throttled function: half to all of one doubling
    to 60 s. Same draw, same pause (to rounding) as the formulas each wrote out before."""
    for attempt in (1, 2, 3, 4, 6, 40, 5000):
        rng, old = random.Random(attempt), random.Random(attempt)
        expected = old.uniform(1.0, min(10.0, 2.0 ** min(attempt, 5)))
        assert abs(backoff_seconds(attempt + 1, rng, 10.0, least_seconds=1.0) - expected) < 1e-9
        rng, old = random.Random(attempt), random.Random(attempt)
        ceiling = min(60.0, 2.0 ** min(attempt, 20))
        assert abs(backoff_seconds(attempt + 1, rng, 60.0, floor=0.5) - old.uniform(ceiling / 2, ceiling)) < 1e-9
