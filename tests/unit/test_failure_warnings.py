"""A queue whose receives keep failing is warned about at a slowing rate: never silent, never a flood."""

from __future__ import annotations

from workerless_gevent.delivery.receive_failures import warning_due_seconds
from workerless_gevent.logs import duration_text


def test_warnings_come_at_the_start_after_one_and_five_minutes_then_every_fifteen() -> None:
    due = [warning_due_seconds(logged) for logged in range(7)]
    assert due == [0.0, 60.0, 300.0, 1200.0, 2100.0, 3000.0, 3900.0]


def test_in_an_hour_of_failing_a_queue_logs_six_warnings() -> None:
    logged, warned_at = 0, []
    for second in range(3600):
        if second >= warning_due_seconds(logged):
            warned_at.append(second)
            logged += 1
    assert warned_at == [0, 60, 300, 1200, 2100, 3000]


def test_durations_read_as_seconds_then_minutes() -> None:
    assert [duration_text(seconds) for seconds in (4.2, 119, 300, 5400)] == ["4s", "119s", "5min", "90min"]
