"""The /status document's queue rows and the page (observability/snapshot.py, status_page.py), and the
one word per queue state (delivery/poller.queue_row)."""

from __future__ import annotations

import time

from workerless_gevent.config.model import QueueConfig
from workerless_gevent.delivery.queue_state import QUEUE_STATES, QueueRow, QueueState, queue_row
from workerless_gevent.delivery.queue import SqsQueue
from workerless_gevent.metrics import Registry
from workerless_gevent.observability.snapshot import latest_error, queue_rows
from workerless_gevent.observability.status_page import render_queues


def row(name: str, last_error: str = "", last_error_at: float = 0.0) -> QueueRow:
    return QueueRow(name, "default", "idle", 0, 0, 0.0, last_error, last_error_at, 0.0)


def test_the_backlog_is_the_registry_gauge_when_there_is_one() -> None:
    registry = Registry()
    registry.track_gauge("Backlog", lambda: {"a": 12.0})
    documents = queue_rows([row("a"), row("b")], [], registry, None)
    assert [(document["backlog"], document["deliveries_per_second"]) for document in documents] == [(12, None),
                                                                                                     (None, None)]
    page = render_queues(documents)
    assert "<td>12</td>" in page and "<td>\u2013</td>" in page


def test_the_last_error_is_the_latest_of_the_receive_and_the_delivery() -> None:
    registry = Registry()
    now = time.time()
    registry.record_failure("HTTP 500", "the app answered HTTP 500", queue="a", target="default")
    (newer_delivery,) = queue_rows([row("a", "SQS down", now - 60)], [], registry, {"a": 2.5})
    assert newer_delivery["last_error"] == "HTTP 500: the app answered HTTP 500"
    assert newer_delivery["deliveries_per_second"] == 2.5
    (newer_receive,) = queue_rows([row("a", "SQS down", now + 60)], [], registry, None)
    assert newer_receive["last_error"] == "receive: SQS down"
    assert registry.last_errors[("target", "default")][1] == "HTTP 500: the app answered HTTP 500"
    assert latest_error([None, (0.0, "")]) == ("", 0.0)


def state_of(**fields: object) -> QueueState:
    queue = SqsQueue(None, QueueConfig(name="a"), "http://127.0.0.1:1/1/a", "arn:aws:sqs:us-east-1:1:a",
                     lambda queue, name: None)
    paused = float(fields.pop("paused", 0.0))  # type: ignore[arg-type]
    state = QueueState(queue, 1, lambda: paused)
    for name, value in fields.items():
        setattr(state if name == "is_retired" else state.receiving, name, value)
    return state


def test_each_queue_state_has_one_word() -> None:
    now = time.monotonic()
    assert queue_row(state_of(), now).state == "starting"  # never polled: not "ready"
    assert queue_row(state_of(has_received=True), now).state == "ready"
    assert queue_row(state_of(has_received=True, is_ready=False), now).state == "idle"
    assert queue_row(state_of(has_received=True, paused=2.0), now).state == "paused"
    assert queue_row(state_of(paused=2.0), now).state == "paused"
    assert queue_row(state_of(has_received=True, failures=2, paused=2.0), now).state == "failing"
    retired = queue_row(state_of(is_retired=True, failures=1, paused=3600.0), now)
    assert (retired.state, retired.paused_seconds) == ("draining", 0.0)
    words = {queue_row(state_of(**fields), now).state for fields in (
        {}, {"has_received": True}, {"has_received": True, "is_ready": False}, {"paused": 1.0}, {"failures": 1},
        {"is_retired": True})}
    assert words == set(QUEUE_STATES)  # the Prometheus gauge names every word the page can show
