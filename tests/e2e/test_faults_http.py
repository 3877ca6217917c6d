"""Failure table, HTTP target side: an app that is down, slow, trickling, or answers 3xx/4xx/5xx/429.

A failed delivery is never deleted: it comes back after `error_visibility_timeout` and is
delivered again. Each test ends with the queue empty and each body answered 2xx exactly once.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import gevent
import pytest

from tests.e2e.helpers import send_batch
from tests.support import Daemon, Queue, RecordedRequest, build_config_file, count_messages, wait_until
from tests.support.faults import Answer, FaultyApp, Reply, Trickle, faulty_app_fixture  # noqa: F401
from tests.support.tcp_proxy import TcpProxy


def start_daemon(daemon: Callable[..., Daemon], tmp_path: Path, env: dict[str, str], url: str, queue: Queue,
                 concurrency: int = 4, **target_keys: Any) -> Daemon:
    config = build_config_file(tmp_path, concurrency=concurrency, shutdown_timeout=5,
                               queues=[{"name": queue.name, "error_visibility_timeout": 1}],
                               targets={"default": {"type": "http", "url": url, **target_keys}})
    proc = daemon(["-c", str(config)], env=env)
    proc.wait_for_output("workerless started", timeout=60)
    return proc


def failure_lines(proc: Daemon) -> list[str]:
    return [line for line in proc.output().splitlines() if "outcome=failure" in line]


def finish(proc: Daemon, sqs: Any, queue: Queue, app: FaultyApp, expected: list[bytes]) -> None:
    """Everything expected was answered 2xx once, the queue is empty, and the daemon stops cleanly."""
    wait_until(lambda: sorted(app.succeeded_bodies()) == sorted(expected), 45,
               message=lambda: f"2xx bodies {app.succeeded_bodies()}; log:\n{proc.output()[-3000:]}")
    wait_until(lambda: count_messages(sqs, queue.url) == 0, 15, message="not all deleted")
    assert proc.stop(timeout=30) == 0
    assert count_messages(sqs, queue.url) == 0
    assert sorted(app.succeeded_bodies()) == sorted(expected)


def first_attempt_gets(answer: Answer | Reply, body: bytes = b"flaky") -> Callable[[RecordedRequest], Any]:
    """`answer` for the first delivery of `body`, 200 for everything else."""
    attempts: list[int] = []

    def respond(request: RecordedRequest) -> Any:
        if request.body == body and not attempts:
            attempts.append(1)
            return answer
        return 200, {}, b"ok"

    return respond


def test_target_down_fails_without_hot_loop_and_delivers_once_it_is_up(
    daemon: Callable[..., Daemon], tmp_path: Path, aws_env: dict[str, str], faulty_app: FaultyApp,
    sqs: Any, make_queue: Callable[..., Queue],
) -> None:
    queue = make_queue()
    door = TcpProxy(faulty_app.url)  # not started: its port refuses connections
    proc = start_daemon(daemon, tmp_path, aws_env, f"{door.url}/work", queue)
    sqs.send_message(QueueUrl=queue.url, MessageBody="waits for the app")
    sent = time.monotonic()
    wait_until(lambda: len(failure_lines(proc)) >= 3, 30, message=lambda: proc.output()[-3000:])
    elapsed = time.monotonic() - sent
    failures = failure_lines(proc)
    assert "ConnectionRefused" in failures[0]
    # one attempt per error_visibility_timeout (1 s), not a loop
    assert len(failures) <= elapsed / 1.0 + 1, (len(failures), elapsed)
    counts = [int(m) for m in re.findall(r"receive_count=(\d+)", "\n".join(failures))]
    assert counts == list(range(1, len(counts) + 1))
    door.start()
    try:
        finish(proc, sqs, queue, faulty_app, [b"waits for the app"])
    finally:
        door.close()
    assert len(faulty_app.requests) == 1


def test_slow_app_beyond_inactivity_timeout_is_a_failure_then_retried(
    daemon: Callable[..., Daemon], tmp_path: Path, aws_env: dict[str, str], faulty_app: FaultyApp,
    sqs: Any, make_queue: Callable[..., Queue],
) -> None:
    queue = make_queue()

    def respond(request: RecordedRequest) -> Reply:
        if request.headers["x-aws-sqsd-receive-count"] == "1":
            gevent.sleep(4)  # silent for longer than inactivity_timeout
            return 500, {}, b"too late anyway"
        return 200, {}, b""

    faulty_app.respond = respond
    proc = start_daemon(daemon, tmp_path, aws_env, f"{faulty_app.url}/work", queue,
                        connect_timeout=1, inactivity_timeout=1)
    send_batch(sqs, queue.url, ["slow", "also slow"])
    finish(proc, sqs, queue, faulty_app, [b"slow", b"also slow"])
    failures = failure_lines(proc)
    assert len(failures) == 2 and all("type=TimeoutError" in line for line in failures), failures
    first, second = {}, {}
    for request in faulty_app.requests:
        (second if request.body in first else first)[request.body] = request.arrived
    # the daemon gave up after ~1 s of silence, not after the app's 4 s
    for body, arrived in first.items():
        assert second[body] - arrived < 3.9, (body, second[body] - arrived)
    assert len(faulty_app.requests) == 4


def test_trickling_app_is_cut_by_the_hard_deadline(
    daemon: Callable[..., Daemon], tmp_path: Path, aws_env: dict[str, str], faulty_app: FaultyApp,
    sqs: Any, make_queue: Callable[..., Queue],
) -> None:
    queue = make_queue()
    trickle = Trickle(length=200, interval=0.25)  # 50 s, a byte every 0.25 s: never idle for 1 s
    faulty_app.respond = first_attempt_gets(Answer(200, {"Content-Type": "text/plain"}, trickle))
    proc = start_daemon(daemon, tmp_path, aws_env, f"{faulty_app.url}/work", queue,
                        connect_timeout=1, inactivity_timeout=2, max_connections=1)
    sqs.send_message(QueueUrl=queue.url, MessageBody="flaky")
    # max_connections=1: the retry must reuse the pool, so a cut connection must not linger in it
    finish(proc, sqs, queue, faulty_app, [b"flaky"])
    assert not trickle.completed and trickle.ended is not None
    assert trickle.ended - trickle.started < 6, trickle  # hard deadline: connect 1 + inactivity 2 = 3 s
    assert 0 < trickle.sent < 40
    (failure,) = failure_lines(proc)
    assert "type=Timeout" in failure
    assert len(faulty_app.requests) == 2


def check_status_then_success(status: int, headers: dict[str, str], daemon: Callable[..., Daemon], tmp_path: Path,
                              env: dict[str, str], app: FaultyApp, sqs: Any, queue: Queue, **target_keys: Any) -> Daemon:
    app.respond = first_attempt_gets((status, headers, b"no"))
    proc = start_daemon(daemon, tmp_path, env, f"{app.url}/work", queue, **target_keys)
    send_batch(sqs, queue.url, ["flaky", "fine"])
    finish(proc, sqs, queue, app, [b"flaky", b"fine"])
    (failure,) = failure_lines(proc)
    assert f"type=HTTP {status}" in failure
    flaky = [r for r in app.requests if r.body == b"flaky"]
    assert [r.headers["x-aws-sqsd-receive-count"] for r in flaky] == ["1", "2"]
    assert [r.path for r in app.requests] == ["/work"] * 3
    return proc


@pytest.mark.parametrize("status", [301, 302, 303, 307, 308])
def test_app_answering_3xx_is_a_failure_and_the_redirect_is_not_followed(
    status: int, daemon: Callable[..., Daemon], tmp_path: Path, aws_env: dict[str, str],
    faulty_app: FaultyApp, sqs: Any, make_queue: Callable[..., Queue],
) -> None:
    check_status_then_success(status, {"Location": f"{faulty_app.url}/elsewhere"}, daemon, tmp_path, aws_env,
                              faulty_app, sqs, make_queue())


@pytest.mark.parametrize("status", [400, 401, 404, 409, 413])
def test_app_answering_4xx_is_a_failure_then_retried(
    status: int, daemon: Callable[..., Daemon], tmp_path: Path, aws_env: dict[str, str],
    faulty_app: FaultyApp, sqs: Any, make_queue: Callable[..., Queue],
) -> None:
    check_status_then_success(status, {}, daemon, tmp_path, aws_env, faulty_app, sqs, make_queue())


@pytest.mark.parametrize("status", [500, 502, 503, 504])
def test_app_answering_5xx_is_a_failure_then_retried(
    status: int, daemon: Callable[..., Daemon], tmp_path: Path, aws_env: dict[str, str],
    faulty_app: FaultyApp, sqs: Any, make_queue: Callable[..., Queue],
) -> None:
    # 503 without Retry-After is a plain failure under overload = "failure" (under the default it is an overload)
    check_status_then_success(status, {}, daemon, tmp_path, aws_env, faulty_app, sqs, make_queue(),
                              overload="failure")


@pytest.mark.parametrize("status", [429, 503])
def test_busy_without_retry_after_is_an_overload_retried_without_a_failure(
    status: int, daemon: Callable[..., Daemon], tmp_path: Path, aws_env: dict[str, str],
    faulty_app: FaultyApp, sqs: Any, make_queue: Callable[..., Queue],
) -> None:
    queue = make_queue()
    faulty_app.respond = first_attempt_gets((status, {}, b"busy"))
    proc = start_daemon(daemon, tmp_path, aws_env, f"{faulty_app.url}/work", queue)
    send_batch(sqs, queue.url, ["flaky", "fine"])
    finish(proc, sqs, queue, faulty_app, [b"flaky", b"fine"])
    assert failure_lines(proc) == []
    flaky = [r for r in faulty_app.requests if r.body == b"flaky"]
    assert [r.headers["x-aws-sqsd-receive-count"] for r in flaky] == ["1", "2"]
    assert f"is overloaded, slowing down; retrying in 1s (the app answered HTTP {status} without Retry-After)" \
        in proc.output()


@pytest.mark.parametrize("status", [429, 503])
def test_retry_after_pauses_the_target_and_retries_after_that_long(
    status: int, daemon: Callable[..., Daemon], tmp_path: Path, aws_env: dict[str, str],
    faulty_app: FaultyApp, sqs: Any, make_queue: Callable[..., Queue],
) -> None:
    queue = make_queue()
    pause = 3
    faulty_app.respond = first_attempt_gets((status, {"Retry-After": str(pause)}, b"busy"))
    proc = start_daemon(daemon, tmp_path, aws_env, f"{faulty_app.url}/work", queue, concurrency=1)
    sqs.send_message(QueueUrl=queue.url, MessageBody="flaky")
    (refused,) = faulty_app.wait_for_requests(1, timeout=30)
    send_batch(sqs, queue.url, ["next", "and next"])  # these must wait out the pause too
    finish(proc, sqs, queue, faulty_app, [b"flaky", b"next", b"and next"])
    later = faulty_app.requests[1:]
    assert len(later) == 3
    # nothing reached the app during the pause (ms of slack for the daemon reading the reply)
    assert min(r.arrived for r in later) - refused.arrived >= pause - 0.2, [r.arrived - refused.arrived for r in later]
    retried = next(r for r in later if r.body == b"flaky")
    assert retried.headers["x-aws-sqsd-receive-count"] == "2"
    assert "outcome=failure" not in proc.output()  # a retry request, not a failure
    assert f"asked to retry in {pause}s" in proc.output()
