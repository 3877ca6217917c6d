"""Real signals to the real daemon: warm stop, cold stop, grace period, duplicate signals."""

from __future__ import annotations

import json
import signal
import time
import urllib.request
from pathlib import Path
from typing import Any, Callable

import pytest

from tests.e2e.helpers import send_batch
from tests.support import (
    CountingProxy,
    Daemon,
    HttpApp,
    Queue,
    build_config_file,
    count_messages,
    count_visible,
    drain_bodies,
    wait_until,
)
from tests.support.moto import free_port


def one_queue_config(tmp_path: Path, app: HttpApp, queue: Queue, shutdown_timeout: int) -> Path:
    return build_config_file(tmp_path, concurrency=1, shutdown_timeout=shutdown_timeout, polling={"poll_for": 20},
                             queues=[{"name": queue.name}],
                             targets={"default": {"type": "http", "url": f"{app.url}/work"}})


def start_with_one_in_flight(daemon: Callable[..., Daemon], env: dict[str, str], app: HttpApp,
                             sqs: Any, queue: Queue, tmp_path: Path, shutdown_timeout: int,
                             messages: int) -> tuple[Daemon, list[str]]:
    """Daemon at concurrency 1 with `messages` on its queue: one delivery running, the rest buffered."""
    bodies = [f"message-{i}" for i in range(messages)]
    send_batch(sqs, queue.url, bodies)
    proc = daemon(["-c", str(one_queue_config(tmp_path, app, queue, shutdown_timeout))], env=env)
    app.wait_for_requests(1, timeout=60)
    assert app.in_flight == 1
    return proc, bodies


def test_sigterm_finishes_the_delivery_in_flight_and_releases_the_buffer(
    daemon: Callable[..., Daemon], proxied_env: dict[str, str], counting_proxy: CountingProxy,
    http_app: HttpApp, sqs: Any, make_queue: Callable[..., Queue], tmp_path: Path,
) -> None:
    queue = make_queue()
    http_app.delay = 3
    proc, bodies = start_with_one_in_flight(daemon, proxied_env, http_app, sqs, queue, tmp_path,
                                            shutdown_timeout=10, messages=5)
    assert count_visible(sqs, queue.url) == 0  # one receive took all five: one delivering, four buffered
    signalled = time.monotonic()
    proc.send_signal(signal.SIGTERM)

    # the buffer is released with visibility 0 while the delivery is still running
    wait_until(lambda: count_visible(sqs, queue.url) == 4, 10,
               message=lambda: f"visible: {count_visible(sqs, queue.url)}")
    released_after = time.monotonic() - signalled
    assert http_app.in_flight == 1, "buffer released only after the delivery ended"
    assert proc.wait_exit(timeout=30) == 0
    exited_after = time.monotonic() - signalled
    print(f"buffer visible again {released_after * 1000:.0f} ms after SIGTERM; exit after {exited_after:.1f}s")
    assert exited_after < 10

    (delivered,) = http_app.requests
    assert counting_proxy.count("ReceiveMessage", since=signalled) == 0
    assert count_messages(sqs, queue.url) == 4  # the delivered message was deleted
    left = drain_bodies(sqs, queue.url)
    assert sorted(left + [delivered.body.decode()]) == bodies
    assert delivered.body.decode() not in left
    assert "delivered=1 failed=0" in proc.output()


def test_second_sigterm_stops_at_once_and_releases_the_delivery_in_flight(
    daemon: Callable[..., Daemon], aws_env: dict[str, str], http_app: HttpApp,
    sqs: Any, make_queue: Callable[..., Queue], tmp_path: Path,
) -> None:
    queue = make_queue()
    http_app.delay = 30
    proc, bodies = start_with_one_in_flight(daemon, aws_env, http_app, sqs, queue, tmp_path,
                                            shutdown_timeout=25, messages=1)
    first = time.monotonic()
    proc.send_signal(signal.SIGTERM)
    proc.wait_for_output("stopping (SIGTERM)", timeout=10)
    # a repeat within a second is taken as a duplicate (Heroku sends them); this one is not
    wait_until(lambda: time.monotonic() - first > 1.5, 5)
    second = time.monotonic()
    proc.send_signal(signal.SIGTERM)
    assert proc.wait_exit(timeout=20) == 0
    print(f"exit {time.monotonic() - second:.1f}s after the second SIGTERM")
    assert time.monotonic() - second < 10  # far below shutdown_timeout = 25 and the 30 s delivery
    assert "second stop signal" in proc.output()

    # released, not deleted: visible again at once, and not counted as delivered
    wait_until(lambda: count_visible(sqs, queue.url) == 1, 5, message="in-flight message not released")
    assert drain_bodies(sqs, queue.url) == bodies
    assert count_messages(sqs, queue.url) == 0
    assert len(http_app.requests) == 1
    assert "delivered=0" in proc.output()


