"""Periodic tasks as Beanstalk defines them (cron.yaml or inline [[periodic.tasks]]) and their schedules: when
a crontab line matches, in UTC (`periodic_table.py` reads them)."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone

MACROS = ("@yearly", "@annually", "@monthly", "@weekly", "@daily", "@midnight", "@hourly")
VALIDATED_AT = datetime(2000, 1, 1, tzinfo=timezone.utc)


@dataclass(frozen=True, slots=True, kw_only=True)
class PeriodicTask:
    name: str
    url: str
    schedule: str


@dataclass(frozen=True, slots=True, kw_only=True)
class PeriodicConfig:
    queue: str
    file: str | None = None
    tasks: tuple[PeriodicTask, ...] = ()
    claims_table: str | None = None


def schedule_problem(schedule: str) -> str | None:
    """Why a schedule is not a standard 5-field UTC crontab line, or None if it is."""
    if schedule.strip() in MACROS:
        return None
    if len(schedule.split()) != 5:
        return "must be a crontab schedule of 5 fields: minute hour day-of-month month day-of-week"
    from croniter import CroniterError, croniter

    if not croniter.is_valid(schedule):
        return "is not a valid crontab schedule"
    try:
        croniter(schedule, VALIDATED_AT).get_next(datetime)
    except CroniterError:
        return "never matches a date"
    return None


def slots_between(schedule: str, after: datetime, until: datetime) -> Iterator[datetime]:
    """Scheduled times t with after < t <= until, in UTC, oldest first."""
    from croniter import croniter

    times = croniter(schedule.strip(), after)
    while True:
        slot: datetime = times.get_next(datetime)
        if slot > until:
            return
        yield slot.astimezone(timezone.utc)


def latest_slot(schedule: str, now: datetime, window: timedelta) -> datetime | None:
    """The most recent scheduled time in (now - window, now], if any."""
    slots = list(slots_between(schedule, now - window, now))
    return slots[-1] if slots else None


def iso_slot(moment: datetime) -> str:
    """The spelling of a slot time in claims, attributes and headers: ISO 8601 UTC with Z."""
    return moment.astimezone(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
