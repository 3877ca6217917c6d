"""The fleet's arithmetic without I/O: the max-min fair split, what a member may take, and who counts as dead."""

from __future__ import annotations

import pytest

from workerless_gevent.fleet.shares import Liveness, Member, View, fair_share, fair_split, grant


def view(**members: tuple[float, float, int]) -> View:
    return View(3, {name: Member(share, want, counter) for name, (share, want, counter) in members.items()})


@pytest.mark.parametrize(("wants", "limit", "whole", "expected"), [
    ({"a": 10, "b": 10, "c": 10}, 10, True, {"a": 4, "b": 3, "c": 3}),  # the remainder by member order
    ({"a": 1, "b": 10, "c": 10}, 10, True, {"a": 1, "b": 5, "c": 4}),  # a small want is met; the rest split
    ({"a": 0, "b": 10}, 10, True, {"a": 0, "b": 10}),  # one busy member can use the whole limit
    ({"a": 3.0, "b": 50.0}, 20.0, False, {"a": 3.0, "b": 17.0}),  # a rate splits in fractions
    ({"a": 2, "b": 2, "c": 2}, 2, True, {"a": 1, "b": 1, "c": 0}),  # fewer units than members: none twice
])
def test_fair_split_is_max_min_fair_and_never_exceeds_the_limit(
    wants: dict[str, float], limit: float, whole: bool, expected: dict[str, float],
) -> None:
    shares = fair_split(wants, limit, whole)
    assert shares == expected
    assert sum(shares.values()) <= limit


def test_a_member_takes_its_fair_part_only_from_what_the_live_others_leave() -> None:
    item = view(a=(6, 6, 1), b=(0, 6, 1))
    part = fair_share(item, "b", 6, 6, {}, whole=True)
    assert part == 3
    assert grant(item, "b", part, 6, {}) == 0  # a still holds all 6: b waits for a to give back
    assert grant(item, "b", part, 6, {"a": 1}) == 3  # unless a is dead: its share is freed in the same write


def test_a_member_is_dead_once_its_counter_stood_for_a_lease_on_the_observers_clock() -> None:
    liveness = Liveness(10.0)
    liveness.observe(view(a=(2, 2, 7), b=(2, 2, 1)), now=100.0)
    assert liveness.dead(view(a=(2, 2, 7), b=(2, 2, 1)), 109.9, "b") == {}
    liveness.observe(view(a=(2, 2, 7), b=(2, 2, 2)), now=105.0)
    assert liveness.dead(view(a=(2, 2, 7), b=(2, 2, 2)), 110.0, "b") == {"a": 7}  # first seen at 100, never moved
    assert liveness.dead(view(a=(2, 2, 7), b=(2, 2, 2)), 110.0, "a") == {}  # b moved at 105; oneself never counts
    liveness.observe(view(a=(2, 2, 8)), now=111.0)
    assert liveness.dead(view(a=(2, 2, 8)), 120.0, "x") == {}  # a renewed: 111 + 10 is still ahead
