"""Utilization: busy slots / concurrency averaged over the window, on a clock the test moves."""

from __future__ import annotations

import random

import pytest

from workerless_gevent.delivery.utilization import Utilization


class Clock:
    def __init__(self, now: float = 1000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


def test_an_idle_daemon_is_at_zero_and_a_full_one_at_one() -> None:
    clock = Clock()
    utilization = Utilization(4, 60, clock)
    clock.advance(30)
    assert utilization.average() == 0.0
    utilization.set_busy(4)
    clock.advance(120)  # two whole windows at 4 of 4
    assert utilization.average() == pytest.approx(1.0)


def test_it_is_the_time_average_over_the_last_window() -> None:
    clock = Clock()
    utilization = Utilization(10, 60, clock)
    utilization.set_busy(5)
    clock.advance(30)
    assert utilization.average() == pytest.approx(0.5)  # younger than a window: since the start
    utilization.set_busy(0)
    clock.advance(30)
    # 5 slots for 30 s of 10 slots x 60 s, within a bucket (a sixtieth) of where the window starts
    assert utilization.average() == pytest.approx(0.25, abs=0.01)
    clock.advance(60)
    assert utilization.average() == pytest.approx(0.0, abs=0.02)  # the busy half has left the window


def test_a_short_burst_counts_for_its_length_only() -> None:
    clock = Clock()
    utilization = Utilization(2, 60, clock)
    clock.advance(60)
    utilization.set_busy(2)
    clock.advance(6)
    utilization.set_busy(0)
    clock.advance(54)
    # 2 slots for 6 s in the last 60 s of 2 slots, within a bucket (1 s) of where the window starts
    assert utilization.average() == pytest.approx(0.1, abs=1 / 60)


def test_reading_does_not_change_the_value() -> None:
    clock = Clock()
    utilization = Utilization(4, 10, clock)
    utilization.set_busy(1)
    clock.advance(5)
    first = utilization.average()
    assert [utilization.average() for _ in range(3)] == [first] * 3
    assert first == pytest.approx(0.25)


def test_it_matches_a_brute_force_integral_on_random_changes() -> None:
    rng = random.Random(15)
    clock = Clock(0.0)
    concurrency, window = 8, 20.0
    utilization = Utilization(concurrency, window, clock)
    changes: list[tuple[float, int]] = [(0.0, 0)]
    for _ in range(2000):
        clock.advance(rng.expovariate(20))
        busy = rng.randint(0, concurrency)
        utilization.set_busy(busy)
        changes.append((clock.now, busy))
    clock.advance(0.2)
    # What the buckets cover: whole buckets of window/60, the oldest starting within one of now - window.
    bucket = window / 60
    since = (int(clock.now // bucket) - 59) * bucket
    busy_seconds = 0.0
    for (at, busy), (until, _) in zip(changes, [*changes[1:], (clock.now, 0)]):
        busy_seconds += busy * max(0.0, until - max(at, since))
    expected = busy_seconds / (concurrency * (clock.now - since))
    assert utilization.average() == pytest.approx(expected, rel=1e-6)
    assert len(utilization.buckets) <= 61


def test_a_long_idle_gap_after_work_walks_no_more_than_a_window() -> None:
    clock = Clock()
    utilization = Utilization(1, 60, clock)
    utilization.set_busy(1)
    clock.advance(10 * 24 * 3600)  # ten days busy, read once
    assert utilization.average() == pytest.approx(1.0)
    assert len(utilization.buckets) <= 61


def test_reads_between_changes_match_a_brute_force_integral_at_every_moment() -> None:
    rng = random.Random(22)
    clock = Clock(0.0)
    concurrency, window = 5, 3.0
    utilization = Utilization(concurrency, window, clock)
    changes: list[tuple[float, int]] = [(0.0, 0)]
    bucket = window / 60
    for step in range(3000):
        clock.advance(rng.expovariate(40) if step % 500 else 2 * window)  # now and then a quiet stretch
        if rng.random() < 0.7:
            busy = rng.randint(0, concurrency)
            utilization.set_busy(busy)
            changes.append((clock.now, busy))
            continue
        since = max(0.0, (int(clock.now // bucket) - 59) * bucket)
        busy_seconds = sum(busy * max(0.0, min(until, clock.now) - max(at, since))
                           for (at, busy), (until, _) in zip(changes, [*changes[1:], (clock.now, 0)]))
        assert utilization.average() == pytest.approx(busy_seconds / (concurrency * (clock.now - since)), abs=1e-9)
    assert len(utilization.buckets) <= 61
