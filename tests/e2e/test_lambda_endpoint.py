"""A Lambda target with its own endpoint_url, through the real daemon: the handler that ran on Lambda, behind a
stand-in for the Runtime Interface Emulator of AWS's Lambda images (tests/support/lambda_emulator.py), which
answers function errors, timeouts and crashes without Lambda's headers."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Callable, Iterator

import pytest

from tests.e2e.helpers import expect_the_whole_batch_failed, http_get, send_batch, start_on_lambda_endpoint
from tests.support import Daemon, Invocation, Queue, build_config_file, count_messages, status_url, wait_until
from tests.support.lambda_emulator import LambdaEmulator
from tests.support.lambda_handlers.sqs_batch import handler


@pytest.fixture
def emulator() -> Iterator[LambdaEmulator]:
    server = LambdaEmulator(handler, timeout_seconds=1)
    server.start()
    yield server
    server.stop()


def deliveries(emulator: LambdaEmulator) -> list[tuple[str, str]]:
    """(body, ApproximateReceiveCount) of every record invoked, in order."""
    return [(record["body"], record["attributes"]["ApproximateReceiveCount"])
            for invocation in list(emulator.invocations) for record in records(invocation)]


def records(invocation: Invocation) -> list[dict[str, Any]]:
    return list(invocation.payload["Records"])


def test_batches_through_endpoint_url_one_at_a_time_unsigned_with_partial_failures(
    daemon: Callable[..., Daemon], aws_env: dict[str, str], emulator: LambdaEmulator,
    sqs: Any, make_queue: Callable[..., Queue], tmp_path: Path,
) -> None:
    queue = make_queue()
    bodies = [f"m{i}" for i in range(18)] + ["fail-a", "fail-b"]
    send_batch(sqs, queue.url, bodies)
    proc = start_on_lambda_endpoint(daemon, aws_env, tmp_path, queue, emulator.url, batch_size=4)
    wait_until(lambda: count_messages(sqs, queue.url) == 2 and ("fail-a", "2") in deliveries(emulator)
               and ("fail-b", "2") in deliveries(emulator), 60,
               message=lambda: f"deliveries: {deliveries(emulator)}")
    assert proc.stop(timeout=30) == 0

    assert all(len(records(invocation)) <= 4 for invocation in emulator.invocations)
    seen = deliveries(emulator)
    assert sorted(body for body, count in seen if count == "1") == sorted(bodies)  # every message, once each
    assert {body for body, count in seen if count != "1"} == {"fail-a", "fail-b"}  # only the reported ones again
    # The emulator runs one invocation at a time (the real one crashes on a second): max_concurrency defaults to 1.
    assert emulator.overlapping == 0 and emulator.max_concurrent == 1
    assert {invocation.function_name for invocation in emulator.invocations} == {"function"}
    # A loopback endpoint is never signed, though the daemon has credentials (moto's) for SQS.
    assert all("authorization" not in invocation.headers for invocation in emulator.invocations)
    assert all("x-amz-security-token" not in invocation.headers for invocation in emulator.invocations)
    assert "delivered=18" in proc.output()


@pytest.mark.parametrize(("body", "logged"), [
    ("raise", "FunctionError:Unhandled"),
    ("hang", "Sandbox.Timedout: Task timed out after 1.00 seconds"),
    ("exit", "Runtime.ExitError"),
], ids=["function-error", "timeout", "runtime-exit"])
def test_function_errors_the_emulator_answers_200_fail_the_whole_batch(
    body: str, logged: str, daemon: Callable[..., Daemon], aws_env: dict[str, str], emulator: LambdaEmulator,
    sqs: Any, make_queue: Callable[..., Queue], tmp_path: Path,
) -> None:
    queue = make_queue()
    send_batch(sqs, queue.url, ["a", body, "c"])
    proc = start_on_lambda_endpoint(daemon, aws_env, tmp_path, queue, emulator.url)
    # an error answered 200 deletes nothing
    expect_the_whole_batch_failed(proc, sqs, queue, ["a", body, "c"], logged, lambda: deliveries(emulator), 60)
    assert sorted(r["body"] for r in records(emulator.invocations[0])) == sorted(["a", body, "c"])


def test_a_function_name_the_emulator_does_not_serve_is_named_in_the_failure(
    daemon: Callable[..., Daemon], aws_env: dict[str, str], emulator: LambdaEmulator,
    sqs: Any, make_queue: Callable[..., Queue], tmp_path: Path,
) -> None:
    queue = make_queue()
    send_batch(sqs, queue.url, ["a"])
    proc = start_on_lambda_endpoint(daemon, aws_env, tmp_path, queue, emulator.url, function="billing-fn")
    proc.wait_for_output("ResourceNotFoundException", timeout=60)
    assert proc.stop(timeout=30) == 0
    assert "serves no function named 'billing-fn'" in proc.output()
    assert count_messages(sqs, queue.url) == 1
    assert emulator.invocations == []  # the stand-in, as the emulator, answers 404 before running anything


def test_a_result_with_an_error_type_of_its_own_is_a_result_and_the_status_page_names_the_endpoint(
    daemon: Callable[..., Daemon], aws_env: dict[str, str], emulator: LambdaEmulator,
    sqs: Any, make_queue: Callable[..., Queue], tmp_path: Path,
) -> None:
    queue = make_queue()
    send_batch(sqs, queue.url, ["a", "summary", "c"])
    config = build_config_file(tmp_path, queues=[{"name": queue.name, "error_visibility_timeout": 1}],
                               targets={"default": {"type": "lambda", "endpoint_url": emulator.url}},
                               tables={"status": {"listen": "127.0.0.1:0"}})
    proc = daemon(["-c", str(config)], env=aws_env)
    url = status_url(proc)
    wait_until(lambda: count_messages(sqs, queue.url) == 0, 60, message=lambda: f"deliveries: {deliveries(emulator)}")
    (target,) = json.loads(http_get(url + "/status")[2])["targets"]
    assert proc.stop(timeout=30) == 0

    assert deliveries(emulator) == [("a", "1"), ("summary", "1"), ("c", "1")]  # once: the answer was the handler's
    assert "FunctionError" not in proc.output() and "delivered=3" in proc.output()
    assert (target["type"], target["endpoint"]) == ("lambda", f"function at {emulator.url}")
