"""Targets over real sockets: HttpTarget against the pywsgi app, LambdaTarget against the stand-in."""

from __future__ import annotations

import json
import random
import socket
import time
from typing import Any, Callable

import gevent
import pytest

from tests.integration.helpers import receive_exactly
from tests.support import (
    FakeLambda,
    HttpApp,
    Invocation,
    LambdaReply,
    lambda_function_error,
    lambda_result,
    lambda_service_error,
    lambda_throttle,
)
from tests.support.moto import build_client
from workerless_gevent.config.model import HttpTargetConfig, LambdaTargetConfig
from workerless_gevent.message import Message
from workerless_gevent.delivery.queue import SqsQueue
from workerless_gevent.targets import QueueInfo, Result
from workerless_gevent.targets.aws_lambda import LambdaTarget
from workerless_gevent.targets.http import HttpTarget


def received(sqs: Any, queue: SqsQueue, bodies: list[str], **attributes: Any) -> list[Message]:
    """Real messages: sent to moto and received back through SqsQueue."""
    for body in bodies:
        sqs.send_message(QueueUrl=queue.url, MessageBody=body, **attributes)
    return receive_exactly(queue, len(bodies))


def info(queue: SqsQueue) -> QueueInfo:
    return QueueInfo(name=queue.name, arn=queue.arn, region="us-east-1", is_fifo=False)


def http_target(app_url: str, **settings: Any) -> HttpTarget:
    return HttpTarget(HttpTargetConfig(name="default", url=app_url + "/work", **settings))


# --- HTTP ---------------------------------------------------------------------------------------

@pytest.mark.parametrize(("status", "headers", "result", "error_type"), [
    (200, {}, Result.SUCCESS, ""),
    (204, {}, Result.SUCCESS, ""),
    (500, {}, Result.FAILURE, "HTTP 500"),
    (404, {}, Result.FAILURE, "HTTP 404"),
    (302, {"Location": "/elsewhere"}, Result.FAILURE, "HTTP 302"),  # redirects are not followed
    (503, {}, Result.FAILURE, "HTTP 503"),  # without Retry-After, under overload = "failure", a plain failure
    (503, {"Retry-After": "3"}, Result.RETRY, "HTTP 503"),
    (429, {"Retry-After": "1"}, Result.RETRY, "HTTP 429"),
])
def test_http_status_becomes_the_outcome(
    http_app: HttpApp, sqs: Any, sqs_queue: Callable[..., SqsQueue],
    status: int, headers: dict[str, str], result: Result, error_type: str,
) -> None:
    queue = sqs_queue()
    (message,) = received(sqs, queue, ["x"])
    http_app.set_status(status, headers)
    target = http_target(http_app.url, overload="failure")
    (outcome,) = target.deliver(info(queue), [message])
    assert (outcome.result, outcome.error_type) == (result, error_type)
    if result is Result.RETRY:
        assert outcome.retry_after_seconds == float(headers["Retry-After"])
        assert target.pause.remaining_seconds() > 0
    else:
        assert target.pause.remaining_seconds() <= 0
    assert [request.path for request in http_app.requests] == ["/work"]
    target.close()


@pytest.mark.parametrize(("status", "headers", "result"), [
    (429, {}, Result.OVERLOADED),
    (503, {}, Result.OVERLOADED),
    (503, {"Retry-After": "soon"}, Result.OVERLOADED),  # a Retry-After we cannot read says no more than none
    (429, {"Retry-After": "2"}, Result.RETRY),
    (500, {}, Result.FAILURE),
])
def test_busy_without_retry_after_is_an_overload_under_backpressure(
    http_app: HttpApp, sqs: Any, sqs_queue: Callable[..., SqsQueue],
    status: int, headers: dict[str, str], result: Result,
) -> None:
    queue = sqs_queue()
    (message,) = received(sqs, queue, ["x"])
    http_app.set_status(status, headers)
    target = http_target(http_app.url)  # overload = "backpressure" is the default
    (outcome,) = target.deliver(info(queue), [message])
    assert (outcome.result, outcome.error_type) == (result, f"HTTP {status}")
    assert (target.pause.remaining_seconds() > 0) == (result is Result.RETRY)  # an overload pauses nothing
    target.close()


def test_beanstalk_path_attribute_routes_the_post(
    http_app: HttpApp, sqs: Any, sqs_queue: Callable[..., SqsQueue]
) -> None:
    queue = sqs_queue()
    path = {"beanstalk.sqsd.path": {"DataType": "String", "StringValue": "/cron/cleanup"}}
    (message,) = received(sqs, queue, ["task"], MessageAttributes=path)
    target = http_target(http_app.url)
    (outcome,) = target.deliver(info(queue), [message])
    assert outcome.is_success
    (request,) = http_app.requests
    assert request.path == "/cron/cleanup"
    assert request.headers["x-aws-sqsd-path"] == "/cron/cleanup"
    target.close()


def test_connection_refused_is_a_failure(sqs: Any, sqs_queue: Callable[..., SqsQueue]) -> None:
    with socket.socket() as sock:  # a port nobody listens on
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    queue = sqs_queue()
    (message,) = received(sqs, queue, ["x"])
    target = http_target(f"http://127.0.0.1:{port}", connect_timeout=2)
    started = time.monotonic()
    (outcome,) = target.deliver(info(queue), [message])
    assert outcome.result is Result.FAILURE and outcome.error_type
    assert time.monotonic() - started < 5
    target.close()


