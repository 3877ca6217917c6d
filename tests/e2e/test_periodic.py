"""Periodic tasks through the real bin/workerless: cron.yaml in, aws-sqsd cron POSTs out, config errors exit 2."""

from __future__ import annotations

import re
import signal
import subprocess
import sys
from collections import Counter
from collections.abc import Callable
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest

from tests.support.config_file import EVERY_MINUTE_CRON
from tests.support import (
    REPO_ROOT,
    Daemon,
    HttpApp,
    MotoServer,
    Queue,
    build_config_file,
    receive_all,
    wait_until,
)

ISO_MINUTE = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:00Z$")


def periodic_config(tmp_path: Path, queue: Queue, app: HttpApp, claims_table: str | None) -> Path:
    (tmp_path / "cron.yaml").write_text(EVERY_MINUTE_CRON)
    return build_config_file(tmp_path, concurrency=4, shutdown_timeout=5, queues=[{"name": queue.name}],
                             targets={"default": {"type": "http", "url": f"{app.url}/"}},
                             tables={"periodic": {"file": "cron.yaml", "queue": queue.name,
                                                  "claims_table": claims_table}})


def cron_requests(app: HttpApp) -> list[Any]:
    return [request for request in list(app.requests) if "x-aws-sqsd-taskname" in request.headers]


def minute_floor(moment: datetime) -> datetime:
    return moment.replace(second=0, microsecond=0)


def iso(moment: datetime) -> str:
    return moment.strftime("%Y-%m-%dT%H:%M:%SZ")


def test_a_cron_task_is_posted_to_its_url_with_the_sqsd_headers(
    daemon: Callable[..., Daemon], aws_env: dict[str, str], tmp_path: Path, http_app: HttpApp,
    make_queue: Callable[..., Queue], claims_table: str, moto_server: MotoServer,
) -> None:
    queue = make_queue()
    started = datetime.now(timezone.utc)
    proc = daemon(["-c", str(periodic_config(tmp_path, queue, http_app, claims_table))], env=aws_env)
    # With a claims table, the slot of the last minute (missed by < 5 minutes) is sent at start.
    wait_until(lambda: cron_requests(http_app), timeout=30, message=lambda: proc.output()[-3000:])
    request = cron_requests(http_app)[0]
    assert request.method == "POST" and request.path == "/cron/tick"
    assert request.body == b"elasticbeanstalk scheduled job"
    assert request.headers["x-aws-sqsd-taskname"] == "tick"
    assert request.headers["x-aws-sqsd-path"] == "/cron/tick"
    assert request.headers["user-agent"].startswith("aws-sqsd/")
    assert request.headers["x-aws-sqsd-queue"] == queue.name
    scheduled_at = request.headers["x-aws-sqsd-scheduled-at"]
    assert ISO_MINUTE.match(scheduled_at), scheduled_at
    assert scheduled_at in {iso(minute_floor(started)), iso(minute_floor(started) + timedelta(minutes=1))}
    assert f"slots claimed in DynamoDB table {claims_table}" in proc.output()
    claim = moto_server.client("dynamodb").get_item(TableName=claims_table, Key={"slot": {"S": f"tick@{scheduled_at}"}})
    assert claim["Item"]["task_name"]["S"] == "tick"
    assert proc.stop(timeout=20) == 0


@pytest.mark.parametrize(("cron", "expected"), [
    (EVERY_MINUTE_CRON.replace("* * * * *", "*/5 * * *"),
     'cron.yaml: cron[0].schedule: must be a crontab schedule of 5 fields: minute hour day-of-month month'
     ' day-of-week (got "*/5 * * *")'),
    ("version: 1\ncron:\n - name: a\n   url: /a\n   schedule: */5 * * * *\n", "cron.yaml: invalid YAML: "),
    (None, "workerless.toml: periodic.file: file not found: "),
])
def test_bad_cron_yaml_exits_2_with_one_line(
    aws_env: dict[str, str], tmp_path: Path, http_app: HttpApp, cron: str | None, expected: str,
) -> None:
    config = periodic_config(tmp_path, Queue(name="jobs", url="", arn=""), http_app, None)
    if cron is None:
        (tmp_path / "cron.yaml").unlink()
    else:
        (tmp_path / "cron.yaml").write_text(cron)
    done = subprocess.run([sys.executable, str(REPO_ROOT / "bin" / "workerless"), "-c", str(config)],
                          env=aws_env, capture_output=True, text=True, timeout=60, cwd=tmp_path)
    assert done.returncode == 2, done.stderr
    (line,) = done.stderr.splitlines()
    assert line.startswith(f"{tmp_path}/{expected}"), line


