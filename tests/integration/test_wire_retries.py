"""The wire retries as botocore's standard mode does, and settlements are retried until each
message's own deadline: throttles, 5xx, resets and answers nobody expected, on real sockets."""

from __future__ import annotations

import json
import logging
import random
import time
from collections.abc import Callable
from typing import Any

import botocore.exceptions
import pytest

from tests.integration.test_sqs_wire import RawServer, credentials, http_reply, raw_server  # noqa: F401
from tests.support import Queue, count_messages, wait_until
from tests.support.faults import INTERNAL_ERROR, THROTTLED, FaultySqs, aws_error, faulty_sqs_fixture  # noqa: F401
from tests.support.http_app import Reply
from workerless_gevent.aws.clients import build_clients
from workerless_gevent.config.model import AwsConfig, Config, HttpTargetConfig, QueueConfig
from workerless_gevent.delivery.batch_failures import RETRY_CAP_SECONDS, BatchEntry
from workerless_gevent.message import Message
from workerless_gevent.metrics import OVERALL, Registry
from workerless_gevent.wire.retries import RETRY_COST, Retrier, RetryBudget
from workerless_gevent.delivery.queue import SqsQueue
from workerless_gevent.lifecycle.assembly import build_parts
from workerless_gevent.wire.sqs import SqsWire

JSON = {"Content-Type": "application/x-amz-json-1.0"}
THROTTLE_REPLY = http_reply(400, json.dumps({"__type": "com.amazonaws.sqs#ThrottlingException",
                                             "message": "Rate exceeded"}).encode(),
                            {**JSON, "x-amzn-query-error": "RequestThrottled;Sender"})
SUCCESS_REPLY = http_reply(200, b'{"Successful":[],"Failed":[]}', JSON)


def wire_to(server: RawServer, budget: RetryBudget | None = None) -> SqsWire:
    return SqsWire(server.url, "us-east-1", credentials(), concurrency=2, read_timeout=5,
                   retrier=Retrier(random.Random(7), budget))


def test_throttles_and_resets_are_retried_with_jittered_backoff_until_the_third_attempt(
    raw_server: Callable[..., RawServer],  # noqa: F811
) -> None:
    answers = iter([THROTTLE_REPLY, None, SUCCESS_REPLY])  # a throttle, a reset, then the answer
    server = raw_server(lambda connection, nth, request: next(answers))
    started = time.monotonic()
    assert wire_to(server).delete_message_batch(QueueUrl="q", Entries=[])["Successful"] == []
    assert len(server.requests) == 3
    assert time.monotonic() - started < 1 + 2 + 1  # at most 1 s, then 2 s of jittered pause


@pytest.mark.parametrize(("reply", "attempts"), [
    (THROTTLE_REPLY, 3),
    (http_reply(503, b"<html>busy</html>"), 3),
    (http_reply(403, json.dumps({"__type": "com.amazon.coral.service#InvalidSignatureException",
                                 "message": "bad signature"}).encode(), JSON), 1),
    (http_reply(400, json.dumps({"__type": "com.amazonaws.sqs#QueueDoesNotExist", "message": "gone"}).encode(),
                {**JSON, "x-amzn-query-error": "AWS.SimpleQueueService.NonExistentQueue;Sender"}), 1),
], ids=["throttle", "503", "403", "no-such-queue"])
def test_retryable_errors_get_three_attempts_and_others_one(
    raw_server: Callable[..., RawServer], reply: bytes, attempts: int,  # noqa: F811
) -> None:
    server = raw_server(lambda connection, nth, request: reply)
    with pytest.raises(botocore.exceptions.ClientError):
        wire_to(server).receive_message(QueueUrl="q", WaitTimeSeconds=0)
    assert len(server.requests) == attempts


def test_an_empty_retry_budget_stops_retries_and_successes_refill_it(
    raw_server: Callable[..., RawServer],  # noqa: F811
) -> None:
    failing = [True]
    server = raw_server(lambda connection, nth, request: THROTTLE_REPLY if failing[0] else SUCCESS_REPLY)
    budget = RetryBudget(tokens=2 * RETRY_COST)
    wire = wire_to(server, budget)
    with pytest.raises(botocore.exceptions.ClientError):
        wire.delete_message_batch(QueueUrl="q", Entries=[])
    assert (len(server.requests), budget.tokens) == (3, 0)
    with pytest.raises(botocore.exceptions.ClientError):  # no budget: one attempt, no storm
        wire.delete_message_batch(QueueUrl="q", Entries=[])
    assert len(server.requests) == 4
    failing[0] = False
    wire.delete_message_batch(QueueUrl="q", Entries=[])
    assert budget.tokens == 1  # a first-try success puts one token back