def test_no_response_within_inactivity_timeout_is_a_failure(
    http_app: HttpApp, sqs: Any, sqs_queue: Callable[..., SqsQueue]
) -> None:
    queue = sqs_queue()
    (message,) = received(sqs, queue, ["x"])
    http_app.delay = 5
    target = http_target(http_app.url, inactivity_timeout=1, connect_timeout=1)
    started = time.monotonic()
    (outcome,) = target.deliver(info(queue), [message])
    elapsed = time.monotonic() - started
    assert outcome.result is Result.FAILURE, outcome
    assert 0.9 <= elapsed < 3, elapsed
    target.close()


def test_max_connections_caps_concurrent_posts(
    http_app: HttpApp, sqs: Any, sqs_queue: Callable[..., SqsQueue]
) -> None:
    queue = sqs_queue()
    messages = received(sqs, queue, [f"m{i}" for i in range(9)])
    http_app.delay = 0.2
    target = http_target(http_app.url, max_connections=3)
    jobs = [gevent.spawn(target.deliver, info(queue), [message]) for message in messages]
    gevent.joinall(jobs, timeout=30, raise_error=True)
    assert all(job.value[0].is_success for job in jobs)
    assert http_app.max_concurrent == 3
    assert sorted(r.body for r in http_app.requests) == sorted(f"m{i}".encode() for i in range(9))
    target.close()


# --- Lambda -------------------------------------------------------------------------------------

def lambda_target(fake: FakeLambda, **settings: Any) -> LambdaTarget:
    client = build_client("lambda", fake.url, retries={"mode": "standard", "total_max_attempts": 1})
    config = LambdaTargetConfig(name="default", function="fn", **settings)
    return LambdaTarget(config, client, random.Random(7))


def fail_ids(pick: Callable[[list[dict[str, Any]]], list[Any]]) -> Callable[[Invocation], LambdaReply]:
    return lambda inv: lambda_result({"batchItemFailures": pick(inv.payload["Records"])})


@pytest.mark.parametrize(("respond", "expected"), [
    (lambda inv: lambda_result(None), ["success"] * 3),
    (lambda inv: lambda_result({"batchItemFailures": []}), ["success"] * 3),
    (lambda inv: lambda_result({"batchItemFailures": None}), ["success"] * 3),
    (lambda inv: lambda_result({"statusCode": 200}), ["success"] * 3),
    (lambda inv: lambda_result(b""), ["success"] * 3),
    (fail_ids(lambda records: [{"itemIdentifier": records[1]["messageId"]}]), ["success", "failure", "success"]),
    (fail_ids(lambda records: [{"itemIdentifier": "not-in-this-batch"}]), ["failure"] * 3),
    (fail_ids(lambda records: [{"itemIdentifier": ""}]), ["failure"] * 3),
    (fail_ids(lambda records: [{"itemId": records[0]["messageId"]}]), ["failure"] * 3),
    (lambda inv: lambda_result(b"{not json"), ["failure"] * 3),
    (lambda inv: lambda_function_error(), ["failure"] * 3),
    (lambda inv: lambda_service_error(500, "ServiceException", "internal"), ["failure"] * 3),
    (lambda inv: lambda_service_error(404, "ResourceNotFoundException", "no such function"), ["failure"] * 3),
    (lambda inv: lambda_throttle(), ["overloaded"] * 3),  # overload = "backpressure", the default
], ids=["null", "empty-list", "null-list", "no-key", "empty-body", "one-listed", "unknown-id", "empty-id",
        "mis-keyed-id", "invalid-json", "function-error", "service-500", "not-found", "throttle"])
def test_lambda_response_becomes_per_record_outcomes(
    fake_lambda: FakeLambda, sqs: Any, sqs_queue: Callable[..., SqsQueue],
    respond: Callable[[Invocation], LambdaReply], expected: list[str],
) -> None:
    queue = sqs_queue()
    messages = received(sqs, queue, ["a", "b", "c"])
    fake_lambda.respond = respond
    target = lambda_target(fake_lambda)
    outcomes = target.deliver(info(queue), messages)
    assert [outcome.result.value for outcome in outcomes] == expected
    (invocation,) = fake_lambda.invocations  # one invocation, no client-side retry
    assert [r["messageId"] for r in invocation.payload["Records"]] == [m.message_id for m in messages]
    assert (target.pause.remaining_seconds() > 0) == (expected[0] in ("retry", "overloaded"))


def test_lambda_qualifier_is_sent(fake_lambda: FakeLambda, sqs: Any, sqs_queue: Callable[..., SqsQueue]) -> None:
    queue = sqs_queue()
    messages = received(sqs, queue, ["a"])
    target = lambda_target(fake_lambda, qualifier="live")
    assert target.deliver(info(queue), messages)[0].is_success
    (invocation,) = fake_lambda.invocations
    assert (invocation.function_name, invocation.qualifier) == ("fn", "live")
    assert json.loads(invocation.raw) == invocation.payload


def test_lambda_throttles_in_a_row_back_off_longer(
    fake_lambda: FakeLambda, sqs: Any, sqs_queue: Callable[..., SqsQueue]
) -> None:
    queue = sqs_queue()
    messages = received(sqs, queue, ["a"])
    fake_lambda.reply(lambda_throttle())
    target = lambda_target(fake_lambda, overload="failure")  # today's throttle: a retry after the backoff
    waits = [target.deliver(info(queue), messages)[0].retry_after_seconds or 0.0 for _ in range(4)]
    assert all(later_cap <= 60 for later_cap in waits)
    assert waits[3] > waits[0]  # ceilings 2, 4, 8, 16 s: jittered, but the fourth beats the first
    fake_lambda.reply(lambda_result(None))
    assert target.deliver(info(queue), messages)[0].is_success
    assert target.throttles_in_a_row == 0
