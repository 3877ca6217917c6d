"""Lambda outcomes through the real daemon, with the stand-in Lambda: what stays, what goes."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Callable

from tests.e2e.helpers import send_batch
from tests.support import (
    Daemon,
    FakeLambda,
    Invocation,
    LambdaReply,
    Queue,
    build_config_file,
    count_messages,
    lambda_function_error,
    lambda_result,
    lambda_throttle,
    wait_until,
)


def lambda_config(tmp_path: Path, queue: Queue) -> Path:
    return build_config_file(tmp_path, concurrency=4, shutdown_timeout=5, polling={"poll_for": 20},
                             queues=[{"name": queue.name, "error_visibility_timeout": 1}],
                             targets={"default": {"type": "lambda", "function": "worker-fn"}})


def start(daemon: Callable[..., Daemon], aws_env: dict[str, str], fake: FakeLambda, tmp_path: Path,
          queue: Queue) -> Daemon:
    return daemon(["-c", str(lambda_config(tmp_path, queue))],
                  env={**aws_env, "AWS_ENDPOINT_URL_LAMBDA": fake.url})


def records(invocation: Invocation) -> list[dict[str, Any]]:
    return list(invocation.payload["Records"])


def deliveries(fake: FakeLambda) -> list[tuple[str, str]]:
    """(body, ApproximateReceiveCount) of every record invoked, in order."""
    return [(record["body"], record["attributes"]["ApproximateReceiveCount"])
            for invocation in list(fake.invocations) for record in records(invocation)]


def test_batch_item_failures_fail_just_the_listed_records(
    daemon: Callable[..., Daemon], aws_env: dict[str, str], fake_lambda: FakeLambda,
    sqs: Any, make_queue: Callable[..., Queue], tmp_path: Path,
) -> None:
    queue = make_queue()

    def fail_b(invocation: Invocation) -> LambdaReply:
        failed = [{"itemIdentifier": r["messageId"]} for r in records(invocation) if r["body"] == "b"]
        return lambda_result({"batchItemFailures": failed})

    fake_lambda.respond = fail_b
    send_batch(sqs, queue.url, ["a", "b", "c"])
    proc = start(daemon, aws_env, fake_lambda, tmp_path, queue)
    wait_until(lambda: ("b", "3") in deliveries(fake_lambda), 60,
               message=lambda: f"deliveries: {deliveries(fake_lambda)}")
    assert proc.alive()
    assert proc.stop(timeout=30) == 0

    first = fake_lambda.invocations[0]
    assert sorted(r["body"] for r in records(first)) == ["a", "b", "c"]  # one receive, one invocation
    seen = deliveries(fake_lambda)
    assert [d for d in seen if d[0] != "b"] == [("a", "1"), ("c", "1")]  # deleted after one success
    assert [count for body, count in seen if body == "b"] == ["1", "2", "3"]
    # b stays (not drained here: a watcher's long poll abandoned at stop may be holding it)
    assert count_messages(sqs, queue.url) == 1
    assert "delivered=2" in proc.output()


def test_function_error_fails_the_whole_batch(
    daemon: Callable[..., Daemon], aws_env: dict[str, str], fake_lambda: FakeLambda,
    sqs: Any, make_queue: Callable[..., Queue], tmp_path: Path,
) -> None:
    queue = make_queue()
    fake_lambda.reply(lambda_function_error("kaboom", "ValueError"))
    send_batch(sqs, queue.url, ["a", "b", "c"])
    proc = start(daemon, aws_env, fake_lambda, tmp_path, queue)
    wait_until(lambda: {("a", "2"), ("b", "2"), ("c", "2")} <= set(deliveries(fake_lambda)), 60,
               message=lambda: f"deliveries: {deliveries(fake_lambda)}")
    assert proc.alive()
    assert proc.stop(timeout=30) == 0

    assert sorted(r["body"] for r in records(fake_lambda.invocations[0])) == ["a", "b", "c"]
    assert count_messages(sqs, queue.url) == 3
    log = proc.output()
    assert "FunctionError" in log and "ValueError: kaboom" in log
    assert "delivered=0" in log


def test_throttle_leaves_messages_and_pauses_then_success_deletes(
    daemon: Callable[..., Daemon], aws_env: dict[str, str], fake_lambda: FakeLambda,
    sqs: Any, make_queue: Callable[..., Queue], tmp_path: Path,
) -> None:
    queue = make_queue()
    fake_lambda.script(lambda_throttle(), lambda_throttle(), then=lambda_result(None))
    send_batch(sqs, queue.url, ["a", "b"])
    proc = start(daemon, aws_env, fake_lambda, tmp_path, queue)
    fake_lambda.wait_for_invocations(2, timeout=60)
    assert count_messages(sqs, queue.url) == 2  # throttled: nothing deleted
    wait_until(lambda: count_messages(sqs, queue.url) == 0, 60,
               message=lambda: f"deliveries: {deliveries(fake_lambda)}")
    assert proc.alive()  # a throttled function is a pause, not a crash
    assert proc.stop(timeout=30) == 0

    invocations = fake_lambda.invocations
    assert [sorted(r["body"] for r in records(i)) for i in invocations] == [["a", "b"]] * 3
    assert [records(i)[0]["attributes"]["ApproximateReceiveCount"] for i in invocations] == ["1", "2", "3"]
    gaps = [later.arrived - earlier.arrived for earlier, later in zip(invocations, invocations[1:])]
    print("gaps between throttled invocations:", [f"{gap:.1f}s" for gap in gaps])
    assert all(gap >= 0.9 for gap in gaps), gaps  # backed off, not retried at once
    # two messages, throttled twice: overloads under the default overload = "backpressure"
    assert proc.output().count("is overloaded, slowing down; retrying") == 4
    assert "TooManyRequestsException" in proc.output()
    assert "delivered=2" in proc.output()