def test_after_a_call_used_up_its_attempts_calls_are_tried_once_until_one_succeeds(
    raw_server: Callable[..., RawServer],  # noqa: F811
) -> None:
    """An outage costs one request per call from its first seconds, not three per call in flight."""
    failing = [True]
    server = raw_server(lambda connection, nth, request: http_reply(503, b"") if failing[0] else SUCCESS_REPLY)
    wire = wire_to(server)
    for expected in (3, 4, 5):  # the first call: 3 attempts; then one each
        with pytest.raises(botocore.exceptions.ClientError):
            wire.delete_message_batch(QueueUrl="q", Entries=[])
        assert len(server.requests) == expected
    failing[0] = False
    wire.delete_message_batch(QueueUrl="q", Entries=[])  # one attempt, and it succeeds
    failing[0] = True
    with pytest.raises(botocore.exceptions.ClientError):
        wire.delete_message_batch(QueueUrl="q", Entries=[])
    assert len(server.requests) == 6 + 3  # after a success, retries again

def test_a_deadline_stops_retries_that_would_end_after_it(raw_server: Callable[..., RawServer]) -> None:  # noqa: F811
    server = raw_server(lambda connection, nth, request: THROTTLE_REPLY)
    wire = wire_to(server)
    with pytest.raises(botocore.exceptions.ClientError):
        wire.retrier.call(lambda: wire.call_once("DeleteMessageBatch", {"QueueUrl": "q", "Entries": []}),
                          deadline=time.monotonic())
    assert len(server.requests) == 1


# ------------------------------------------------------------------ settlements through a faulty_sqs SQS


def queue_on(proxy: FaultySqs, queue: Queue, registry: Registry, **settings: Any) -> SqsQueue:
    wire = SqsWire(proxy.url, "us-east-1", credentials(), concurrency=4, read_timeout=10,
                   retrier=Retrier(random.Random(3)))
    return SqsQueue(wire, QueueConfig(name=queue.name, **settings), queue.url, queue.arn, registry.count,
                    random.Random(5))


def receive(sqs_q: SqsQueue, sqs: Any, queue: Queue, n: int) -> list[Message]:
    for i in range(n):
        sqs.send_message(QueueUrl=queue.url, MessageBody=f"m{i}")
    messages: list[Message] = []
    wait_until(lambda: messages.extend(sqs_q.receive(10, 0)) or len(messages) >= n, 10, message="not received")
    return messages


def visible_messages(sqs: Any, queue: Queue) -> int:
    attributes = sqs.get_queue_attributes(QueueUrl=queue.url, AttributeNames=["ApproximateNumberOfMessages"])
    return int(attributes["Attributes"]["ApproximateNumberOfMessages"])


def fail_next(proxy: FaultySqs, action: str, times: int, reply: Reply | Callable[[dict[str, Any]], Reply]) -> None:
    left = [times]

    def fault(seen: str, params: dict[str, Any]) -> Reply | None:
        if seen != action or left[0] <= 0:
            return None
        left[0] -= 1
        return reply(params) if callable(reply) else reply

    proxy.fault = fault


def test_a_throttled_delete_batch_is_retried_until_it_lands(
    faulty_sqs: FaultySqs, sqs: Any, make_queue: Callable[..., Queue],
) -> None:
    queue, registry = make_queue(), Registry()
    sqs_q = queue_on(faulty_sqs, queue, registry, visibility_timeout=60)
    messages = receive(sqs_q, sqs, queue, 5)
    fail_next(faulty_sqs, "DeleteMessageBatch", 5, THROTTLED)  # more than one call's 3 attempts
    for message in messages:
        sqs_q.delete(message)
    wait_until(lambda: count_messages(sqs, queue.url) == 0, 30, message="throttled deletes never landed")
    wait_until(lambda: sqs_q.pending_count() == 0, 10, message="entries left pending")
    assert faulty_sqs.faulted_count("DeleteMessageBatch") == 5
    assert registry.total("DeleteFailed") == 0