def test_grace_period_ends_and_the_unfinished_delivery_is_released(
    daemon: Callable[..., Daemon], aws_env: dict[str, str], http_app: HttpApp,
    sqs: Any, make_queue: Callable[..., Queue], tmp_path: Path,
) -> None:
    queue = make_queue()
    http_app.delay = 30
    proc, bodies = start_with_one_in_flight(daemon, aws_env, http_app, sqs, queue, tmp_path,
                                            shutdown_timeout=2, messages=1)
    signalled = time.monotonic()
    proc.send_signal(signal.SIGTERM)
    assert proc.wait_exit(timeout=20) == 0
    elapsed = time.monotonic() - signalled
    print(f"exit {elapsed:.1f}s after SIGTERM with shutdown_timeout = 2")
    assert 2 <= elapsed < 10
    wait_until(lambda: count_visible(sqs, queue.url) == 1, 5, message="unfinished delivery not released")
    assert drain_bodies(sqs, queue.url) == bodies
    assert "still running after the grace period" in proc.output()


def test_a_duplicate_sigterm_within_a_second_keeps_the_grace_period(
    daemon: Callable[..., Daemon], aws_env: dict[str, str], http_app: HttpApp,
    sqs: Any, make_queue: Callable[..., Queue], tmp_path: Path,
) -> None:
    queue = make_queue()
    http_app.delay = 3
    proc, _ = start_with_one_in_flight(daemon, aws_env, http_app, sqs, queue, tmp_path,
                                       shutdown_timeout=10, messages=1)
    proc.send_signal(signal.SIGTERM)
    proc.send_signal(signal.SIGTERM)  # Heroku and some supervisors send the signal twice
    assert proc.wait_exit(timeout=30) == 0
    assert "second stop signal" not in proc.output()
    assert count_messages(sqs, queue.url) == 0  # delivered and deleted, not cut short
    assert "delivered=1 failed=0" in proc.output()


def status_of(port: int) -> dict[str, Any]:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/status", timeout=5) as response:
            return dict(json.loads(response.read()))
    except OSError:
        return {}


@pytest.mark.xfail(strict=True, reason="watchers are killed mid long poll at stop; the server still "
                   "completes that receive, so a message arriving within poll_for after the stop is "
                   "hidden for the queue's visibility_timeout (design limitation, reported)")
def test_a_message_sent_right_after_an_idle_stop_is_not_hidden(
    daemon: Callable[..., Daemon], aws_env: dict[str, str], http_app: HttpApp,
    sqs: Any, make_queue: Callable[..., Queue], tmp_path: Path,
) -> None:
    queue = make_queue()
    port = free_port()
    config = one_queue_config(tmp_path, http_app, queue, shutdown_timeout=10)
    proc = daemon(["-c", str(config), f"--status=127.0.0.1:{port}"], env=aws_env)  # straight to moto
    wait_until(lambda: [q.get("state") for q in status_of(port).get("queues", [])] == ["idle"], 60,
               message=lambda: f"status: {status_of(port)}")
    long_polling = time.monotonic() + 0.5  # the watcher's request leaves within milliseconds of "idle"
    wait_until(lambda: time.monotonic() > long_polling, 5)
    assert proc.stop(timeout=30) == 0
    sqs.send_message(QueueUrl=queue.url, MessageBody="after the stop")
    # nobody is consuming any more: the message must stay visible for the next instance
    wait_until(lambda: count_visible(sqs, queue.url) == 1, 5, message="hidden by the abandoned long poll")
    assert http_app.requests == []


def test_receives_still_on_their_way_at_a_max_messages_stop_are_waited_for_and_released(
    daemon: Callable[..., Daemon], proxied_env: dict[str, str], counting_proxy: CountingProxy,
    http_app: HttpApp, sqs: Any, make_queue: Callable[..., Queue],
) -> None:
    """Receives ahead that SQS answers later than the stop's two 5 s joins used to be abandoned at exit:
    SQS still handed out their messages, which stayed hidden for the visibility timeout, unlogged (the
    weighted 3:2:1 test on a slow moto lost one receive's worth this way)."""
    queue = make_queue()
    bodies = [f"message-{i}" for i in range(60)]
    send_batch(sqs, queue.url, bodies)
    http_app.delay = 0.2
    proc = daemon([f"--queues={queue.name}", f"--http={http_app.url}/work", "--concurrency=2",
                   "--max-messages=16"], env=proxied_env)
    http_app.wait_for_requests(1, timeout=60)
    counting_proxy.delays["ReceiveMessage"] = 11.0  # every later receive lands after both joins
    assert proc.wait_exit(timeout=90) == 0
    wait_until(lambda: not counting_proxy.pending("ReceiveMessage"), 30, message="receives still held")
    delivered = {request.body.decode() for request in http_app.requests}
    assert len(delivered) == 16
    wait_until(lambda: count_visible(sqs, queue.url) == len(bodies) - 16, 10,
               message=lambda: f"visible {count_visible(sqs, queue.url)} of {len(bodies) - 16}: "
                               f"{proc.output()[-1500:]}")
    assert sorted(drain_bodies(sqs, queue.url)) == sorted(set(bodies) - delivered)
    assert "still unanswered" not in proc.output()
