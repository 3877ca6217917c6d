"""Visibility heartbeat: a delivery far longer than the visibility timeout is delivered exactly once.

The daemon's own watcher keeps long-polling the same queue, so a single missed extension would
show up as a second delivery; the test also watches SQS's visible count the whole time.
"""

from __future__ import annotations

import signal
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import gevent

from tests.e2e.helpers import send_batch
from tests.support import (
    CountingProxy,
    Daemon,
    Queue,
    RecordedRequest,
    build_config_file,
    count_messages,
    count_visible,
    wait_until,
)
from tests.support.faults import FaultyApp, Reply, faulty_app_fixture  # noqa: F401 (fixture)


class VisibleWatch:
    """Samples the queue's visible count every 0.1 s in the background and keeps the maximum."""

    def __init__(self, sqs: Any, url: str) -> None:
        self.samples: list[int] = []
        self.greenlet = gevent.spawn(self._run, sqs, url)

    def _run(self, sqs: Any, url: str) -> None:
        while True:
            self.samples.append(count_visible(sqs, url))
            gevent.sleep(0.1)

    def stop(self) -> list[int]:
        self.greenlet.kill()
        return self.samples


def start_daemon(daemon: Callable[..., Daemon], tmp_path: Path, env: dict[str, str], app: FaultyApp,
                 queue: Queue, concurrency: int = 4) -> Daemon:
    config = build_config_file(tmp_path, concurrency=concurrency, shutdown_timeout=5,
                               queues=[{"name": queue.name, "visibility_timeout": 2}],
                               targets={"default": {"type": "http", "url": f"{app.url}/work",
                                                    "inactivity_timeout": 30}})
    proc = daemon(["-c", str(config)], env=env)
    proc.wait_for_output("workerless started", timeout=60)
    return proc


def heartbeats(proxy: CountingProxy, since: float) -> list[dict[str, Any]]:
    """Entries of the ChangeMessageVisibilityBatch calls made since `since`."""
    return [entry for request in proxy.between(since, float("inf"), "ChangeMessageVisibilityBatch")
            for entry in request.params.get("Entries", [])]


def test_delivery_3x_longer_than_visibility_timeout_is_delivered_exactly_once(
    daemon: Callable[..., Daemon], tmp_path: Path, proxied_env: dict[str, str], counting_proxy: CountingProxy,
    faulty_app: FaultyApp, sqs: Any, make_queue: Callable[..., Queue],
) -> None:
    queue = make_queue()
    faulty_app.delay = 7.0  # visibility_timeout = 2
    proc = start_daemon(daemon, tmp_path, proxied_env, faulty_app, queue)
    watch = VisibleWatch(sqs, queue.url)
    sent = time.monotonic()
    sqs.send_message(QueueUrl=queue.url, MessageBody="long job")
    wait_until(lambda: faulty_app.succeeded_bodies() == [b"long job"], 30, message=lambda: proc.output()[-3000:])
    wait_until(lambda: count_messages(sqs, queue.url) == 0, 10, message="not deleted after the delivery")
    samples = watch.stop()
    assert proc.stop(timeout=30) == 0
    assert count_messages(sqs, queue.url) == 0
    assert len(faulty_app.requests) == 1  # never a second delivery while the first ran
    assert faulty_app.succeeded_bodies() == [b"long job"]
    # once received it never showed as visible again (the first samples may precede the receive)
    received = faulty_app.requests[0].arrived
    assert max(samples[int((received - sent) / 0.1) + 2:], default=0) == 0, samples
    beats = heartbeats(counting_proxy, received)
    # 7 s at one extension per ~1.5 s, each by the visibility timeout
    assert len(beats) >= 3, beats
    assert all(entry["VisibilityTimeout"] == 2 for entry in beats), beats
    assert counting_proxy.count("DeleteMessageBatch", since=received) == 1


def test_buffered_messages_are_heartbeated_while_they_wait_for_a_slot(
    daemon: Callable[..., Daemon], tmp_path: Path, proxied_env: dict[str, str], counting_proxy: CountingProxy,
    faulty_app: FaultyApp, sqs: Any, make_queue: Callable[..., Queue],
) -> None:
    queue = make_queue()
    bodies = ["first", "second", "third"]
    send_batch(sqs, queue.url, bodies)  # one receive buffers all three; concurrency 1 runs them in turn

    def respond(request: RecordedRequest) -> Reply:
        gevent.sleep(2.5)
        return 200, {}, b""

    faulty_app.respond = respond
    proc = start_daemon(daemon, tmp_path, proxied_env, faulty_app, queue, concurrency=1)
    # the third waits ~5 s in the buffer, 2.5x its visibility timeout
    wait_until(lambda: len(faulty_app.succeeded_bodies()) == 3, 40, message=lambda: proc.output()[-3000:])
    wait_until(lambda: count_messages(sqs, queue.url) == 0, 10, message="not deleted")
    assert proc.stop(timeout=30) == 0
    assert count_messages(sqs, queue.url) == 0
    assert sorted(faulty_app.succeeded_bodies()) == sorted(b.encode() for b in bodies)
    assert len(faulty_app.requests) == 3
    assert [r.headers["x-aws-sqsd-receive-count"] for r in faulty_app.requests] == ["1", "1", "1"]
    assert faulty_app.max_concurrent == 1


def test_heartbeats_go_on_while_a_sigterm_waits_for_the_delivery(
    daemon: Callable[..., Daemon], tmp_path: Path, proxied_env: dict[str, str], counting_proxy: CountingProxy,
    faulty_app: FaultyApp, sqs: Any, make_queue: Callable[..., Queue],
) -> None:
    queue = make_queue()
    faulty_app.delay = 6.0  # visibility_timeout = 2; shutdown_timeout = 5 is not enough, so 20
    config = build_config_file(tmp_path, concurrency=4, shutdown_timeout=20,
                               queues=[{"name": queue.name, "visibility_timeout": 2}],
                               targets={"default": {"type": "http", "url": f"{faulty_app.url}/work"}})
    proc = daemon(["-c", str(config)], env=proxied_env)
    proc.wait_for_output("workerless started", timeout=60)
    watch = VisibleWatch(sqs, queue.url)
    sqs.send_message(QueueUrl=queue.url, MessageBody="finish me")
    faulty_app.wait_for_requests(1, timeout=30)
    proc.send_signal(signal.SIGTERM)
    stopping = time.monotonic()
    assert proc.wait_exit(timeout=30) == 0
    samples = watch.stop()
    assert time.monotonic() - stopping >= 4  # it waited for the delivery
    assert faulty_app.succeeded_bodies() == [b"finish me"]
    assert len(faulty_app.requests) == 1
    assert count_messages(sqs, queue.url) == 0
    assert max(samples[-20:]) == 0  # not visible again in the seconds before the exit
    assert len(heartbeats(counting_proxy, stopping)) >= 2  # extended after the signal
