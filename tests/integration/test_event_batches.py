"""The two targets that send the SQS event, over real sockets (the HTTP batch target to a local app, the Lambda
target to the stand-in Invoke API) with messages received from moto: parts under 6 MB as they are sent, as many
as the lease counts, a FIFO batch that stops at its first part that did not succeed, the hub free while a large
batch is encoded, and an answer read only so far."""

from __future__ import annotations

import json
import random
import time
from typing import Any, Callable

import gevent
import gevent.event
import pytest

from tests.integration.helpers import receive_exactly
from tests.support import FakeLambda, HttpApp, Invocation, LambdaReply, lambda_result
from tests.support.faults import Answer, FaultyApp, Trickle, faulty_app_fixture  # noqa: F401 (fixture)
from tests.support.moto import build_client
from tests.unit.sqs_messages import make_message
from workerless_gevent.config.model import HttpTargetConfig, LambdaTargetConfig
from workerless_gevent.delivery.queue import SqsQueue
from workerless_gevent.message import Message
from workerless_gevent.targets import QueueInfo, Result
from workerless_gevent.targets.aws_lambda import LambdaTarget
from workerless_gevent.targets.event_parts import MAX_PAYLOAD_BYTES
from workerless_gevent.targets.http_batch import BatchHttpTarget

MIB = 1024 * 1024
# 800 KB of UTF-8 each, sent as 2.4 MB (\ud83d\ude00 for each emoji): the lease was once sized by the UTF-8
EMOJI_BODIES = [f"{i}" + "\U0001F600" * 200_000 for i in range(10)]


def received(sqs: Any, queue: SqsQueue, bodies: list[str], group: str | None = None) -> list[Message]:
    """Real messages, sent one by one (each near SQS's 1 MiB) and received back through SqsQueue."""
    for index, body in enumerate(bodies):
        fifo = {"MessageGroupId": group, "MessageDeduplicationId": str(index)} if group else {}
        sqs.send_message(QueueUrl=queue.url, MessageBody=body, **fifo)
    messages = receive_exactly(queue, len(bodies))
    assert [message.body for message in messages] == bodies
    return messages


def info(queue: SqsQueue, is_fifo: bool = False) -> QueueInfo:
    return QueueInfo(name=queue.name, arn=queue.arn, region="us-east-1", is_fifo=is_fifo)


def batch_target(url: str, **settings: Any) -> BatchHttpTarget:
    return BatchHttpTarget(HttpTargetConfig(name="default", url=url + "/sqs", batch_size=10, **settings))


def lambda_target(fake: FakeLambda) -> LambdaTarget:
    client = build_client("lambda", fake.url, retries={"mode": "standard", "total_max_attempts": 1})
    return LambdaTarget(LambdaTargetConfig(name="default", function="fn", timeout=20), client, random.Random(7))


def test_a_batch_posts_its_parts_as_sent_under_6_mb_and_its_lease_counts_exactly_those(
    http_app: HttpApp, sqs: Any, sqs_queue: Callable[..., SqsQueue],
) -> None:
    queue = sqs_queue()
    messages = received(sqs, queue, EMOJI_BODIES)
    target = batch_target(http_app.url)
    deadline = target.deadline_seconds(info(queue), messages)
    outcomes = target.deliver(info(queue), messages)
    target.close()

    assert [outcome.result for outcome in outcomes] == [Result.SUCCESS] * 10
    sizes = [len(request.body) for request in http_app.requests]
    assert all(size <= MAX_PAYLOAD_BYTES for size in sizes), sizes
    assert [record["body"] for request in http_app.requests
            for record in json.loads(request.body)["Records"]] == EMOJI_BODIES
    assert deadline == target.hard_deadline_seconds * len(sizes)  # the lease lasts through the last POST
    assert len(sizes) == 5  # two records a POST


def test_an_invocations_lease_counts_exactly_the_invokes_a_batch_goes_in(
    fake_lambda: FakeLambda, sqs: Any, sqs_queue: Callable[..., SqsQueue],
) -> None:
    queue = sqs_queue()
    messages = received(sqs, queue, EMOJI_BODIES)
    target = lambda_target(fake_lambda)
    deadline = target.deadline_seconds(info(queue), messages)
    outcomes = target.deliver(info(queue), messages)

    assert [outcome.result for outcome in outcomes] == [Result.SUCCESS] * 10
    sizes = [len(invocation.raw) for invocation in fake_lambda.invocations]
    assert all(size <= MAX_PAYLOAD_BYTES for size in sizes), sizes
    assert deadline == target.hard_deadline_seconds * len(sizes)
    assert len(sizes) == 5


