"""Periodic tasks as Beanstalk defines them: cron.yaml or inline [[periodic.tasks]], validated once."""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone

from ..errors import ConfigError
from .schema import Table

MACROS = ("@yearly", "@annually", "@monthly", "@weekly", "@daily", "@midnight", "@hourly")
TABLE_NAME = re.compile(r"^[A-Za-z0-9_.-]{3,255}$")
URL_PATH = re.compile(r"^[^\s\x00-\x1f\x7f]+$")
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


def read_periodic(table: Table) -> PeriodicConfig:
    """The [periodic] table; `file` is read here, relative to the config file, so errors come at load."""
    file = table.optional_string("file")
    claims_table = table.optional_string("claims_table")
    if claims_table is not None and not TABLE_NAME.match(claims_table):
        raise table.fail("claims_table", "must be 3-255 letters, digits, _ - or . (a DynamoDB table name)", claims_table)
    queue = table.string("queue")
    tasks = list(read_cron_file(resolve_file(file, table.source), table, file)) if file is not None else []
    for item in table.tables("tasks"):
        task = read_task(item)
        if task.name in {known.name for known in tasks}:
            raise item.fail("name", "duplicate task name (names must be unique)", task.name)
        tasks.append(task)
    if file is None and not table.has("tasks"):
        raise table.fail("file", "is required: name a cron.yaml or add [[periodic.tasks]]")
    table.finish()
    return PeriodicConfig(queue=queue, file=file, tasks=tuple(tasks), claims_table=claims_table)


def resolve_file(file: str, config_source: str) -> str:
    """Relative to the config file's directory, or to the working directory without a file."""
    if os.path.isabs(file) or config_source == "command line":
        return file
    return os.path.join(os.path.dirname(config_source), file)


def read_cron_file(path: str, table: Table, file: str) -> tuple[PeriodicTask, ...]:
    import yaml  # here, not at the top: PyYAML and croniter cost 20 ms of every start without periodic tasks

    try:
        with open(path, encoding="utf-8") as handle:
            document = yaml.safe_load(handle)
    except FileNotFoundError:
        raise table.fail("file", f"file not found: {path}", file) from None
    except (OSError, UnicodeDecodeError) as error:
        raise table.fail("file", f"cannot read {path}: {getattr(error, 'strerror', None) or error}", file) from None
    except yaml.YAMLError as error:
        raise ConfigError(path, "", "invalid YAML: " + " ".join(str(error).split())) from None
    return parse_cron_document(document, path)


def parse_cron_document(document: object, source: str) -> tuple[PeriodicTask, ...]:
    """A cron.yaml as aws-sqsd reads it: `version: 1` and a `cron:` list; other keys are ignored."""
    if document is None:
        raise ConfigError(source, "", "is empty: expected version: 1 and a cron: list")
    top = Table(document, "", source, {})
    if top.raw("version") != 1 or isinstance(top.raw("version"), bool):
        problem = "is required" if not top.has("version") else "must be 1 (the only cron.yaml version)"
        raise top.fail("version", problem, top.raw("version"))
    if not top.has("cron"):
        raise top.fail("cron", "is required: a list of tasks with name, url and schedule")
    tasks = tuple(read_task(item, strict=False) for item in top.tables("cron"))
    check_unique_names(tasks, top)
    return tasks


def read_task(table: Table, strict: bool = True) -> PeriodicTask:
    """One task; cron.yaml entries may carry extra keys (aws-sqsd ignores them), TOML ones may not."""
    task = PeriodicTask(name=table.string("name"), url=table.string("url"), schedule=table.string("schedule"))
    if not URL_PATH.match(task.url) or "://" in task.url:
        raise table.fail("url", "must be a path on the local app, such as /backup", task.url)
    problem = schedule_problem(task.schedule)
    if problem:
        raise table.fail("schedule", problem, task.schedule)
    if strict:
        table.finish()
    return task


def check_unique_names(tasks: tuple[PeriodicTask, ...], top: Table) -> None:
    seen: set[str] = set()
    for index, task in enumerate(tasks):
        if task.name in seen:
            raise top.fail(f"cron[{index}].name", "duplicate task name (names must be unique)", task.name)
        seen.add(task.name)


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
