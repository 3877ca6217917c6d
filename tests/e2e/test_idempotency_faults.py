"""Idempotent delivery under the faults a production table sees, through real processes on moto: throttling
is a store failure (never "held elsewhere"), a hold pauses the keyed queue instead of receiving its messages
again and again (each receive spends one of the queue's redrive tries), and a FIFO group keeps its order
whatever its messages' keys."""

from __future__ import annotations

import datetime
import io
import json
import signal
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import gevent.event
import pytest

from tests.e2e.helpers import send_batch
from tests.e2e.test_idempotency import KEY_HEADER, config, order
from tests.support import (CountingProxy, Daemon, HttpApp, MotoServer, Queue, build_config_file, count_messages,
                           status_url, wait_until)
from tests.support.faults import FaultySqs, faulty_sqs_fixture, metric_total, sqs_env_fixture  # noqa: F401
from tests.support.http_app import Reply, headers_from_environ
from tests.support.proxy import ProxiedRequest, action_of

DYNAMODB = "com.amazonaws.dynamodb.v20120810#"


def dynamodb_error(code: str, message: str, **members: Any) -> Reply:
    body = json.dumps({"__type": DYNAMODB + code, "message": message, **members}).encode()
    return 400, {"Content-Type": "application/x-amz-json-1.0",
                 "x-amzn-RequestId": "00000000-0000-0000-0000-000000000000"}, body


def throttled_transaction(action: str, params: dict[str, Any]) -> Reply | None:
    """DynamoDB's answer to a transaction that ran out of capacity: cancelled, every item ThrottlingError (the
    wire's retries do not apply: it is not a throttling code); every other write throttled as such."""
    if action == "TransactWriteItems":
        reasons = [{"Code": "ThrottlingError", "Message": "Throughput exceeds the current capacity of your table"}
                   for _ in params.get("TransactItems", [])]
        return dynamodb_error("TransactionCanceledException", "Transaction cancelled [ThrottlingError]",
                              CancellationReasons=reasons)
    if action in ("BatchWriteItem", "DeleteItem", "UpdateItem", "PutItem"):
        return dynamodb_error("ProvisionedThroughputExceededException", "Rate of requests exceeds the allowed throughput")
    return None


def test_a_throttled_table_holds_a_keyed_queue_without_spending_its_redrive_tries(
    daemon: Callable[..., Daemon], sqs_env: dict[str, str], faulty_sqs: FaultySqs, http_app: HttpApp, sqs: Any,
    make_queue: Callable[..., Queue], claims_table: str, tmp_path: Path,
) -> None:
    """The queue's own redrive policy dead-letters at the 5th receive. A table throttled long enough for many
    back-offs must add at most 2 to any message's receive count: every message reaches the app, none the DLQ."""
    dead_letters = make_queue()
    queue = make_queue(RedrivePolicy=json.dumps({"deadLetterTargetArn": dead_letters.arn, "maxReceiveCount": "4"}))
    faulty_sqs.fault = throttled_transaction
    path = build_config_file(tmp_path, concurrency=4, shutdown_timeout=10,
                             queues=[{"name": queue.name, "idempotency_key": "body:order.id"}],
                             targets={"default": {"type": "http", "url": f"{http_app.url}/work"}},
                             tables={"idempotency": {"table": claims_table, "expires_after": 600}})
    proc = daemon(["-c", str(path), "--status=127.0.0.1:0"], env=sqs_env)
    status = status_url(proc)
    bodies = [order(f"T-{index}") for index in range(5)]
    send_batch(sqs, queue.url, bodies)
    throttled_at = time.monotonic()
    # Long enough that receiving at each back-off (1, 2, 4 ... s) would have spent 4 receives of each message.
    wait_until(lambda: time.monotonic() - throttled_at > 15 and faulty_sqs.faulted_count() >= 5, 90,
               message=lambda: f"{faulty_sqs.actions()}")
    assert metric_total(status, "workerless_idempotency_store_errors_total") >= 3
    assert http_app.requests == []
    assert "receiving nothing under a key" in proc.output() or "ThrottlingError" in proc.output()
    receives_while_throttled = sum(1 for request in list(faulty_sqs.requests)
                                   if request.action == "ReceiveMessage" and request.started >= throttled_at)
    faulty_sqs.fault = None
    http_app.wait_for_requests(5, timeout=90)
    wait_until(lambda: count_messages(sqs, queue.url) == 0, 60)
    assert proc.stop(timeout=30) == 0
    assert sorted(request.body.decode() for request in http_app.requests) == sorted(bodies)
    counts = [int(request.headers["x-aws-sqsd-receive-count"]) for request in http_app.requests]
    assert max(counts) <= 3, counts  # at most 2 receives more than a delivery without the outage
    assert count_messages(sqs, dead_letters.url) == 0
    assert "held elsewhere" not in proc.output() and "is claimed elsewhere" not in proc.output()
    # the watcher waits with the rest: one long poll may be on its way as the hold starts, not one per back-off
    assert receives_while_throttled <= 6, receives_while_throttled