def test_retryable_entry_failures_and_entries_the_answer_leaves_out_are_retried(
    faulty_sqs: FaultySqs, sqs: Any, make_queue: Callable[..., Queue],
) -> None:
    queue, registry = make_queue(), Registry()
    sqs_q = queue_on(faulty_sqs, queue, registry, visibility_timeout=60)
    messages = receive(sqs_q, sqs, queue, 3)

    def partial(params: dict[str, Any]) -> Reply:  # entry 0 failed on SQS's side, entry 1 missing, 2 "done"
        ids = [entry["Id"] for entry in params["Entries"]]
        body = {"Successful": [{"Id": ids[-1]}],
                "Failed": [{"Id": ids[0], "Code": "InternalError", "SenderFault": False, "Message": "oops"},
                           {"Id": "99", "Code": "InternalError", "SenderFault": False, "Message": "not ours"}]}
        return 200, JSON, json.dumps(body).encode()

    fail_next(faulty_sqs, "ChangeMessageVisibilityBatch", 1, partial)
    for message in messages:
        sqs_q.change_visibility(message, 0)
    wait_until(lambda: sqs_q.pending_count() == 0, 20, message="retries never finished")
    # the third "Successful" entry never reached SQS: only the retried two are visible again
    wait_until(lambda: visible_messages(sqs, queue) == 2, 10, message="retried changes not applied")
    assert registry.total("VisibilityFailed") == 0 and registry.total("InternalErrors", OVERALL) == 0


@pytest.mark.parametrize("body", [b"not json at all", b'{"Successful": "yes", "Failed": 7}', b"[1, 2]"],
                         ids=["not-json", "wrong-shapes", "not-an-object"])
def test_an_answer_nobody_expected_costs_a_retry_not_the_flusher(
    faulty_sqs: FaultySqs, sqs: Any, make_queue: Callable[..., Queue], body: bytes,
) -> None:
    queue, registry = make_queue(), Registry()
    sqs_q = queue_on(faulty_sqs, queue, registry, visibility_timeout=60)
    first, second = receive(sqs_q, sqs, queue, 2)
    fail_next(faulty_sqs, "DeleteMessageBatch", 4, (200, JSON, body))
    sqs_q.delete(first)
    wait_until(lambda: count_messages(sqs, queue.url) == 1, 30, message="the delete never landed")
    sqs_q.delete(second)  # the flusher still works afterwards
    wait_until(lambda: count_messages(sqs, queue.url) == 0, 10, message="the flusher is gone")
    assert registry.total("DeleteFailed") == 0


def test_a_delete_that_keeps_failing_is_given_up_at_its_deadline_logged_and_counted(
    faulty_sqs: FaultySqs, sqs: Any, make_queue: Callable[..., Queue], caplog: pytest.LogCaptureFixture,
) -> None:
    queue, registry = make_queue(), Registry()
    sqs_q = queue_on(faulty_sqs, queue, registry, visibility_timeout=3)
    (message,) = receive(sqs_q, sqs, queue, 1)
    faulty_sqs.fail(INTERNAL_ERROR, ("DeleteMessageBatch",))
    started = time.monotonic()
    sqs_q.delete(message)
    wait_until(lambda: registry.total("DeleteFailed", queue.name) == 1, 30, message="never given up")
    # the message's visibility (3 s, at least 5 s of retries) bounds the retries, give or take one cap
    assert time.monotonic() - started < 5 + RETRY_CAP_SECONDS + 3 * 2
    assert sqs_q.pending_count() == 0
    wait_until(lambda: sqs_q.batchers["delete"].flusher is None, 10, message="the flusher never ended")  # logs then
    assert faulty_sqs.faulted_count("DeleteMessageBatch") >= 2
    assert f"message={message.message_id}" in caplog.text and "SQS will deliver them again" in caplog.text


def test_a_queue_that_is_gone_is_given_up_at_once(
    faulty_sqs: FaultySqs, sqs: Any, make_queue: Callable[..., Queue],
) -> None:
    queue, registry = make_queue(), Registry()
    sqs_q = queue_on(faulty_sqs, queue, registry, visibility_timeout=60)
    (message,) = receive(sqs_q, sqs, queue, 1)
    faulty_sqs.fail(aws_error(400, "AWS.SimpleQueueService.NonExistentQueue", "gone"), ("DeleteMessageBatch",))
    sqs_q.delete(message)
    wait_until(lambda: registry.total("DeleteFailed", queue.name) == 1, 10, message="not given up")
    assert faulty_sqs.faulted_count("DeleteMessageBatch") == 1  # a sender fault is not repeated