def test_a_fifo_batch_of_1_mib_messages_stops_at_the_first_invocation_that_did_not_succeed(
    fake_lambda: FakeLambda, sqs: Any, sqs_queue: Callable[..., SqsQueue], make_queue: Callable[..., Any],
) -> None:
    queue = sqs_queue(make_queue(fifo=True))
    bodies = [f"{i}" + "x" * (MIB - 1) for i in range(10)]  # SQS's limit since August 2025
    messages = received(sqs, queue, bodies, group="g")

    def fail_the_second(invocation: Invocation) -> LambdaReply:
        return lambda_result({"batchItemFailures": [{"itemIdentifier": messages[1].message_id}]})

    fake_lambda.respond = fail_the_second
    outcomes = lambda_target(fake_lambda).deliver(info(queue, is_fifo=True), messages)

    (invocation,) = fake_lambda.invocations  # the second part (five more) is never invoked
    assert [record["body"] for record in invocation.payload["Records"]] == bodies[:5]
    assert len(invocation.raw) <= MAX_PAYLOAD_BYTES
    assert [outcome.result for outcome in outcomes] == [Result.SUCCESS, Result.FAILURE] + [Result.RELEASED] * 8
    assert outcomes[1].error_type == "BatchItemFailure"  # the rest of its group released behind it, not failed


def test_the_hub_turns_while_a_batch_of_thousands_of_large_records_is_measured_and_encoded(
    http_app: HttpApp,
) -> None:
    queue = QueueInfo(name="bulk", arn="arn:aws:sqs:us-east-1:123456789012:bulk", region="us-east-1", is_fifo=False)
    body = "x" * (64 * 1024)
    messages = [make_message(queue.name, message_id=f"m{i}", body=body) for i in range(2000)]  # 130 MB of JSON
    target = batch_target(http_app.url)
    gaps: list[float] = []
    done = gevent.event.Event()

    def tick() -> None:  # as the heartbeat would: wake every 10 ms
        last = time.monotonic()
        while not done.is_set():
            gevent.sleep(0.01)
            now = time.monotonic()
            gaps.append(now - last)
            last = now

    ticker = gevent.spawn(tick)
    gevent.sleep(0.02)  # ticking
    try:
        deadline = target.deadline_seconds(queue, messages)
        outcomes = target.deliver(queue, messages)
    finally:
        done.set()
        ticker.join(5)
        target.close()
    assert max(gaps) < 0.5, f"the hub stood still for {max(gaps):.2f}s"
    assert [outcome.result for outcome in outcomes] == [Result.SUCCESS] * 2000
    assert deadline == target.hard_deadline_seconds * len(http_app.requests)  # 22 POSTs of 95 records


@pytest.mark.parametrize(("status", "error_type"), [(200, "AnswerTooLarge"), (500, "HTTP 500")])
def test_an_answer_is_read_up_to_6_mb_and_no_further(
    faulty_app: FaultyApp, sqs: Any, sqs_queue: Callable[..., SqsQueue], status: int, error_type: str,
) -> None:
    queue = sqs_queue()
    messages = received(sqs, queue, ["a", "b"])
    flood = Trickle(length=400, interval=0.02, chunk=b" " * MIB)  # 400 MiB in 8 s, never idle
    faulty_app.respond = lambda request: Answer(status, {"Content-Type": "application/json"}, flood)
    target = batch_target(faulty_app.url, connect_timeout=1, inactivity_timeout=9)
    started = time.monotonic()
    outcomes = target.deliver(info(queue), messages)
    elapsed = time.monotonic() - started
    target.close()

    assert [(outcome.result, outcome.error_type) for outcome in outcomes] == [(Result.FAILURE, error_type)] * 2
    assert elapsed < 5 and flood.sent < 100, (elapsed, flood.sent)  # cut at 6 MB, not at the deadline (10 s)
