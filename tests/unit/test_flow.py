"""Target flow control: the token bucket and the AIMD in-flight limit, on a clock we move by hand."""

from __future__ import annotations

import math

import pytest

from workerless_gevent.delivery.flow import TargetFlow, TokenBucket


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_the_bucket_starts_full_at_the_burst_then_refills_at_the_rate() -> None:
    clock = Clock()
    bucket = TokenBucket(5, clock)
    for _ in range(5):
        assert bucket.wait_seconds() == 0
        bucket.take()
    assert bucket.wait_seconds() == pytest.approx(0.2)
    clock.now += 0.1
    assert bucket.wait_seconds() == pytest.approx(0.1)
    clock.now += 10
    for _ in range(5):  # never more than the burst, however long it idled
        bucket.take()
    assert bucket.wait_seconds() > 0


def test_over_any_window_the_rate_plus_the_burst_bounds_the_starts() -> None:
    clock = Clock()
    flow = TargetFlow("billing", ceiling=100, rate=20, clock=clock)
    starts = []
    while clock.now < 110:  # 10 s, asking every millisecond
        if flow.wait_seconds() == 0:
            flow.start()
            flow.finish(clock.now, overloaded=False)
            starts.append(clock.now)
        clock.now += 0.001
    assert 20 * 10 <= len(starts) <= 20 * 10 + 20
    steady = [moment for moment in starts if moment >= 102]
    assert len(steady) == pytest.approx(20 * 8, abs=2)  # the steady rate, once the burst is spent


def test_the_limit_caps_starts_and_a_finish_frees_a_place() -> None:
    flow = TargetFlow("app", ceiling=2)
    first, _ = flow.start()
    flow.start()
    assert flow.wait_seconds() == math.inf and flow.room() == 0
    flow.finish(first, overloaded=False)
    assert flow.wait_seconds() == 0 and flow.room() == 1


def test_an_overload_halves_the_limit_once_per_round_and_never_below_one() -> None:
    clock = Clock()
    flow = TargetFlow("app", ceiling=16, clock=clock)
    started = [flow.start()[0] for _ in range(16)]
    clock.now += 1
    assert flow.finish(started[0], overloaded=True) is True
    assert flow.limit == 8
    # The others started before the cut: they saw the old limit and tell nothing new.
    assert flow.finish(started[1], overloaded=True) is False
    assert flow.limit == 8
    for moment in started[2:]:
        flow.finish(moment, overloaded=False)
    for _ in range(5):
        clock.now += 1
        flow.finish(flow.start()[0], overloaded=True)
    assert flow.limit == 1


def test_successes_grow_the_limit_by_one_per_window_up_to_where_it_started() -> None:
    clock = Clock()
    flow = TargetFlow("app", ceiling=4, clock=clock)
    flow.start()
    clock.now += 1
    flow.finish(clock.now - 0.5, overloaded=True)
    assert flow.limit == 1
    grown = []
    for _ in range(20):
        flow.finish(flow.start()[0], overloaded=False)
        grown.append(flow.limit)
    assert grown[:6] == [2, 2, 3, 3, 3, 4]  # a window of successes as large as the limit adds one
    assert max(grown) == 4


def test_failure_mode_never_shrinks() -> None:
    flow = TargetFlow("app", ceiling=8, adaptive=False)
    flow.finish(flow.start()[0], overloaded=True)
    assert flow.limit == 8


def test_a_start_tells_whether_it_waited_for_the_rate() -> None:
    clock = Clock()
    flow = TargetFlow("app", ceiling=10, rate=1, clock=clock)
    assert flow.wait_seconds() == 0
    assert flow.start()[1] is False
    assert flow.wait_seconds() > 0
    clock.now += 1
    assert flow.wait_seconds() == 0
    assert flow.start()[1] is True
