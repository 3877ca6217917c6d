"""The [periodic] table read into `PeriodicConfig`: a Beanstalk cron.yaml read unchanged, relative to the config
file, or inline [[periodic.tasks]], each task and schedule checked at load."""

from __future__ import annotations

import re

from ..errors import ConfigError
from .cron import PeriodicConfig, PeriodicTask, schedule_problem
from .descriptions import TABLE_NAME_PROBLEM, keys_of
from .model import TABLE_NAME
from .schema import Table

URL_PATH = re.compile(r"^[^\s\x00-\x1f\x7f]+$")
PERIODIC = keys_of(PeriodicConfig)
TASK = keys_of(PeriodicTask)


def read_periodic(table: Table) -> PeriodicConfig:
    """`file` is read here, relative to the config file, so errors come at load."""
    file = table.optional_string(PERIODIC["file"])
    claims_table = table.optional_string(PERIODIC["claims_table"])
    if claims_table is not None and not TABLE_NAME.match(claims_table):
        raise table.fail("claims_table", TABLE_NAME_PROBLEM, claims_table)
    queue = table.string(PERIODIC["queue"])
    tasks = list(read_cron_file(table.file_path(file), table, file)) if file is not None else []
    for item in table.tables("tasks"):
        task = read_task(item)
        if task.name in {known.name for known in tasks}:
            raise item.fail("name", "duplicate task name (names must be unique)", task.name)
        tasks.append(task)
    if file is None and not table.has("tasks"):
        raise table.fail("file", "is required: name a cron.yaml or add [[periodic.tasks]]")
    table.finish()
    return PeriodicConfig(queue=queue, file=file, tasks=tuple(tasks), claims_table=claims_table)


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
    task = PeriodicTask(name=table.string(TASK["name"]), url=table.string(TASK["url"]),
                        schedule=table.string(TASK["schedule"]))
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