def test_while_delete_batches_fail_one_probe_at_a_time_goes_out_and_the_rest_follows_once_one_lands(
    faulty_sqs: FaultySqs, sqs: Any, make_queue: Callable[..., Queue], caplog: pytest.LogCaptureFixture,
) -> None:
    """An SQS outage for the batch calls: no retry storm (each failed call probes alone, after a pause
    growing to RETRY_CAP_SECONDS), no log flood (one WARNING, one INFO at the end), then everything lands."""
    queue, registry = make_queue(), Registry()
    sqs_q = queue_on(faulty_sqs, queue, registry, visibility_timeout=120)
    messages = receive(sqs_q, sqs, queue, 50)
    caplog.set_level("INFO", logger="workerless_gevent")
    faulty_sqs.fail(INTERNAL_ERROR, ("DeleteMessageBatch",))
    outage_started = time.monotonic()
    for message in messages:
        sqs_q.delete(message)
    wait_until(lambda: time.monotonic() - outage_started >= 12, 20, interval=0.5)
    calls = faulty_sqs.faulted_count("DeleteMessageBatch")
    after_first_wave = faulty_sqs.faulted_count("DeleteMessageBatch", since=outage_started + 4)
    faulty_sqs.heal()
    healed = time.monotonic()
    wait_until(lambda: count_messages(sqs, queue.url) == 0, 20, message="deletes never landed after the outage")
    landed = time.monotonic() - healed
    # The first wave: the 5 batches of the 50 deletes, each tried up to 3 times by the wire (fewer once one
    # has used up its attempts). After it, one probe per pause (0.25-0.5 s, doubling to 2.5-5 s: probes
    # start at about 0.3, 1, 2.3, 5, 8.5, 12 s at the earliest), not 5 batches x 3 attempts per round.
    assert calls <= 5 * 3 + 7 and after_first_wave <= 4, (calls, after_first_wave)
    assert landed <= RETRY_CAP_SECONDS + 2, landed
    assert registry.total("DeleteFailed") == 0 and registry.total("InternalErrors", OVERALL) == 0
    lines = [(record.levelname, record.getMessage()) for record in caplog.records
             if f"queue={queue.name} " in record.getMessage()]
    assert len(lines) == 2, lines
    assert lines[0][0] == "WARNING" and lines[0][1].startswith(f"queue={queue.name} delete batches are failing ("), lines
    assert lines[1][0] == "INFO" and lines[1][1].startswith(f"queue={queue.name} delete batches succeed again after "), lines


def test_deletes_given_up_in_an_outage_are_counted_at_once_and_logged_together_with_their_ids(
    faulty_sqs: FaultySqs, sqs: Any, make_queue: Callable[..., Queue], caplog: pytest.LogCaptureFixture,
) -> None:
    queue, registry = make_queue(), Registry()
    sqs_q = queue_on(faulty_sqs, queue, registry, visibility_timeout=3)
    messages = receive(sqs_q, sqs, queue, 25)
    caplog.set_level("INFO", logger="workerless_gevent")
    faulty_sqs.fail(THROTTLED, ("DeleteMessageBatch",))
    for message in messages:
        sqs_q.delete(message)
    wait_until(lambda: registry.total("DeleteFailed", queue.name) == 25, 30, message="never given up")
    wait_until(lambda: sqs_q.pending_count() == 0 and sqs_q.batchers["delete"].flusher is None, 10)
    errors = [record.getMessage() for record in caplog.records
              if record.levelname == "ERROR" and f"queue={queue.name} " in record.getMessage()]
    assert len(errors) == 1, errors  # every give-up of the episode in one line, with every id
    assert all(message.message_id in errors[0] for message in messages), errors
    assert "gave up on delete of 25 messages" in errors[0] and "SQS will deliver them again" in errors[0]
    assert faulty_sqs.faulted_count("DeleteMessageBatch") <= 3 * 3 + 3  # 3 batches x 3 attempts, then probes


def test_the_stop_probes_a_failing_batch_call_at_once_instead_of_waiting_out_the_pause(
    faulty_sqs: FaultySqs, sqs: Any, make_queue: Callable[..., Queue],
) -> None:
    queue, registry = make_queue(), Registry()
    sqs_q = queue_on(faulty_sqs, queue, registry, visibility_timeout=120)
    messages = receive(sqs_q, sqs, queue, 5)
    faulty_sqs.fail(INTERNAL_ERROR, ("DeleteMessageBatch",))
    for message in messages:
        sqs_q.delete(message)
    batcher = sqs_q.batchers["delete"]
    wait_until(lambda: batcher.streak.length >= 4 and batcher.calls == 0, 30, message="the calls never kept failing")
    assert batcher.streak.resume_at - time.monotonic() > 1.0  # a long pause ahead (2-4 s at this streak)
    faulty_sqs.heal()
    started = time.monotonic()
    sqs_q.flush(5.0)  # what the stop does
    assert time.monotonic() - started < 1.0
    assert count_messages(sqs, queue.url) == 0 and registry.total("DeleteFailed") == 0


