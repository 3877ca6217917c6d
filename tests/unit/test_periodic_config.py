"""[periodic], cron.yaml and inline tasks: what loads, and the exact one-line error for what does not."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from workerless_gevent.config.cron import PeriodicConfig, PeriodicTask, schedule_problem
from workerless_gevent.config.periodic_table import parse_cron_document
from workerless_gevent.errors import ConfigError
from workerless_gevent.config.loading import load_config

BASE = """
[[queues]]
name = "default"

[[queues]]
name = "jobs"

[targets.default]
type = "http"
url = "http://127.0.0.1:8080/"
"""

BEANSTALK_EXAMPLE = """
version: 1
cron:
 - name: "backup-job"          # required - unique across all entries in this file
   url: "/backup"              # required - does not need to be unique
   schedule: "0 */12 * * *"    # required - does not need to be unique
 - name: "audit"
   url: "/audit"
   schedule: "0 23 * * *"
"""


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(textwrap.dedent(text).lstrip("\n"))
    return path


def load(tmp_path: Path, periodic: str, cron: str | None = None) -> PeriodicConfig | None:
    if cron is not None:
        write(tmp_path / "cron.yaml", cron)
    config_path = write(tmp_path / "workerless.toml", BASE + textwrap.dedent(periodic))
    return load_config(str(config_path), {}, {}).periodic


def error_of(tmp_path: Path, periodic: str, cron: str | None = None) -> str:
    with pytest.raises(ConfigError) as caught:
        load(tmp_path, periodic, cron)
    return caught.value.line()


def test_beanstalk_cron_yaml_loads_unchanged(tmp_path: Path) -> None:
    periodic = load(tmp_path, """
        [periodic]
        file = "cron.yaml"
        queue = "jobs"
        claims_table = "workerless-cron"
        """, BEANSTALK_EXAMPLE)
    assert periodic == PeriodicConfig(
        queue="jobs",
        file="cron.yaml",
        claims_table="workerless-cron",
        tasks=(
            PeriodicTask(name="backup-job", url="/backup", schedule="0 */12 * * *"),
            PeriodicTask(name="audit", url="/audit", schedule="0 23 * * *"),
        ),
    )


def test_no_periodic_table_means_none(tmp_path: Path) -> None:
    assert load(tmp_path, "") is None


def test_inline_tasks_join_the_file(tmp_path: Path) -> None:
    periodic = load(tmp_path, """
        [periodic]
        file = "cron.yaml"
        queue = "default"

        [[periodic.tasks]]
        name = "report"
        url = "/report"
        schedule = "@hourly"
        """, BEANSTALK_EXAMPLE)
    assert periodic is not None and periodic.claims_table is None
    assert [task.name for task in periodic.tasks] == ["backup-job", "audit", "report"]


def test_file_is_relative_to_the_config_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    write(tmp_path / "conf" / "cron.yaml", BEANSTALK_EXAMPLE)
    config_path = write(tmp_path / "conf" / "w.toml", BASE + '[periodic]\nfile = "cron.yaml"\nqueue = "jobs"\n')
    monkeypatch.chdir(tmp_path)
    periodic = load_config("conf/w.toml", {}, {}).periodic
    assert periodic is not None and len(periodic.tasks) == 2
    assert load_config(str(config_path), {}, {}).periodic == periodic


def test_extra_keys_in_cron_yaml_are_ignored_as_aws_sqsd_does() -> None:
    tasks = parse_cron_document(
        {"version": 1, "cron": [{"name": "a", "url": "/a", "schedule": "* * * * *", "description": "x"}]}, "c.yaml")
    assert tasks == (PeriodicTask(name="a", url="/a", schedule="* * * * *"),)


@pytest.mark.parametrize(("cron", "key_and_problem"), [
    ("version: 1\ncron:\n - {name: a, url: /a, schedule: '0 25 * * *'}\n",
     'cron[0].schedule: is not a valid crontab schedule (got "0 25 * * *")'),
    ("version: 1\ncron:\n - {name: a, url: /a, schedule: '* * * * *'}\n - {name: b, url: /b, schedule: '*/5 * * * * *'}\n",
     "cron[1].schedule: must be a crontab schedule of 5 fields: minute hour day-of-month month day-of-week"
     ' (got "*/5 * * * * *")'),
    ("version: 1\ncron:\n - {name: a, url: /a, schedule: '0 0 31 2 *'}\n",
     'cron[0].schedule: never matches a date (got "0 0 31 2 *")'),
    ("version: 1\ncron:\n - {name: a, url: /a, schedule: '@reboot'}\n",
     'cron[0].schedule: must be a crontab schedule of 5 fields: minute hour day-of-month month day-of-week'
     ' (got "@reboot")'),
    ("version: 1\ncron:\n - {name: a, url: /a, schedule: '* * * * *'}\n - {name: a, url: /b, schedule: '@daily'}\n",
     'cron[1].name: duplicate task name (names must be unique) (got "a")'),
    ("version: 1\ncron:\n - {name: a, schedule: '* * * * *'}\n", "cron[0].url: is required"),
    ("version: 1\ncron:\n - {name: a, url: 'http://evil/x', schedule: '* * * * *'}\n",
     'cron[0].url: must be a path on the local app, such as /backup (got "http://evil/x")'),
    ("version: 1\ncron:\n - {name: 7, url: /a, schedule: '* * * * *'}\n",
     "cron[0].name: must be a non-empty string (got 7)"),
    ("version: 1\ncron:\n - just a string\n", 'cron[0]: must be a table (got "just a string")'),
    ("version: 1\ncron: nightly\n", 'cron: must be a list of tables (got "nightly")'),
    ("version: 1\n", "cron: is required: a list of tasks with name, url and schedule"),
    ("cron: []\n", "version: is required"),
    ("version: 2\ncron: []\n", "version: must be 1 (the only cron.yaml version) (got 2)"),
    ("version: '1'\ncron: []\n", 'version: must be 1 (the only cron.yaml version) (got "1")'),
    ("- a\n- b\n", "(top level): must be a table (got a list)"),
    ("", "is empty: expected version: 1 and a cron: list"),
])
def test_cron_yaml_errors_name_the_file_and_key(tmp_path: Path, cron: str, key_and_problem: str) -> None:
    line = error_of(tmp_path, '[periodic]\nfile = "cron.yaml"\nqueue = "jobs"\n', cron)
    assert line == f"{tmp_path / 'cron.yaml'}: {key_and_problem}"


def test_invalid_yaml_is_one_line(tmp_path: Path) -> None:
    line = error_of(tmp_path, '[periodic]\nfile = "cron.yaml"\nqueue = "jobs"\n',
                    "version: 1\ncron:\n - name: a\n   schedule: */5 * * * *\n")
    assert line.startswith(f"{tmp_path / 'cron.yaml'}: invalid YAML: ")
    assert "\n" not in line and "line 4" in line


def test_missing_cron_file(tmp_path: Path) -> None:
    line = error_of(tmp_path, '[periodic]\nfile = "nope.yaml"\nqueue = "jobs"\n')
    assert line == (f"{tmp_path / 'workerless.toml'}: periodic.file: file not found: {tmp_path / 'nope.yaml'}"
                    ' (got "nope.yaml")')


@pytest.mark.parametrize(("periodic", "key_and_problem"), [
    ('[periodic]\nfile = "cron.yaml"\nqueue = "other"\n',
     'periodic.queue: must name one of the [[queues]] (got "other")'),
    ('[periodic]\nfile = "cron.yaml"\n', "periodic.queue: is required"),
    ('[periodic]\nqueue = "jobs"\n', "periodic.file: is required: name a cron.yaml or add [[periodic.tasks]]"),
    ('[periodic]\nfile = "cron.yaml"\nqueue = "jobs"\nclaims_table = "a b"\n',
     'periodic.claims_table: must be 3-255 letters, digits, _ - or . (a DynamoDB table name) (got "a b")'),
    ('[periodic]\nfile = "cron.yaml"\nqueue = "jobs"\nclaim_table = "t-1"\n', "periodic.claim_table: unknown key"),
    ('[periodic]\nqueue = "jobs"\n[[periodic.tasks]]\nname = "a"\nurl = "/a"\nschedule = "* * * * *"\nwhen = 1\n',
     "periodic.tasks[0].when: unknown key"),
    ('[periodic]\nqueue = "jobs"\n[[periodic.tasks]]\nname = "a"\nurl = "/a"\nschedule = "61 * * * *"\n',
     'periodic.tasks[0].schedule: is not a valid crontab schedule (got "61 * * * *")'),
    ('[periodic]\nfile = "cron.yaml"\nqueue = "jobs"\n[[periodic.tasks]]\nname = "audit"\nurl = "/a"\n'
     'schedule = "* * * * *"\n', 'periodic.tasks[0].name: duplicate task name (names must be unique) (got "audit")'),
])
def test_periodic_table_errors(tmp_path: Path, periodic: str, key_and_problem: str) -> None:
    line = error_of(tmp_path, periodic, BEANSTALK_EXAMPLE)
    assert line == f"{tmp_path / 'workerless.toml'}: {key_and_problem}"


def test_periodic_must_be_a_table(tmp_path: Path) -> None:
    config_path = write(tmp_path / "w.toml", 'periodic = "cron.yaml"\n' + BASE)
    with pytest.raises(ConfigError) as caught:
        load_config(str(config_path), {}, {})
    assert caught.value.line() == f'{config_path}: periodic: must be a table (got "cron.yaml")'


@pytest.mark.parametrize("schedule", ["* * * * *", "0 */12 * * *", "0 23 * * MON-FRI", "*/5 1-3 1,15 * 0", "@daily"])
def test_standard_schedules_are_accepted(schedule: str) -> None:
    assert schedule_problem(schedule) is None
