"""Failure table, Lambda target side: function errors, throttles, and batches over the 6 MB limit.

moto cannot make a function fail or throttle, so the daemon's Lambda endpoint is the loopback
stand-in (`fake_lambda`, via AWS_ENDPOINT_URL_LAMBDA) while SQS stays on moto.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from itertools import pairwise
from pathlib import Path
from typing import Any

from tests.e2e.helpers import send_batch
from tests.support import (
    Daemon,
    FakeLambda,
    Invocation,
    Queue,
    build_config_file,
    count_messages,
    lambda_function_error,
    lambda_throttle,
    wait_until,
)

SIX_MB = 6 * 1024 * 1024


def start_daemon(daemon: Callable[..., Daemon], tmp_path: Path, env: dict[str, str], fake: FakeLambda,
                 queue: Queue, **queue_keys: Any) -> Daemon:
    config = build_config_file(tmp_path, concurrency=4, shutdown_timeout=5,
                               queues=[{"name": queue.name, "error_visibility_timeout": 1, **queue_keys}],
                               targets={"default": {"type": "lambda", "function": "fn-fake", "batch_size": 10,
                                                    "timeout": 30}})
    proc = daemon(["-c", str(config)], env={**env, "AWS_ENDPOINT_URL_LAMBDA": fake.url})
    proc.wait_for_output("workerless started", timeout=60)
    return proc


def bodies(invocation: Invocation) -> list[str]:
    return [record["body"] for record in invocation.payload["Records"]]


def succeeded(fake: FakeLambda, failed_indexes: set[int]) -> list[str]:
    """Bodies of every invocation except the ones the fake answered with a failure."""
    return [body for index, invocation in enumerate(list(fake.invocations)) if index not in failed_indexes
            for body in bodies(invocation)]


def test_function_error_fails_the_whole_batch_and_it_is_retried(
    daemon: Callable[..., Daemon], tmp_path: Path, aws_env: dict[str, str], fake_lambda: FakeLambda,
    sqs: Any, make_queue: Callable[..., Queue],
) -> None:
    queue = make_queue()
    sent = ["one", "two", "three"]
    send_batch(sqs, queue.url, sent)  # before the start: the first receive takes all three
    fake_lambda.script(lambda_function_error("KeyError: 'order'", "KeyError"))
    proc = start_daemon(daemon, tmp_path, aws_env, fake_lambda, queue)
    wait_until(lambda: sorted(succeeded(fake_lambda, {0})) == sorted(sent), 30,
               message=lambda: f"{[bodies(i) for i in fake_lambda.invocations]}\n{proc.output()[-3000:]}")
    wait_until(lambda: count_messages(sqs, queue.url) == 0, 15, message="not deleted")
    assert proc.stop(timeout=30) == 0
    assert count_messages(sqs, queue.url) == 0
    first = fake_lambda.invocations[0]
    assert sorted(bodies(first)) == sorted(sent)
    assert sorted(succeeded(fake_lambda, {0})) == sorted(sent)  # each exactly once after the failure
    failures = [line for line in proc.output().splitlines() if "outcome=failure" in line]
    assert len(failures) == 3 and all("type=FunctionError:Unhandled" in line for line in failures), failures
    assert "KeyError" in failures[0]
    retried = [record["attributes"]["ApproximateReceiveCount"]
               for invocation in fake_lambda.invocations[1:] for record in invocation.payload["Records"]]
    assert retried == ["2"] * 3


def test_throttle_pauses_the_target_and_is_retried_not_failed(
    daemon: Callable[..., Daemon], tmp_path: Path, aws_env: dict[str, str], fake_lambda: FakeLambda,
    sqs: Any, make_queue: Callable[..., Queue],
) -> None:
    queue = make_queue()
    sent = ["a", "b"]
    send_batch(sqs, queue.url, sent)
    fake_lambda.script(lambda_throttle(), lambda_throttle())
    proc = start_daemon(daemon, tmp_path, aws_env, fake_lambda, queue)
    wait_until(lambda: sorted(succeeded(fake_lambda, {0, 1})) == sorted(sent), 40,
               message=lambda: f"{[bodies(i) for i in fake_lambda.invocations]}\n{proc.output()[-3000:]}")
    wait_until(lambda: count_messages(sqs, queue.url) == 0, 15, message="not deleted")
    assert proc.stop(timeout=30) == 0
    assert count_messages(sqs, queue.url) == 0
    invocations = fake_lambda.invocations
    assert len(invocations) == 3
    assert all(sorted(bodies(invocation)) == sorted(sent) for invocation in invocations)
    # throttles in a row pause the target for uniform(c/2, c) with c = 2, then 4 seconds
    gaps = [later.arrived - earlier.arrived for earlier, later in pairwise(invocations)]
    assert gaps[0] >= 1.0 - 0.05 and gaps[1] >= 2.0 - 0.05, gaps
    assert "outcome=failure" not in proc.output()
    assert proc.output().count("TooManyRequestsException") >= 2


def test_batch_over_6_mb_is_split_into_invocations_under_the_limit(
    daemon: Callable[..., Daemon], tmp_path: Path, aws_env: dict[str, str], fake_lambda: FakeLambda,
    sqs: Any, make_queue: Callable[..., Queue],
) -> None:
    queue = make_queue()
    # 256 KiB of UTF-8 each, but "é" becomes \u00e9 in JSON: ~770 KB per record, ~7.7 MB for ten
    sent = [f"{i:02d}" + "é" * (128 * 1024 - 2) for i in range(10)]
    for body in sent:
        sqs.send_message(QueueUrl=queue.url, MessageBody=body)
    proc = start_daemon(daemon, tmp_path, aws_env, fake_lambda, queue)
    wait_until(lambda: len(succeeded(fake_lambda, set())) >= 10, 60,
               message=lambda: f"{len(fake_lambda.invocations)} invocations\n{proc.output()[-3000:]}")
    wait_until(lambda: count_messages(sqs, queue.url) == 0, 15, message="not deleted")
    assert proc.stop(timeout=30) == 0
    assert count_messages(sqs, queue.url) == 0
    sizes = [len(invocation.raw) for invocation in fake_lambda.invocations]
    print("invocation payload sizes:", sizes)
    assert all(size <= SIX_MB for size in sizes), sizes
    assert len(json.dumps({"Records": [{"body": body} for body in sent]})) > SIX_MB  # it had to split
    assert len(sizes) >= 2
    delivered = succeeded(fake_lambda, set())
    assert sorted(delivered) == sorted(sent)  # byte-exact and each once
    assert "outcome=failure" not in proc.output()
