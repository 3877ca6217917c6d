"""A Lambda target's endpoint_url against the real Runtime Interface Emulator (aws-lambda-rie from the aws-sam-cli
wheel) running the handler through awslambdaric, as AWS's Lambda images run it (tests/support/real_emulator.py
fetches both from PyPI once, and skips where it cannot)."""

from __future__ import annotations

import http.client
import json
import os
from pathlib import Path
from typing import Any, Callable, Iterator

import gevent
import pytest

from tests.e2e.helpers import expect_the_whole_batch_failed, send_batch, start_on_lambda_endpoint
from tests.support import Daemon, Queue, count_messages, wait_until
from tests.support.real_emulator import RealEmulator

HANDLERS = Path(__file__).resolve().parent.parent / "support" / "lambda_handlers"
FUNCTION_TIMEOUT_SECONDS = 2  # the image's AWS_LAMBDA_FUNCTION_TIMEOUT


@pytest.fixture
def emulator(tmp_path: Path) -> Iterator[RealEmulator]:
    env = {**os.environ, "SQS_BATCH_LOG": str(tmp_path / "deliveries.jsonl"),
           "AWS_LAMBDA_FUNCTION_TIMEOUT": str(FUNCTION_TIMEOUT_SECONDS)}
    server = RealEmulator(HANDLERS, "sqs_batch.handler", env, tmp_path / "emulator.log")
    yield server
    server.stop()
    print("--- aws-lambda-rie ---\n" + server.output())


def deliveries(tmp_path: Path) -> list[tuple[str, str]]:
    """(body, ApproximateReceiveCount) of every record the handler was invoked with, in order."""
    path = tmp_path / "deliveries.jsonl"
    lines = path.read_text(encoding="utf-8").splitlines() if path.exists() else []
    return [(body, count) for line in lines for body, count in json.loads(line)]


def test_batches_with_partial_failures_through_the_real_emulator(
    daemon: Callable[..., Daemon], aws_env: dict[str, str], emulator: RealEmulator,
    sqs: Any, make_queue: Callable[..., Queue], tmp_path: Path,
) -> None:
    queue = make_queue()
    bodies = [f"m{i}" for i in range(18)] + ["fail-a", "fail-b"]
    send_batch(sqs, queue.url, bodies)
    proc = start_on_lambda_endpoint(daemon, aws_env, tmp_path, queue, emulator.url, batch_size=4)
    wait_until(lambda: count_messages(sqs, queue.url) == 2 and {("fail-a", "2"), ("fail-b", "2")}
               <= set(deliveries(tmp_path)), 90, message=lambda: f"deliveries: {deliveries(tmp_path)}")
    assert proc.stop(timeout=30) == 0

    seen = deliveries(tmp_path)
    assert sorted(body for body, count in seen if count == "1") == sorted(bodies)
    assert {body for body, count in seen if count != "1"} == {"fail-a", "fail-b"}
    assert emulator.process.poll() is None, emulator.output()  # one invocation at a time: it never crashed
    assert "delivered=18" in proc.output()


@pytest.mark.parametrize(("body", "logged"), [
    ("raise", "FunctionError:Unhandled: ValueError: cannot process"),
    ("hang", f"Sandbox.Timedout: Task timed out after {FUNCTION_TIMEOUT_SECONDS}.00 seconds"),
    ("exit", "Runtime.ExitError: RequestId:"),
], ids=["function-error", "timeout", "runtime-exit"])
def test_function_errors_of_the_real_emulator_fail_the_whole_batch(
    body: str, logged: str, daemon: Callable[..., Daemon], aws_env: dict[str, str], emulator: RealEmulator,
    sqs: Any, make_queue: Callable[..., Queue], tmp_path: Path,
) -> None:
    queue = make_queue()
    send_batch(sqs, queue.url, ["a", body, "c"])
    proc = start_on_lambda_endpoint(daemon, aws_env, tmp_path, queue, emulator.url)
    # the emulator answered 200 (or 502): nothing deleted
    expect_the_whole_batch_failed(proc, sqs, queue, ["a", body, "c"], logged, lambda: deliveries(tmp_path), 90)


def test_a_result_with_an_error_type_of_its_own_is_a_result_through_the_real_emulator(
    daemon: Callable[..., Daemon], aws_env: dict[str, str], emulator: RealEmulator,
    sqs: Any, make_queue: Callable[..., Queue], tmp_path: Path,
) -> None:
    """The emulator answers such a result exactly as it answers a function error (200, the same headers): only
    the runtime error object's members tell them apart."""
    queue = make_queue()
    send_batch(sqs, queue.url, ["a", "summary", "c"])
    proc = start_on_lambda_endpoint(daemon, aws_env, tmp_path, queue, emulator.url)
    wait_until(lambda: count_messages(sqs, queue.url) == 0, 90, message=lambda: f"deliveries: {deliveries(tmp_path)}")
    assert proc.stop(timeout=30) == 0
    assert sorted(deliveries(tmp_path)) == [("a", "1"), ("c", "1"), ("summary", "1")]
    assert "FunctionError" not in proc.output() and "delivered=3" in proc.output()


def test_the_real_emulator_crashes_on_an_invocation_sent_while_one_runs(emulator: RealEmulator) -> None:
    """Why an endpoint_url target's max_concurrency defaults to 1: two at once end the emulator itself."""
    host, port = emulator.url.removeprefix("http://").split(":")
    event = json.dumps({"Records": [{"messageId": "m", "body": "hang", "attributes": {
        "ApproximateReceiveCount": "1"}}]})

    def invoke() -> int | None:
        connection = http.client.HTTPConnection(host, int(port), timeout=30)
        try:
            connection.request("POST", "/2015-03-31/functions/function/invocations", event)
            return connection.getresponse().status
        except (OSError, http.client.HTTPException):
            return None  # the connection died with the emulator
        finally:
            connection.close()

    first = gevent.spawn(invoke)
    wait_until(lambda: "START RequestId" in emulator.output(), 10, message=emulator.output)
    second = gevent.spawn(invoke)
    gevent.joinall([first, second], timeout=30)
    wait_until(lambda: emulator.process.poll() is not None, 10, message=emulator.output)
    assert "AlreadyReserved" in emulator.output()
    assert (first.value, second.value) == (None, None)
