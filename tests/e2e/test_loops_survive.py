"""Every loop meets answers it does not expect and the daemon still delivers and deletes afterwards:
a batch flusher, the receivers and a watcher keep working, and /healthz stays 200."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.helpers import http_get
from tests.support import Daemon, Queue, count_messages, status_url, wait_until
from tests.support.config_file import build_config_file
from tests.support.faults import FaultyApp, FaultySqs, faulty_app_fixture, faulty_sqs_fixture, metric_total  # noqa: F401
from tests.support.http_app import Reply

JSON = {"Content-Type": "application/x-amz-json-1.0"}


def answer(body: bytes | dict[str, Any]) -> Reply:
    return 200, JSON, body if isinstance(body, bytes) else json.dumps(body).encode()


# (what the daemon is doing, action, 200 answers it gets for a while instead of SQS's)
SURPRISES = [
    ("receiving", "ReceiveMessage", answer(b"<html>not json</html>")),
    ("receiving", "ReceiveMessage", answer({"Messages": "surprise"})),
    ("receiving", "ReceiveMessage", answer({"Messages": [{"Body": "no id, no receipt handle"}, 7]})),
    ("receiving", "ReceiveMessage", answer({"Messages": [{"MessageId": "m", "ReceiptHandle": "r", "Body": "x",
                                                          "MessageAttributes": ["not", "a", "map"]}]})),
    ("receiving", "ReceiveMessage", answer({"Messages": [{"MessageId": "m", "ReceiptHandle": "r", "Body": "x",
        "MessageAttributes": {"b": {"DataType": "Binary", "BinaryValue": "abc"}}}]})),  # not base64
    ("deleting", "DeleteMessageBatch", answer({"Successful": [], "Failed": [
        {"Id": "99", "Code": "InternalError", "SenderFault": False, "Message": "an entry nobody sent"}]})),
    ("deleting", "DeleteMessageBatch", answer(b"\x00\x01 not json")),
    ("deleting", "DeleteMessageBatch", answer({"Successful": [], "Failed": [
        {"Id": "\u00b2", "Code": "InternalError", "SenderFault": False}, {"Id": "abc"}, "?"]})),
    ("deleting", "DeleteMessageBatch", answer({"Successful": {"Id": "0"}, "Failed": None})),
    ("releasing", "ChangeMessageVisibilityBatch", answer({"Failed": [{"Id": "x"}], "Successful": "?"})),
    ("releasing", "ChangeMessageVisibilityBatch", answer(b"[]")),
]


@pytest.mark.slow
def test_answers_nobody_expected_cost_retries_never_a_loop(
    daemon: Callable[..., Daemon], aws_env: dict[str, str], faulty_sqs: FaultySqs, faulty_app: FaultyApp,
    sqs: Any, make_queue: Callable[..., Queue], tmp_path: Path,
) -> None:
    queue = make_queue()
    faulty_app.respond = lambda request: (500, {}, b"") if request.body.startswith(b"fail") and not any(
        r.body == request.body for r, _, _ in faulty_app.answered) else (200, {}, b"")
    config = build_config_file(tmp_path, concurrency=4, queues=[{"name": queue.name, "error_visibility_timeout": 1,
                                                                 "visibility_timeout": 30}],
                               targets={"default": {"type": "http", "url": f"{faulty_app.url}/work"}},
                               tables={"status": {"listen": "127.0.0.1:0"}})
    proc = daemon(["-c", str(config)], env={**aws_env, "AWS_ENDPOINT_URL": faulty_sqs.url})
    url = status_url(proc, timeout=30)
    for number, (doing, action, reply) in enumerate(SURPRISES):
        left = [3]

        def fault(seen: str, params: dict[str, Any], action: str = action, reply: Reply = reply,
                  left: list[int] = left) -> Reply | None:
            if seen != action or left[0] <= 0:
                return None
            left[0] -= 1
            return reply

        faulty_sqs.fault = fault
        tracebacks = proc.output().count("Traceback (most recent call last)")
        body = f"{'fail' if doing == 'releasing' else 'ok'}-{number}".encode()
        sqs.send_message(QueueUrl=queue.url, MessageBody=body.decode())
        wait_until(lambda: left[0] == 0, 60, message=lambda: f"{action} never met {reply[2]!r}:\n{proc.output()[-3000:]}")
        faulty_sqs.heal()
        wait_until(lambda: body in faulty_app.succeeded_bodies(), 60,
                   message=lambda: f"{body!r} not delivered after {action} got {reply[2]!r}:\n{proc.output()[-3000:]}")
        wait_until(lambda: count_messages(sqs, queue.url) == 0, 60,
                   message=lambda: f"{body!r} not deleted after {action} got {reply[2]!r}:\n{proc.output()[-3000:]}")
        assert proc.alive() and http_get(url + "/healthz")[::2] == (200, "ok\n")
        # the same unexpected error three times: its traceback once at most, then one-line notes
        assert proc.output().count("Traceback (most recent call last)") - tracebacks <= 1, proc.output()[-5000:]
    assert metric_total(url, "workerless_delete_failed_total") == 0
    assert proc.stop(timeout=20) == 0
    assert " died: " not in proc.output()  # no greenlet ended by an exception
