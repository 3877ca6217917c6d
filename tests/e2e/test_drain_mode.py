"""`--drain` and `--max-messages`: exit 0 once the work is done, with a one-line summary."""

from __future__ import annotations

import re
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import gevent

from tests.e2e.helpers import send_batch
from tests.support import Daemon, Queue, RecordedRequest, build_config_file, count_messages, drain_bodies
from tests.support.faults import FaultyApp, Reply, faulty_app_fixture  # noqa: F401 (fixture)

SUMMARY = re.compile(r"workerless stopped: delivered=(\d+) failed=(\d+) received=(\d+) seconds=(\d+\.\d) released=\d+$", re.MULTILINE)


def config_for(tmp_path: Path, app: FaultyApp, queues: list[Queue], concurrency: int = 4,
               **queue_keys: Any) -> Path:
    return build_config_file(tmp_path, concurrency=concurrency, shutdown_timeout=10,
                             queues=[{"name": queue.name, **queue_keys} for queue in queues],
                             targets={"default": {"type": "http", "url": f"{app.url}/work"}})


def summary(proc: Daemon) -> tuple[int, int, int, float]:
    lines = SUMMARY.findall(proc.output())
    assert len(lines) == 1, proc.output()[-2000:]
    delivered, failed, received, seconds = lines[0]
    return int(delivered), int(failed), int(received), float(seconds)


def test_drain_exits_0_once_every_queue_is_empty_and_nothing_is_in_flight(
    daemon: Callable[..., Daemon], tmp_path: Path, aws_env: dict[str, str], faulty_app: FaultyApp,
    sqs: Any, make_queue: Callable[..., Queue],
) -> None:
    queues = [make_queue(), make_queue()]
    sent = {queue.name: [f"{queue.name}-{i}" for i in range(12)] for queue in queues}
    for queue in queues:
        send_batch(sqs, queue.url, sent[queue.name])

    def respond(request: RecordedRequest) -> Reply:
        # the last one is still running long after both queues came back empty
        gevent.sleep(4 if request.body == sent[queues[1].name][-1].encode() else 0.05)
        return 200, {}, b""

    faulty_app.respond = respond
    started = time.monotonic()
    proc = daemon(["-c", str(config_for(tmp_path, faulty_app, queues)), "--drain"], env=aws_env)
    assert proc.wait_exit(timeout=60) == 0
    took = time.monotonic() - started
    expected = sorted(body.encode() for bodies in sent.values() for body in bodies)
    assert sorted(faulty_app.succeeded_bodies()) == expected  # including the slow one it waited for
    assert len(faulty_app.requests) == 24
    for queue in queues:
        assert count_messages(sqs, queue.url) == 0
    delivered, failed, received, seconds = summary(proc)
    assert (delivered, failed, received) == (24, 0, 24)
    assert 4 <= seconds <= took
    assert "drained: every queue is empty" in proc.output()


def test_drain_leaves_failed_messages_in_the_queue_and_counts_them(
    daemon: Callable[..., Daemon], tmp_path: Path, aws_env: dict[str, str], faulty_app: FaultyApp,
    sqs: Any, make_queue: Callable[..., Queue],
) -> None:
    queue = make_queue()
    send_batch(sqs, queue.url, ["ok-1", "ok-2", "bad", "ok-3"])
    faulty_app.respond = lambda request: (500, {}, b"") if request.body == b"bad" else (200, {}, b"")
    config = config_for(tmp_path, faulty_app, [queue], error_visibility_timeout=600)
    proc = daemon(["-c", str(config), "--drain"], env=aws_env)
    assert proc.wait_exit(timeout=60) == 0
    assert sorted(faulty_app.succeeded_bodies()) == [b"ok-1", b"ok-2", b"ok-3"]
    assert [r.body for r in faulty_app.requests if r.body == b"bad"] == [b"bad"]
    # the failed one is kept (invisible for its error visibility timeout), never deleted
    assert count_messages(sqs, queue.url) == 1
    assert drain_bodies(sqs, queue.url) == []
    delivered, failed, received, _ = summary(proc)
    assert (delivered, failed, received) == (3, 1, 4)


def test_drain_on_empty_queues_exits_after_one_long_poll(
    daemon: Callable[..., Daemon], tmp_path: Path, aws_env: dict[str, str], faulty_app: FaultyApp,
    make_queue: Callable[..., Queue],
) -> None:
    queues = [make_queue(), make_queue(), make_queue()]
    started = time.monotonic()
    proc = daemon(["-c", str(config_for(tmp_path, faulty_app, queues)), "--drain"], env=aws_env)
    assert proc.wait_exit(timeout=30) == 0
    assert time.monotonic() - started < 15  # poll_for is 1 s
    assert summary(proc)[:3] == (0, 0, 0)
    assert faulty_app.requests == []


def test_max_messages_exits_after_that_many_deliveries_and_releases_the_rest(
    daemon: Callable[..., Daemon], tmp_path: Path, aws_env: dict[str, str], faulty_app: FaultyApp,
    sqs: Any, make_queue: Callable[..., Queue],
) -> None:
    queue = make_queue()
    sent = [f"m{i}" for i in range(10)]
    send_batch(sqs, queue.url, sent)  # one receive buffers all ten
    faulty_app.delay = 0.2
    config = config_for(tmp_path, faulty_app, [queue], concurrency=3, visibility_timeout=600)
    proc = daemon(["-c", str(config), "--max-messages=4"], env=aws_env)
    assert proc.wait_exit(timeout=60) == 0
    delivered = faulty_app.succeeded_bodies()
    assert len(delivered) == 4 and len(faulty_app.requests) == 4
    assert summary(proc)[:2] == (4, 0)
    assert "--max-messages=4 reached" in proc.output()
    # the other six were released at stop: visible at once although their visibility timeout is 600 s
    assert count_messages(sqs, queue.url) == 6
    left = drain_bodies(sqs, queue.url)
    assert sorted(left) == sorted(set(sent) - {body.decode() for body in delivered})
    assert count_messages(sqs, queue.url) == 0


def test_max_messages_with_drain_stops_at_whichever_comes_first(
    daemon: Callable[..., Daemon], tmp_path: Path, aws_env: dict[str, str], faulty_app: FaultyApp,
    sqs: Any, make_queue: Callable[..., Queue],
) -> None:
    queue = make_queue()
    send_batch(sqs, queue.url, ["only-1", "only-2"])
    proc = daemon(["-c", str(config_for(tmp_path, faulty_app, [queue])), "--drain", "--max-messages=5"],
                  env=aws_env)
    assert proc.wait_exit(timeout=30) == 0
    assert sorted(faulty_app.succeeded_bodies()) == [b"only-1", b"only-2"]
    assert count_messages(sqs, queue.url) == 0
    assert summary(proc)[:3] == (2, 0, 2)
