"""Slots, cron messages and the scheduler's tick, on a hand-driven clock and no network."""

from __future__ import annotations

import random
from datetime import datetime, timedelta, timezone
from typing import Any

import botocore.exceptions

from workerless_gevent.config.cron import PeriodicTask, iso_slot, latest_slot, slots_between
from workerless_gevent.periodic.scheduler import (
    CATCH_UP_SECONDS,
    RETRY_SECONDS,
    Scheduler,
    Slot,
    build_message,
)

EVERY_MINUTE = PeriodicTask(name="tick", url="/cron/tick", schedule="* * * * *")
TWICE_A_DAY = PeriodicTask(name="backup-job", url="/backup", schedule="0 */12 * * *")


def at(text: str) -> datetime:
    return datetime.fromisoformat(text).replace(tzinfo=timezone.utc)


class Clock:
    def __init__(self, start: datetime) -> None:
        self.moment = start

    def __call__(self) -> float:
        return self.moment.timestamp()

    def advance(self, seconds: float) -> datetime:
        self.moment += timedelta(seconds=seconds)
        return self.moment


class RecordingQueue:
    """What the scheduler needs of an SqsQueue: a name and `send`; optionally failing the first sends."""

    def __init__(self, failures: int = 0) -> None:
        self.name = "jobs"
        self.sent: list[tuple[str, dict[str, Any], dict[str, Any]]] = []
        self.failures = failures

    def send(self, body: str, attributes: dict[str, Any], **extra: Any) -> None:
        if self.failures:
            self.failures -= 1
            raise botocore.exceptions.ClientError({"Error": {"Code": "InternalError", "Message": "x"}}, "SendMessage")
        self.sent.append((body, attributes, extra))

    def scheduled_times(self) -> list[str]:
        return [attributes["beanstalk.sqsd.scheduled_time"]["StringValue"] for _, attributes, _ in self.sent]


def test_slots_between_excludes_start_and_includes_end() -> None:
    slots = list(slots_between("*/10 * * * *", at("2024-05-01T00:10:00"), at("2024-05-01T00:40:00")))
    assert [iso_slot(slot) for slot in slots] == ["2024-05-01T00:20:00Z", "2024-05-01T00:30:00Z",
                                                  "2024-05-01T00:40:00Z"]
    assert all(slot.tzinfo == timezone.utc for slot in slots)


def test_latest_slot_within_the_window() -> None:
    window = timedelta(minutes=5)
    assert latest_slot("0 */12 * * *", at("2024-05-01T12:04:59"), window) == at("2024-05-01T12:00:00")
    assert latest_slot("0 */12 * * *", at("2024-05-01T12:00:00"), window) == at("2024-05-01T12:00:00")
    assert latest_slot("0 */12 * * *", at("2024-05-01T12:05:00"), window) is None
    assert latest_slot("* * * * *", at("2024-05-01T12:04:30"), window) == at("2024-05-01T12:04:00")


def test_message_is_what_aws_sqsd_sends() -> None:
    body, attributes, extra = build_message(Slot(TWICE_A_DAY, at("2024-05-01T12:00:00")), is_fifo=False)
    assert body == "elasticbeanstalk scheduled job"
    assert attributes == {
        "beanstalk.sqsd.task_name": {"DataType": "String", "StringValue": "backup-job"},
        "beanstalk.sqsd.scheduled_time": {"DataType": "String", "StringValue": "2024-05-01T12:00:00Z"},
        "beanstalk.sqsd.path": {"DataType": "String", "StringValue": "/backup"},
    }
    assert extra == {}


def test_fifo_ids_come_from_task_and_time() -> None:
    task = PeriodicTask(name="nightly report é", url="/r", schedule="@daily")
    _, _, first = build_message(Slot(task, at("2024-05-01T00:00:00")), is_fifo=True)
    _, _, again = build_message(Slot(task, at("2024-05-01T00:00:00")), is_fifo=True)
    _, _, next_day = build_message(Slot(task, at("2024-05-02T00:00:00")), is_fifo=True)
    assert first == again and first["MessageDeduplicationId"] != next_day["MessageDeduplicationId"]
    assert first["MessageGroupId"] == "nightly_report__"
    assert len(first["MessageDeduplicationId"]) == 64


def test_each_slot_is_sent_once_as_time_passes() -> None:
    clock = Clock(at("2024-05-01T11:58:30"))
    queue = RecordingQueue()
    scheduler = Scheduler((EVERY_MINUTE, TWICE_A_DAY), queue, False, None, clock, random.Random(1))
    scheduler.tick(clock.advance(0))
    assert queue.sent == []  # no claims table: nothing from before the start is sent
    for _ in range(8):
        scheduler.tick(clock.advance(20))  # up to 12:01:10
    scheduler.tick(clock.advance(0))
    assert queue.scheduled_times() == ["2024-05-01T11:59:00Z", "2024-05-01T12:00:00Z", "2024-05-01T12:00:00Z",
                                       "2024-05-01T12:01:00Z"]
    names = [attributes["beanstalk.sqsd.task_name"]["StringValue"] for _, attributes, _ in queue.sent]
    assert names == ["tick", "tick", "backup-job", "tick"]


def test_a_failed_send_is_retried_then_given_up_after_the_catch_up_window() -> None:
    clock = Clock(at("2024-05-01T11:59:59"))
    queue = RecordingQueue(failures=2)
    scheduler = Scheduler((TWICE_A_DAY,), queue, False, None, clock, random.Random(1))
    scheduler.tick(clock.advance(1))
    assert queue.sent == [] and scheduler.seconds_to_wait(clock.moment) == RETRY_SECONDS
    scheduler.tick(clock.advance(RETRY_SECONDS))
    scheduler.tick(clock.advance(RETRY_SECONDS))
    assert queue.scheduled_times() == ["2024-05-01T12:00:00Z"] and not scheduler.pending

    queue.failures = 1000
    clock.moment = at("2024-05-02T00:00:00")
    scheduler.tick(clock.moment)
    scheduler.tick(clock.advance(CATCH_UP_SECONDS))
    assert scheduler.pending  # exactly at the edge of the window it still tries
    scheduler.tick(clock.advance(1))
    assert not scheduler.pending and len(queue.sent) == 1


def test_it_sleeps_until_the_next_slot() -> None:
    clock = Clock(at("2024-05-01T11:59:50"))
    scheduler = Scheduler((TWICE_A_DAY, EVERY_MINUTE), RecordingQueue(), False, None, clock, random.Random(1))
    assert abs(scheduler.seconds_to_wait(clock.moment) - 10.005) < 1e-6
    only_daily = Scheduler((TWICE_A_DAY,), RecordingQueue(), False, None, clock, random.Random(1))
    assert only_daily.seconds_to_wait(at("2024-05-01T12:00:01")) == 30.0  # re-reads the clock now and then