@pytest.mark.slow
def test_without_a_table_the_next_slot_is_sent_and_the_log_says_it_schedules_alone(
    daemon: Callable[..., Daemon], aws_env: dict[str, str], tmp_path: Path, http_app: HttpApp,
    make_queue: Callable[..., Queue],
) -> None:
    queue = make_queue()
    started = datetime.now(timezone.utc)
    proc = daemon(["-c", str(periodic_config(tmp_path, queue, http_app, None))], env=aws_env)
    assert "no claims_table, so this instance schedules alone" in proc.wait_for_output("periodic:", timeout=20)
    scheduling = datetime.now(timezone.utc)  # a slow start may cross a minute: then the slot after it is the next
    wait_until(lambda: cron_requests(http_app), timeout=75, message=lambda: proc.output()[-3000:])
    (request,) = cron_requests(http_app)
    next_slots = {iso(minute_floor(moment) + timedelta(minutes=1)) for moment in (started, scheduling)}
    assert request.headers["x-aws-sqsd-scheduled-at"] in next_slots
    assert request.path == "/cron/tick"
    assert proc.stop(timeout=20) == 0


@pytest.mark.slow
@pytest.mark.timeout(480)
def test_two_daemons_sharing_a_claims_table_deliver_each_slot_once(
    daemon: Callable[..., Daemon], aws_env: dict[str, str], tmp_path: Path, http_app: HttpApp,
    make_queue: Callable[..., Queue], claims_table: str, sqs: Any, moto_server: MotoServer,
) -> None:
    """Over 3+ minutes, with one daemon restarted midway: every minute's slot is POSTed exactly once."""
    queue = make_queue()
    config = periodic_config(tmp_path, queue, http_app, claims_table)
    first, second = (daemon(["-c", str(config)], env=aws_env) for _ in range(2))
    for proc in (first, second):
        proc.wait_for_output("periodic:", timeout=60)
    # Counted from when both schedule (a slow start may cross a minute; the slot before it is not theirs).
    started = datetime.now(timezone.utc)
    first_slot = minute_floor(started)
    end = first_slot + timedelta(minutes=4)  # at least three full minutes after the start
    expected = [iso(first_slot + timedelta(minutes=i)) for i in range(5)]

    def delivered() -> Counter[str]:
        return Counter(r.headers["x-aws-sqsd-scheduled-at"] for r in cron_requests(http_app))

    wait_until(lambda: expected[1] in delivered(), timeout=90, message=lambda: str(delivered()))
    second.send_signal(signal.SIGTERM)  # a deploy: stop, then start again; its catch-up must not resend
    assert second.wait_exit(timeout=20) == 0
    restarted = daemon(["-c", str(config)], env=aws_env)
    restarted.wait_for_output("periodic:", timeout=20)
    seconds_left = (end - datetime.now(timezone.utc)).total_seconds()
    wait_until(lambda: set(expected) <= set(delivered()), timeout=seconds_left + 30,
               message=lambda: f"expected {expected}, delivered {delivered()}")
    for proc in (first, restarted):
        assert proc.stop(timeout=20) == 0
    # Stopped: nothing more is sent, so a duplicate would now be delivered already or still in the queue.
    counts = delivered() + Counter(m["MessageAttributes"]["beanstalk.sqsd.scheduled_time"]["StringValue"]
                                   for m in receive_all(sqs, queue.url))
    assert all(counts[slot] == 1 for slot in expected), counts
    assert set(counts.values()) == {1}, counts
    claimed = [item["slot"]["S"] for item in moto_server.client("dynamodb").scan(TableName=claims_table)["Items"]]
    assert {f"tick@{slot}" for slot in expected} <= set(claimed)
    sent_by = [log.count(" sent to queue=") for log in (first.output(), second.output(), restarted.output())]
    print(f"two daemons: slots={len(expected)} deliveries={sum(counts.values())} counts={dict(counts)} "
          f"sent_by(first, second, restarted)={sent_by} claims={len(claimed)}")