@pytest.mark.parametrize("keyed", ["every other", "a key twice"])
def test_a_fifo_group_is_delivered_in_its_order_whatever_its_keys(
    keyed: str, daemon: Callable[..., Daemon], sqs_env: dict[str, str], http_app: HttpApp, sqs: Any,
    make_queue: Callable[..., Queue], claims_table: str, tmp_path: Path,
) -> None:
    """One group of 8 in one receive: messages without the key are not delivered ahead of keyed ones, and a
    keyed message deferred (its key twice in the receive) holds back the rest of its group, which follows it."""
    queue = make_queue(fifo=True)
    if keyed == "every other":
        bodies = [order(f"F-{index}", str(index)) if index % 2 else json.dumps({"note": str(index)})
                  for index in range(8)]
    else:  # 2 and 5 share a key: 5 waits for 2's claim, and 6, 7 may not overtake it
        bodies = [order("F-twice" if index in (2, 5) else f"F-{index}", str(index)) for index in range(8)]
    sqs.send_message_batch(QueueUrl=queue.url, Entries=[
        {"Id": str(index), "MessageBody": body, "MessageGroupId": "G", "MessageDeduplicationId": f"d-{index}"}
        for index, body in enumerate(bodies)])
    path = config(tmp_path, http_app, queue, claims_table, visibility_timeout=10)
    proc = daemon(["-c", str(path)], env=sqs_env)
    expected = 8 if keyed == "every other" else 7  # the copy of F-twice is deleted as a duplicate
    http_app.wait_for_requests(expected, timeout=90)
    wait_until(lambda: count_messages(sqs, queue.url) == 0, 60, message=proc.output)
    assert proc.stop(timeout=30) == 0
    notes = [json.loads(request.body)["note"] for request in http_app.requests]
    want = [str(index) for index in range(8) if not (keyed == "a key twice" and index == 5)]
    assert notes == want, notes
    if keyed == "a key twice":  # 6 and 7 waited for 5 (hidden until 2's claim lapses), not delivered past it
        assert [request.headers.get(KEY_HEADER) for request in http_app.requests][2] == "F-twice"
        line = next(line for line in proc.output().splitlines() if "key=F-twice already delivered" in line)
        duplicate_at = datetime.datetime.strptime(line[:23], "%Y-%m-%d %H:%M:%S,%f").timestamp()
        sixth = http_app.requests[5]
        sixth_at = time.time() - (time.monotonic() - sixth.arrived)
        assert sixth_at > duplicate_at - 1.0, (sixth_at, duplicate_at)  # not ~10 s before it


def most_at_once(requests: list[ProxiedRequest], action: str) -> int:
    """The most `action` requests the proxy held at one time (each from its arrival to moto's answer)."""
    edges = sorted(edge for request in requests if request.action == action and request.ended is not None
                   for edge in ((request.started, 1), (request.ended, -1)))
    most = now = 0
    for _, step in sorted(edges, key=lambda edge: (edge[0], edge[1])):
        now += step
        most = max(most, now)
    return most


