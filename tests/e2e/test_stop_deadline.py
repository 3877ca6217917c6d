"""One stop deadline: from SIGTERM to exit takes at most `shutdown_timeout` + 1 s with everything downstream
stalled at once (an app that hangs; SQS deletes and visibility changes, CloudWatch, DynamoDB's completions,
give-ups and extensions, and the OTLP collector, none of which ever answer), and the messages whose last
action could not be made are named in ERROR lines."""

from __future__ import annotations

import json
import signal
import time
from collections.abc import Callable, Iterator
from datetime import datetime
from pathlib import Path
from typing import Any

import gevent.event
import pytest

from tests.e2e.helpers import send_batch
from tests.support import Daemon, HttpApp, Queue, RecordedRequest, build_config_file, wait_until
from tests.support.chaos import ChaosProxy, chaos_fixture  # noqa: F401
from tests.support.http_app import Reply
from tests.support.otlp import OtlpReceiver

SHUTDOWN_TIMEOUT = 6
NEVER = (600.0, 600.0)  # a stall longer than the test: the call is never answered while the daemon runs
STALLED = ("DeleteMessageBatch", "ChangeMessageVisibilityBatch", "PutMetricData", "BatchWriteItem", "DeleteItem",
           "UpdateItem")
# The wall clock from the test's SIGTERM to the process's end also holds the signal's way in, the interpreter's
# exit and a loaded machine's scheduling, none of which the daemon's own lines show; this much on top of the
# budget still fails the 16 s a stop took before it had one deadline.
WALL_CLOCK_SLACK_SECONDS = 3.0


@pytest.fixture
def collector() -> Iterator[OtlpReceiver]:
    """An OTLP receiver that takes every export and never answers."""
    receiver = OtlpReceiver()
    receiver.delay = NEVER[0]
    receiver.start()
    yield receiver
    receiver.stop()


def hang_some(app: HttpApp) -> gevent.event.Event:
    """Bodies that start with `hang` are never answered (until the returned event is set); others get 200."""
    released = gevent.event.Event()

    def respond(request: RecordedRequest) -> Reply:
        if b"hang" in request.body:
            released.wait(120)
        return 200, {}, b""
    app.respond = respond
    return released


def logged(proc: Daemon) -> list[dict[str, Any]]:
    return [json.loads(line) for line in proc.output().splitlines() if line.startswith("{")]


def seconds_between(lines: list[dict[str, Any]], first: str, last: str) -> float:
    """From the daemon's line holding `first` to its line holding `last`, by the lines' own times."""
    (start,) = [line for line in lines if first in line["message"]]
    (end,) = [line for line in lines if last in line["message"]]
    moment = lambda line: datetime.fromisoformat(line["time"].replace("Z", "+00:00"))  # noqa: E731
    return (moment(end) - moment(start)).total_seconds()


def test_a_stop_with_everything_stalled_ends_within_shutdown_timeout_and_names_what_it_left(
    daemon: Callable[..., Daemon], aws_env: dict[str, str], chaos: ChaosProxy, collector: OtlpReceiver,  # noqa: F811
    http_app: HttpApp, sqs: Any, make_queue: Callable[..., Queue], claims_table: str, tmp_path: Path,
) -> None:
    plain, keyed = make_queue(VisibilityTimeout=300), make_queue(VisibilityTimeout=300)
    released = hang_some(http_app)
    config = build_config_file(
        tmp_path, concurrency=8, shutdown_timeout=SHUTDOWN_TIMEOUT, log_format="json",
        queues=[{"name": plain.name, "visibility_timeout": 300},
                {"name": keyed.name, "visibility_timeout": 300, "idempotency_key": "body:order.id"}],
        targets={"default": {"type": "http", "url": f"{http_app.url}/work"}},
        tables={"metrics": {"interval": 1}, "idempotency": {"table": claims_table, "expires_after": 600},
                "tracing": {"exporter": "otlp"}})
    config.write_text(f'name = "stop-{plain.name[-8:]}"\n' + config.read_text())  # CloudWatch metrics on
    chaos.set(share=1.0, kinds=("stall",), actions=STALLED, stall=NEVER)
    env = {**aws_env, "AWS_ENDPOINT_URL": chaos.url, "OTEL_EXPORTER_OTLP_ENDPOINT": collector.endpoint,
           "OTEL_BSP_SCHEDULE_DELAY": "100"}
    proc = daemon(["-c", str(config)], env=env)
    try:
        deleted = send_batch(sqs, plain.url, ["ok-1", "ok-2", "ok-3"])
        hanging = send_batch(sqs, plain.url, ["hang-1", "hang-2"])
        completed = send_batch(sqs, keyed.url, [json.dumps({"order": {"id": "K-1"}, "note": "ok"})])
        hanging += send_batch(sqs, keyed.url, [json.dumps({"order": {"id": "K-2"}, "note": "hang"})])
        http_app.wait_for_requests(7, timeout=60)

        def stalled() -> bool:
            pending = {request.action for request in chaos.pending()}
            return {"DeleteMessageBatch", "BatchWriteItem", "PutMetricData"} <= pending and collector.requests > 0
        wait_until(stalled, 30, message=lambda: f"pending at the proxy: {[r.action for r in chaos.pending()]}, "
                                                f"exports {collector.requests}; log:\n{proc.output()[-3000:]}")
        assert http_app.in_flight == 3  # hang-1, hang-2 and K-2

        signalled = time.monotonic()
        proc.send_signal(signal.SIGTERM)
        proc.wait_for_output("stopping (SIGTERM)", timeout=10)
        proc.send_signal(signal.SIGTERM)  # as Heroku repeats it: it neither restarts the deadline nor forces
        assert proc.wait_exit(timeout=60) == 0
        exited_after = time.monotonic() - signalled
    finally:
        released.set()
    lines = logged(proc)
    stop_seconds = seconds_between(lines, "stopping (SIGTERM)", "workerless stopped:")
    print(f"exit {exited_after:.2f}s after SIGTERM (the daemon's lines: {stop_seconds:.2f}s from its stop to its "
          f"last line) with shutdown_timeout = {SHUTDOWN_TIMEOUT}")
    assert stop_seconds <= SHUTDOWN_TIMEOUT + 1
    assert exited_after <= SHUTDOWN_TIMEOUT + 1 + WALL_CLOCK_SLACK_SECONDS
    assert "second stop signal" not in proc.output()

    warnings = " ".join(line["message"] for line in lines if line["level"] == "WARNING")
    assert "CloudWatch: the last metrics were not sent within" in warnings
    assert "spans not taken by the OTLP collector within" in warnings
    errors = " ".join(line["message"] for line in lines if line["level"] == "ERROR")
    for message_id in deleted + completed + hanging:
        assert message_id in errors, (message_id, errors)
    # a success whose `completed` write did not land is not deleted: a copy of it would not be known as a duplicate
    assert [request for request in list(chaos.requests)
            if request.action == "DeleteMessageBatch" and request.queue == keyed.name] == []