def test_a_streak_of_any_length_keeps_its_pause_and_gives_entries_up_counted(
    faulty_sqs: FaultySqs, sqs: Any, make_queue: Callable[..., Queue],
) -> None:
    """Hours of failed probes (a streak in the thousands) must not overflow the pause's doubling."""
    queue, registry = make_queue(), Registry()
    sqs_q = queue_on(faulty_sqs, queue, registry, visibility_timeout=3)
    messages = receive(sqs_q, sqs, queue, 3)
    faulty_sqs.fail(INTERNAL_ERROR, ("DeleteMessageBatch",))
    batcher = sqs_q.batchers["delete"]
    batcher.streak.length = 5000  # as after hours of failed probes
    for message in messages:
        sqs_q.delete(message)
    wait_until(lambda: registry.total("DeleteFailed", queue.name) == 3, 30, message="not given up")
    assert registry.total("InternalErrors", OVERALL) == 0
    assert faulty_sqs.faulted_count("DeleteMessageBatch") <= 3  # 5 s of retries: probes 2.5-5 s apart


def test_a_flapping_endpoint_is_announced_once_not_at_every_flap(
    faulty_sqs: FaultySqs, sqs: Any, make_queue: Callable[..., Queue], caplog: pytest.LogCaptureFixture,
) -> None:
    """Three failed requests (a call's every attempt), then one that succeeds, again and again: after the
    first announced recovery, a streak must last 10 s to be announced again."""
    queue, registry = make_queue(), Registry()
    sqs_q = queue_on(faulty_sqs, queue, registry, visibility_timeout=120)
    messages = receive(sqs_q, sqs, queue, 10)
    caplog.set_level("INFO", logger="workerless_gevent")
    seen = [0]

    def flap(action: str, params: dict[str, Any]) -> Reply | None:
        if action != "DeleteMessageBatch":
            return None
        seen[0] += 1
        return INTERNAL_ERROR if seen[0] % 4 else None

    faulty_sqs.fault = flap
    for message in messages:  # one call each, spaced past the batching delay
        sqs_q.delete(message)
        wait_until(lambda: sqs_q.pending_count() == 0, 30, interval=0.05, message="a delete never landed")
    assert count_messages(sqs, queue.url) == 0 and registry.total("DeleteFailed") == 0
    flaps = sum(1 for record in caplog.records if f"queue={queue.name} delete batches succeed again" in record.getMessage())
    lines = [(record.levelname, record.getMessage()[:60]) for record in caplog.records  # this test's queue only:
             if f"queue={queue.name} " in record.getMessage() and record.levelno >= logging.INFO]  # others' may linger
    assert faulty_sqs.faulted_count("DeleteMessageBatch") >= 3 * 5, "the endpoint did not flap 5 times"
    assert [level for level, _ in lines] == ["WARNING", "INFO"], lines
    assert flaps == 1


def test_the_queues_the_daemon_builds_stop_batch_retries_at_the_deadline(
    faulty_sqs: FaultySqs, sqs: Any, make_queue: Callable[..., Queue],
) -> None:
    """Built as `Engine` builds them (`build_clients`, then `setup.build_parts`), a queue's batch calls reach
    the wire with their deadline: a throttled call is not retried past it, and is retried before it."""
    queue = make_queue()
    config = Config(source="test", queues=(QueueConfig(name=queue.name, visibility_timeout=60),),
                    aws=AwsConfig(endpoint_url=faulty_sqs.url, region="us-east-1"),
                    targets={"default": HttpTargetConfig(name="default", url="http://127.0.0.1:9/")})
    parts = build_parts(config, build_clients(config), Registry(), random.Random(3))
    sqs_q = parts.queues[queue.name]
    (message,) = receive(sqs_q, sqs, queue, 1)
    faulty_sqs.fail(THROTTLED, ("DeleteMessageBatch",))
    send = sqs_q.batchers["delete"].send
    entry = BatchEntry(message, None, message.visible_until)
    with pytest.raises(botocore.exceptions.ClientError):
        send([entry], time.monotonic())  # its deadline is now: a retry would end after it
    assert faulty_sqs.faulted_count("DeleteMessageBatch") == 1
    with pytest.raises(botocore.exceptions.ClientError):
        send([entry], time.monotonic() + 60)
    assert faulty_sqs.faulted_count("DeleteMessageBatch") == 1 + 3  # botocore's standard mode: 3 attempts