def test_claims_of_deliveries_in_flight_are_extended_several_at_once(
    daemon: Callable[..., Daemon], proxied_env: dict[str, str], counting_proxy: CountingProxy, http_app: HttpApp,
    sqs: Any, make_queue: Callable[..., Queue], claims_table: str, tmp_path: Path,
) -> None:
    """Ten deliveries outlive their visibility timeout: the heartbeat extends their claims together, not one
    after another (at c=1,000, the last would lapse before it was reached)."""
    queue = make_queue()
    answer = gevent.event.Event()
    http_app.respond = lambda request: (200, {}, b"") if answer.wait(60) else (500, {}, b"")
    counting_proxy.delays["UpdateItem"] = 0.4  # ten in a row: 4 s, within one heartbeat interval (5 s)
    path = build_config_file(tmp_path, concurrency=10, shutdown_timeout=10,
                             queues=[{"name": queue.name, "idempotency_key": "body:order.id", "visibility_timeout": 10}],
                             targets={"default": {"type": "http", "url": f"{http_app.url}/work"}},
                             tables={"idempotency": {"table": claims_table, "expires_after": 600}})
    proc = daemon(["-c", str(path)], env=proxied_env)
    send_batch(sqs, queue.url, [order(f"E-{index}") for index in range(10)])
    http_app.wait_for_requests(10, timeout=60)
    wait_until(lambda: sum(1 for request in list(counting_proxy.requests)
                           if request.action == "UpdateItem" and request.ended is not None) >= 10, 60,
               message=lambda: f"{counting_proxy.actions()}")
    answer.set()
    wait_until(lambda: count_messages(sqs, queue.url) == 0, 60, message=proc.output)
    assert proc.stop(timeout=30) == 0
    at_once = most_at_once(list(counting_proxy.requests), "UpdateItem")
    assert at_once >= 5, at_once


def test_a_failed_lambda_batch_gives_its_claims_up_together(
    daemon: Callable[..., Daemon], proxied_env: dict[str, str], counting_proxy: CountingProxy,
    moto_server: MotoServer, moto_lambda_function: str, sqs: Any, make_queue: Callable[..., Queue],
    claims_table: str, tmp_path: Path,
) -> None:
    """A batch of ten keyed messages fails: its ten claims go at once, not one DeleteItem after another (each
    up to 5 s while DynamoDB is slow), before the messages are visible again."""
    queue = make_queue()
    counting_proxy.delays["DeleteItem"] = 1.0
    moto_server.queue_lambda_results({"batchItemFailures": [{"itemIdentifier": "no-such-message"}]})
    path = build_config_file(tmp_path, concurrency=1, shutdown_timeout=10,
                             queues=[{"name": queue.name, "idempotency_key": "body:order.id",
                                      "error_visibility_timeout": 1}],
                             targets={"default": {"type": "lambda", "function": moto_lambda_function,
                                                  "batch_size": 10, "max_batching_window": 2.0}},
                             tables={"idempotency": {"table": claims_table, "expires_after": 600}})
    send_batch(sqs, queue.url, [order(f"B-{index}") for index in range(10)])
    proc = daemon(["-c", str(path)], env=proxied_env)
    wait_until(lambda: count_messages(sqs, queue.url) == 0, 90, message=proc.output)
    assert proc.stop(timeout=30) == 0
    first = json.loads(moto_server.lambda_invocations(moto_lambda_function)[0].raw)["Records"]
    assert len(first) == 10, len(first)  # one batch failed whole
    assert sum(1 for request in counting_proxy.requests if request.action == "DeleteItem") >= 10
    at_once = most_at_once(list(counting_proxy.requests), "DeleteItem")
    assert at_once >= 5, at_once


