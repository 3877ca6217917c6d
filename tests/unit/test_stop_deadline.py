"""lifecycle/stopping.py's StopDeadline: one deadline `shutdown_timeout` after the first stop signal, the
deliveries cut early enough to leave the last flushes their share, a second signal cutting now."""

from __future__ import annotations

import pytest

from workerless_gevent.lifecycle.stopping import StopDeadline, flush_share


@pytest.mark.parametrize(("timeout_seconds", "share"), [(25, 3.0), (12, 3.0), (6, 1.5), (2, 0.5), (0, 0.0)])
def test_the_flushes_get_three_seconds_or_a_quarter_of_a_smaller_budget(timeout_seconds: int, share: float) -> None:
    assert flush_share(timeout_seconds) == share


def test_the_deliveries_are_cut_before_the_deadline_and_the_completions_end_halfway_through_the_flushes() -> None:
    deadline = StopDeadline(100.0, 6)
    assert (deadline.cut, deadline.completions_until, deadline.deadline) == (104.5, 105.25, 106.0)
    default = StopDeadline(100.0, 25)  # Heroku's SIGKILL comes 30 s after its SIGTERM
    assert (default.cut, default.completions_until, default.deadline) == (122.0, 123.5, 125.0)


def test_what_remains_is_counted_to_the_deadline_or_another_time_within_a_cap_and_never_below_zero() -> None:
    deadline = StopDeadline(100.0, 6)
    assert deadline.remaining(now=103.0) == 3.0
    assert deadline.remaining(deadline.cut, now=103.0) == 1.5
    assert deadline.remaining(cap=2.0, now=103.0) == 2.0
    assert deadline.remaining(deadline.cut, now=105.0) == 0.0
    assert deadline.remaining(now=107.0) == 0.0


def test_a_second_signal_cuts_now_and_leaves_the_flushes_their_share_at_most() -> None:
    early = StopDeadline(100.0, 25)
    early.force(102.0)
    assert (early.cut, early.deadline) == (102.0, 105.0)
    late = StopDeadline(100.0, 6)
    late.force(105.5)  # during the flushes: neither time moves later
    assert (late.cut, late.deadline) == (104.5, 106.0)


def test_no_budget_is_no_wait() -> None:
    deadline = StopDeadline(100.0, 0)
    assert deadline.cut == deadline.completions_until == deadline.deadline == 100.0
    assert deadline.remaining(deadline.cut, now=100.0) == 0.0
