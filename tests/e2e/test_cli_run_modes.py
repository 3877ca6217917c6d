"""Run modes of the real CLI: --drain, --max-messages, and `check` with and without --online."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Callable

from tests.e2e.helpers import bodies_of, send_batch
from tests.support import REPO_ROOT, CountingProxy, Daemon, HttpApp, Queue, count_messages, write_config


def cli(args: list[str], env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, str(REPO_ROOT / "bin" / "workerless"), *args], env=env,
                          capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL)


def test_drain_exits_0_once_every_queue_is_empty(
    daemon: Callable[..., Daemon], aws_env: dict[str, str], http_app: HttpApp,
    sqs: Any, make_queue: Callable[..., Queue],
) -> None:
    first, second = make_queue(), make_queue()
    send_batch(sqs, first.url, ["a1", "a2", "a3"])
    send_batch(sqs, second.url, ["b1", "b2"])
    started = time.monotonic()
    proc = daemon([f"--queues={first.name},{second.name}", f"--http={http_app.url}/", "--drain",
                   "--poll-for=1", "--concurrency=3"], env=aws_env)
    assert proc.wait_exit(timeout=60) == 0
    print(f"--drain of 5 messages exited after {time.monotonic() - started:.1f}s")
    assert sorted(bodies_of(http_app)) == ["a1", "a2", "a3", "b1", "b2"]
    assert count_messages(sqs, first.url) == count_messages(sqs, second.url) == 0
    assert "drained" in proc.output()


def test_max_messages_stops_after_that_many_and_leaves_the_rest(
    daemon: Callable[..., Daemon], aws_env: dict[str, str], http_app: HttpApp,
    sqs: Any, make_queue: Callable[..., Queue],
) -> None:
    queue = make_queue()
    send_batch(sqs, queue.url, [f"m{i}" for i in range(8)])
    proc = daemon([f"--queues={queue.name}", f"--http={http_app.url}/", "--max-messages=3",
                   "--concurrency=1"], env=aws_env)
    assert proc.wait_exit(timeout=60) == 0
    assert len(http_app.requests) == 3
    assert count_messages(sqs, queue.url) == 5
    attrs = sqs.get_queue_attributes(QueueUrl=queue.url, AttributeNames=["ApproximateNumberOfMessages"])
    assert attrs["Attributes"]["ApproximateNumberOfMessages"] == "5"  # the buffer was released


def good_config(tmp_path: Path, queue_name: str) -> Path:
    return write_config(tmp_path, f"""
name = "check-app"
concurrency = 7

[[queues]]
name = "{queue_name}"
weight = 2

[targets.default]
type = "http"
url = "http://127.0.0.1:9/work"
""")


def test_check_prints_the_effective_config_without_contacting_aws(
    proxied_env: dict[str, str], counting_proxy: CountingProxy, tmp_path: Path,
) -> None:
    done = cli(["check", "-c", str(good_config(tmp_path, "no-such-queue")), "--concurrency=9"],
               {**proxied_env, "WORKERLESS_CONCURRENCY": "8"})
    assert done.returncode == 0, done.stderr
    effective = json.loads(done.stdout)
    assert effective["concurrency"] == 9  # flags beat the environment, which beats the file
    assert effective["name"] == "check-app"
    assert [q["name"] for q in effective["queues"]] == ["no-such-queue"]
    assert counting_proxy.requests == []


def test_check_warns_of_slots_that_would_wait_for_a_connection(
    proxied_env: dict[str, str], counting_proxy: CountingProxy, tmp_path: Path,
) -> None:
    config = good_config(tmp_path, "no-such-queue")
    done = cli(["check", "-c", str(config), "--concurrency=200"], proxied_env)
    assert done.returncode == 0, done.stderr
    warnings = [line for line in done.stderr.splitlines() if line.startswith("warning: target default:")]
    assert len(warnings) == 1 and "max_connections = 50 is below the 200 deliveries" in warnings[0], done.stderr
    done = cli(["check", "-c", str(config)], proxied_env)  # 50 slots, 50 connections: as Beanstalk pairs them
    assert done.returncode == 0 and "max_connections" not in done.stderr, done.stderr
    assert counting_proxy.requests == []


def test_check_online_resolves_queues(
    proxied_env: dict[str, str], counting_proxy: CountingProxy, tmp_path: Path,
    make_queue: Callable[..., Queue],
) -> None:
    queue = make_queue()
    done = cli(["check", "--online", "-c", str(good_config(tmp_path, queue.name))], proxied_env)
    assert done.returncode == 0, done.stderr
    assert counting_proxy.count("GetQueueUrl") == 1


def test_check_online_with_a_missing_queue_exits_1_with_one_line(
    proxied_env: dict[str, str], tmp_path: Path,
) -> None:
    done = cli(["check", "--online", "-c", str(good_config(tmp_path, "t-missing-queue"))], proxied_env)
    assert done.returncode == 1
    (line,) = done.stderr.splitlines()
    assert line.startswith("workerless: queue t-missing-queue: ") and "NonExistentQueue" in line, line


def test_daemon_with_a_missing_queue_exits_1_with_one_line(
    proxied_env: dict[str, str], tmp_path: Path,
) -> None:
    done = cli(["-c", str(good_config(tmp_path, "t-missing-queue"))], proxied_env)
    assert done.returncode == 1
    (line,) = done.stderr.splitlines()
    assert line.startswith("workerless: cannot start: queue t-missing-queue: "), line