def malformed_cancellation(action: str, params: dict[str, Any]) -> Reply | None:
    """A cancelled transaction whose item is not in DynamoDB's typed shape: reading it raises in our code."""
    if action != "TransactWriteItems":
        return None
    reasons = [{"Code": "ConditionalCheckFailed", "Item": {"slot": {"S": "x"}, "state": "completed"}}
               for _ in params.get("TransactItems", [])]
    return dynamodb_error("TransactionCanceledException", "Transaction cancelled", CancellationReasons=reasons)


def test_a_receive_that_lands_during_the_stop_is_released_even_when_admitting_it_raises(
    daemon: Callable[..., Daemon], sqs_env: dict[str, str], faulty_sqs: FaultySqs, http_app: HttpApp, sqs: Any,
    make_queue: Callable[..., Queue], claims_table: str, tmp_path: Path,
) -> None:
    """A receive on its way at SIGTERM brings a message back, and admitting it fails on a malformed answer: the
    message is made visible again at once, not left hidden for its visibility timeout."""
    queue = make_queue(VisibilityTimeout="120")
    path = build_config_file(tmp_path, concurrency=2, shutdown_timeout=20, polling={"poll_for": 5},
                             queues=[{"name": queue.name, "idempotency_key": "body:order.id"}],
                             targets={"default": {"type": "http", "url": f"{http_app.url}/work"}},
                             tables={"idempotency": {"table": claims_table, "expires_after": 600}})
    proc = daemon(["-c", str(path)], env=sqs_env)
    proc.wait_for_output("workerless started", timeout=60)
    held: list[dict[str, Any]] = []

    def is_receive(action: str, params: dict[str, Any]) -> bool:
        if action == "ReceiveMessage":
            held.append(params)
        return action == "ReceiveMessage"

    receives = faulty_sqs.hold(is_receive)
    wait_until(lambda: len(held) >= 1, 60, message=lambda: f"{faulty_sqs.actions()}")
    proc.send_signal(signal.SIGTERM)
    proc.wait_for_output("stopping", timeout=30)
    sqs.send_message(QueueUrl=queue.url, MessageBody=order("S-1"))
    faulty_sqs.fault = malformed_cancellation
    receives.set()
    assert proc.wait_exit(timeout=60) == 0
    assert http_app.requests == []
    assert visible_messages(sqs, queue.url) == 1, proc.output()  # released, not hidden for 120 s


def visible_messages(sqs: Any, url: str) -> int:
    attributes = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["ApproximateNumberOfMessages"])
    return int(attributes["Attributes"]["ApproximateNumberOfMessages"])


def test_receives_held_by_a_store_outage_do_not_count_toward_max_retries(
    daemon: Callable[..., Daemon], sqs_env: dict[str, str], faulty_sqs: FaultySqs, http_app: HttpApp, sqs: Any,
    make_queue: Callable[..., Queue], claims_table: str, tmp_path: Path,
) -> None:
    """max_retries = 2 with the daemon's own dead_letter_queue: the receive a hold hid the message on is not a
    try, so the app sees the message twice before it is dead-lettered, however long the table was throttled."""
    queue, dead_letters = make_queue(), make_queue()
    faulty_sqs.fault = throttled_transaction
    http_app.set_status(500)
    path = build_config_file(tmp_path, concurrency=2, shutdown_timeout=10,
                             queues=[{"name": queue.name, "idempotency_key": "body:order.id", "max_retries": 2,
                                      "dead_letter_queue": dead_letters.name, "error_visibility_timeout": 1}],
                             targets={"default": {"type": "http", "url": f"{http_app.url}/work"}},
                             tables={"idempotency": {"table": claims_table, "expires_after": 600}})
    proc = daemon(["-c", str(path)], env=sqs_env)
    sqs.send_message(QueueUrl=queue.url, MessageBody=order("R-1"))
    throttled_at = time.monotonic()
    wait_until(lambda: time.monotonic() - throttled_at > 8 and faulty_sqs.faulted_count() >= 3, 90,
               message=lambda: f"{faulty_sqs.actions()}")
    assert http_app.requests == []
    faulty_sqs.fault = None
    wait_until(lambda: count_messages(sqs, dead_letters.url) == 1, 90, message=proc.output)
    assert proc.stop(timeout=30) == 0
    counts = [int(request.headers["x-aws-sqsd-receive-count"]) for request in http_app.requests]
    assert len(counts) == 2, counts  # two tries, whatever the receives the outage cost


