"""Failure table, SQS side: the real daemon against moto behind a proxy that breaks on cue.

Each test asserts no hot loop (every receive loop waits at least 1 s between failures, within
its jittered cap), recovery without a restart, and the exact final state: the queue empty and
each body answered 2xx by the app the expected number of times.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from itertools import pairwise
from pathlib import Path
from typing import Any

import gevent.event
import pytest

from tests.support import Daemon, Queue, build_config_file, count_messages, status_url, wait_until
from tests.support.faults import (  # noqa: F401 (fixtures)
    INTERNAL_ERROR,
    SERVICE_UNAVAILABLE,
    SIGNATURE_MISMATCH,
    THROTTLED,
    FaultyApp,
    FaultySqs,
    Reply,
    backoffs,
    faulty_app_fixture,
    faulty_sqs_fixture,
    metric_total,
    sqs_env_fixture,
)
from workerless_gevent.delivery.watchers import MAX_BACKOFF_SECONDS

FAILURES_BEFORE_HEALING = 4  # the 4th back-off waits at most 10 s, so recovery stays quick


def start_daemon(daemon: Callable[..., Daemon], tmp_path: Path, env: dict[str, str], app: FaultyApp,
                 queue: Queue, *others: Queue, **queue_keys: Any) -> Daemon:
    config = build_config_file(tmp_path, concurrency=4, shutdown_timeout=5,
                               queues=[{"name": q.name, "error_visibility_timeout": 1, **queue_keys}
                                       for q in (queue, *others)],
                               targets={"default": {"type": "http", "url": f"{app.url}/work"}})
    proc = daemon(["-c", str(config), "--log-level=DEBUG", "--status=127.0.0.1:0"], env=env)
    proc.wait_for_output("workerless started", timeout=60)
    return proc


def deliver_one(sqs: Any, queue: Queue, app: FaultyApp, body: str, timeout: float = 30) -> None:
    """Send `body` straight to moto and wait until the app answered it 2xx and it is deleted."""
    sqs.send_message(QueueUrl=queue.url, MessageBody=body)
    wait_until(lambda: body.encode() in app.succeeded_bodies(), timeout,
               message=lambda: f"{body!r} not delivered; app saw {[r.body for r in app.requests]}")
    wait_until(lambda: count_messages(sqs, queue.url) == 0, 15, message=f"{body!r} not deleted")


def assert_jittered_backoff(proc: Daemon, queue: Queue, at_least: int) -> list[Any]:
    """The receive loop waited between 1 s and its cap after each failure, and the log shows it."""
    def logged() -> list[Any] | None:
        found = backoffs(proc.output(), queue.name)
        return found if len(found) >= at_least else None

    seen = wait_until(logged, 60, message=lambda: f"fewer than {at_least} back-offs logged:\n{proc.output()[-3000:]}")
    for backoff in seen:
        cap = min(MAX_BACKOFF_SECONDS, 2.0 ** min(backoff.failures, 5))
        assert 1.0 <= backoff.seconds <= cap + 0.05, backoff
    # consecutive failures are at least the chosen wait apart: no hot loop, whatever botocore does
    for earlier, later in pairwise(seen):
        assert later.at - earlier.at >= earlier.seconds - 0.05, (earlier, later)
    assert [b.failures for b in seen] == list(range(1, len(seen) + 1))
    return seen


def check_error_fault(daemon: Callable[..., Daemon], tmp_path: Path, env: dict[str, str], app: FaultyApp,
                      proxy: FaultySqs, sqs: Any, queue: Queue, reply: Reply, http_attempts_per_call: int) -> Daemon:
    """Answer every SQS call with `reply` for a while, then heal; the daemon must recover on its own."""
    proc = start_daemon(daemon, tmp_path, env, app, queue)
    deliver_one(sqs, queue, app, "before")
    faulted_at = time.monotonic()
    proxy.fail(reply)
    seen = assert_jittered_backoff(proc, queue, FAILURES_BEFORE_HEALING)
    # each failed receive is one botocore call of at most `http_attempts_per_call` HTTP attempts
    calls = len(backoffs(proc.output(), queue.name)) + 1  # + the one in progress
    assert proxy.faulted_count("ReceiveMessage", since=faulted_at) <= calls * http_attempts_per_call
    sqs.send_message(QueueUrl=queue.url, MessageBody="during")
    proxy.heal()
    healed_at = time.monotonic()
    wait_until(lambda: b"during" in app.succeeded_bodies(), 45,
               message=lambda: f"no recovery after healing:\n{proc.output()[-3000:]}")
    print(f"{reply[0]} {queue.name}: {len(seen)} back-offs "
          f"{[round(b.seconds, 1) for b in seen]}, recovered {time.monotonic() - healed_at:.1f}s after healing")
    proc.wait_for_output("receiving again after", timeout=10)
    deliver_one(sqs, queue, app, "after")
    assert proc.alive()
    assert proc.stop(timeout=30) == 0
    assert count_messages(sqs, queue.url) == 0
    assert sorted(app.succeeded_bodies()) == [b"after", b"before", b"during"]
    return proc


@pytest.mark.slow
def test_sqs_refusing_connections_is_backed_off_and_recovered_from_without_restart(
    daemon: Callable[..., Daemon], tmp_path: Path, sqs_env: dict[str, str], faulty_app: FaultyApp,
    faulty_sqs: FaultySqs, sqs: Any, make_queue: Callable[..., Queue],
) -> None:
    queue, other = make_queue(), make_queue()
    proc = start_daemon(daemon, tmp_path, sqs_env, faulty_app, queue, other)
    deliver_one(sqs, queue, faulty_app, "before")
    faulty_sqs.down()  # the watchers' long polls are cut, then every connection is refused
    went_down = time.monotonic()
    # each receive loop backs off on its own schedule, its first failure a warning, then quiet
    for each in (queue, other):
        seen = assert_jittered_backoff(proc, each, FAILURES_BEFORE_HEALING)
        assert seen[0].level == "WARNING" and all(b.level == "DEBUG" for b in seen[1:])
    assert faulty_sqs.count(since=went_down + 0.5) == 0  # nothing got through while it was down
    sqs.send_message(QueueUrl=queue.url, MessageBody="during")
    sqs.send_message(QueueUrl=other.url, MessageBody="during, other queue")
    faulty_sqs.up()
    wait_until(lambda: {b"during", b"during, other queue"} <= set(faulty_app.succeeded_bodies()), 45,
               message=lambda: f"no recovery:\n{proc.output()[-3000:]}")
    proc.wait_for_output("receiving again after", timeout=10)
    deliver_one(sqs, queue, faulty_app, "after")
    assert proc.stop(timeout=30) == 0
    assert count_messages(sqs, queue.url) == 0 and count_messages(sqs, other.url) == 0
    assert sorted(faulty_app.succeeded_bodies()) == [b"after", b"before", b"during", b"during, other queue"]
    assert len(faulty_app.requests) == 4


@pytest.mark.slow
@pytest.mark.parametrize("reply", [INTERNAL_ERROR, SERVICE_UNAVAILABLE], ids=["500", "503"])
def test_sqs_answering_5xx_is_backed_off_and_recovered_from(
    reply: Reply, daemon: Callable[..., Daemon], tmp_path: Path, sqs_env: dict[str, str],
    faulty_app: FaultyApp, faulty_sqs: FaultySqs, sqs: Any, make_queue: Callable[..., Queue],
) -> None:
    proc = check_error_fault(daemon, tmp_path, sqs_env, faulty_app, faulty_sqs, sqs, make_queue(), reply,
                             http_attempts_per_call=3)
    assert len(faulty_app.requests) == 3
    assert "receive refused" not in proc.output()


@pytest.mark.slow
def test_sqs_throttling_is_backed_off_and_recovered_from(
    daemon: Callable[..., Daemon], tmp_path: Path, sqs_env: dict[str, str], faulty_app: FaultyApp,
    faulty_sqs: FaultySqs, sqs: Any, make_queue: Callable[..., Queue],
) -> None:
    proc = check_error_fault(daemon, tmp_path, sqs_env, faulty_app, faulty_sqs, sqs, make_queue(), THROTTLED,
                             http_attempts_per_call=3)
    assert "RequestThrottled" in proc.output()
    assert len(faulty_app.requests) == 3


@pytest.mark.slow
def test_signature_error_403_is_logged_loudly_once_and_backed_off(
    daemon: Callable[..., Daemon], tmp_path: Path, sqs_env: dict[str, str], faulty_app: FaultyApp,
    faulty_sqs: FaultySqs, sqs: Any, make_queue: Callable[..., Queue],
) -> None:
    queue = make_queue()
    # botocore does not retry a 403: one HTTP request per failed receive
    proc = check_error_fault(daemon, tmp_path, sqs_env, faulty_app, faulty_sqs, sqs, queue, SIGNATURE_MISMATCH,
                             http_attempts_per_call=1)
    loud = [line for line in proc.output().splitlines() if " ERROR " in line and "receive refused" in line]
    assert len(loud) == 1, loud
    assert "SignatureDoesNotMatch" in loud[0] and "clock" in loud[0] and f"queue={queue.name}" in loud[0]
    later = backoffs(proc.output(), queue.name)[1:]
    assert later and all(b.level == "DEBUG" for b in later)


def test_sqs_restarting_mid_delivery_loses_nothing_and_needs_no_restart(
    daemon: Callable[..., Daemon], tmp_path: Path, sqs_env: dict[str, str], faulty_app: FaultyApp,
    faulty_sqs: FaultySqs, sqs: Any, make_queue: Callable[..., Queue],
) -> None:
    queue = make_queue()
    hold = gevent.event.Event()

    def respond(request: Any) -> Reply:
        if request.body == b"in flight":
            hold.wait(30)
        return 200, {}, b""

    faulty_app.respond = respond
    proc = start_daemon(daemon, tmp_path, sqs_env, faulty_app, queue)
    sqs.send_message(QueueUrl=queue.url, MessageBody="in flight")
    faulty_app.wait_for_requests(1, timeout=30)
    # The endpoint goes away (long polls cut, connections refused) and comes back while the
    # delivery runs; meanwhile a message arrives.
    faulty_sqs.down()
    sqs.send_message(QueueUrl=queue.url, MessageBody="sent while down")
    wait_until(lambda: backoffs(proc.output(), queue.name), 30, message="the cut long poll was not noticed")
    faulty_sqs.up()
    hold.set()  # the delivery ends after the restart: its delete must go through
    wait_until(lambda: count_messages(sqs, queue.url) == 0 and len(faulty_app.succeeded_bodies()) == 2, 45,
               message=lambda: f"not recovered:\n{proc.output()[-3000:]}")
    assert proc.alive()
    assert proc.stop(timeout=30) == 0
    assert count_messages(sqs, queue.url) == 0
    assert sorted(faulty_app.succeeded_bodies()) == [b"in flight", b"sent while down"]
    assert len(faulty_app.requests) == 2  # nothing delivered twice


def test_stale_receipt_handle_on_delete_is_counted_not_fatal(
    daemon: Callable[..., Daemon], tmp_path: Path, sqs_env: dict[str, str], faulty_app: FaultyApp,
    faulty_sqs: FaultySqs, sqs: Any, make_queue: Callable[..., Queue],
) -> None:
    queue = make_queue()
    proc = start_daemon(daemon, tmp_path, sqs_env, faulty_app, queue, visibility_timeout=2)
    url = status_url(proc)
    handles = faulty_sqs.corrupt_receipts("DeleteMessageBatch", times=1)
    sqs.send_message(QueueUrl=queue.url, MessageBody="twice")
    # The delete is refused (ReceiptHandleIsInvalid); the message comes back after its
    # visibility timeout and is delivered and deleted again: at least once, never lost.
    wait_until(lambda: len(faulty_app.succeeded_bodies()) == 2, 30,
               message=lambda: f"not redelivered:\n{proc.output()[-3000:]}")
    wait_until(lambda: count_messages(sqs, queue.url) == 0, 15, message="not deleted the second time")
    assert len(handles) == 1
    assert "stale receipt handle (ReceiptHandleIsInvalid; message=" in proc.output()
    assert handles[0] not in proc.output() and "garbage-" not in proc.output()  # receipt handles never logged
    assert metric_total(url, "workerless_stale_receipts_total") == 1
    assert metric_total(url, "workerless_delete_failed_total") == 0  # a stale receipt is not a failed delete
    assert faulty_sqs.actions()["DeleteMessageBatch"] == 2  # counted, not retried
    assert proc.alive()
    assert proc.stop(timeout=30) == 0
    assert count_messages(sqs, queue.url) == 0
    assert faulty_app.succeeded_bodies() == [b"twice", b"twice"]
    assert [r.headers["x-aws-sqsd-receive-count"] for r in faulty_app.requests] == ["1", "2"]