class LateAnswers(CountingProxy):
    """Forwards every call at once, but holds the answer of the calls `late` matches until `answer` is set: a
    claim that DynamoDB applied and whose answer came back long after (a reset after the write, retries)."""

    def __init__(self, upstream: str, late: Callable[[str, dict[str, Any]], bool]) -> None:
        super().__init__(upstream)
        self.late = late
        self.answer = gevent.event.Event()

    def handle(self, environ: dict[str, Any], arrived: float) -> Reply:
        body = environ["wsgi.input"].read()
        action, params = action_of(headers_from_environ(environ), body, environ.get("QUERY_STRING", ""))
        environ["wsgi.input"] = io.BytesIO(body)
        reply = super().handle(environ, arrived)
        if self.late(action, params):
            self.answer.wait(60)
        return reply


def test_a_claim_answered_after_its_visibility_ended_is_not_delivered(
    daemon: Callable[..., Daemon], aws_env: dict[str, str], moto_endpoint: str, counting_proxy: CountingProxy,
    http_app: HttpApp, sqs: Any, make_queue: Callable[..., Queue], claims_table: str, tmp_path: Path,
) -> None:
    """Daemon A's claim is written at once but answered late; meanwhile the message's visibility (1 s) ends,
    daemon B receives it, claims the lapsed key and delivers it. A's late 'claimed' must not deliver it again
    (a late answer of a claim: DynamoDB slow, or a reset after the write and the wire's retries)."""
    queue = make_queue()
    transactions: list[float] = []

    def first_transaction(action: str, params: dict[str, Any]) -> bool:
        if action != "TransactWriteItems":
            return False
        transactions.append(time.monotonic())
        return len(transactions) == 1

    late = LateAnswers(moto_endpoint, first_transaction)
    late.start()
    b_receives = counting_proxy.hold(lambda action, params: action == "ReceiveMessage")
    try:
        paths = [build_config_file(tmp_path, name=f"{name}.toml", concurrency=2, shutdown_timeout=10,
                                   queues=[{"name": queue.name, "idempotency_key": "body:order.id",
                                            "visibility_timeout": 1}],
                                   targets={"default": {"type": "http", "url": f"{http_app.url}/work"}},
                                   tables={"idempotency": {"table": claims_table, "expires_after": 600}})
                 for name in ("a", "b")]
        a = daemon(["-c", str(paths[0])], env={**aws_env, "AWS_ENDPOINT_URL": late.url})
        b = daemon(["-c", str(paths[1])], env={**aws_env, "AWS_ENDPOINT_URL": counting_proxy.url})
        a.wait_for_output("workerless started", timeout=60)
        b.wait_for_output("workerless started", timeout=60)
        sqs.send_message(QueueUrl=queue.url, MessageBody=order("L-1"))
        wait_until(lambda: transactions, 60, message=a.output)  # A received it and claims
        b_receives.set()  # B's receive hands it out once its visibility ends
        http_app.wait_for_requests(1, timeout=60)
        late.answer.set()
        wait_until(lambda: count_messages(sqs, queue.url) == 0, 60, message=lambda: a.output() + b.output())
        assert a.stop(timeout=30) == 0 and b.stop(timeout=30) == 0
    finally:
        late.answer.set()
        b_receives.set()
        late.stop()
    assert len(http_app.requests) == 1, [request.headers.get("x-aws-sqsd-receive-count")
                                         for request in http_app.requests]
    assert "its claim came back after its visibility ended" in a.output()
