"""targets/http_batch.py and targets/sqs_event.py: the batch an HTTP target POSTs is the Lambda target's event, read
back by the Lambda target's rules, with the HTTP status kept and FIFO groups kept in order."""

from __future__ import annotations

import json
from typing import Any

import pytest

from tests.unit.sqs_messages import make_message
from workerless_gevent.config.model import HttpTargetConfig
from workerless_gevent.targets import SUCCESS, Outcome, QueueInfo, Result
from workerless_gevent.targets.http import SUCCESSES, HttpTarget
from workerless_gevent.targets.http_batch import RELEASED, BatchHttpTarget, build_http_target, held_back, in_group_order
from workerless_gevent.targets.sqs_event import (MAX_PAYLOAD_BYTES, build_record, event_payloads, judge_response,
                                                 requests_needed, split_by_size)

QUEUE = QueueInfo(name="orders", arn="arn:aws:sqs:eu-west-1:123456789012:orders", region="eu-west-1", is_fifo=False)
URL = "http://127.0.0.1:9/sqs"
FAILED = Outcome.failure("BatchItemFailure", "the app reported this record as failed")


def records(count: int, body: str = "{}") -> list[dict[str, Any]]:
    return [build_record(QUEUE, make_message(QUEUE.name, message_id=f"m{i}", body=body)) for i in range(count)]


def answer(*failed: object) -> bytes:
    return json.dumps({"batchItemFailures": [{"itemIdentifier": item} for item in failed]}).encode()


def test_batch_size_1_builds_the_one_message_target_unchanged_and_more_the_batch() -> None:
    single = build_http_target(HttpTargetConfig(name="default", url=URL))
    assert type(single) is HttpTarget
    assert (single.messages_per_delivery, single.connections.keep_body) == (1, False)
    batch = build_http_target(HttpTargetConfig(name="default", url=URL, batch_size=500, max_batching_window=2))
    assert isinstance(batch, BatchHttpTarget)
    assert (batch.messages_per_delivery, batch.connections.keep_body) == (500, True)
    assert batch.trace_headers() == {}


def test_a_batchs_lease_counts_each_post_it_may_need() -> None:
    target = build_http_target(HttpTargetConfig(name="default", url=URL, batch_size=10, connect_timeout=5,
                                                inactivity_timeout=25))
    messages = [make_message(QUEUE.name, message_id=f"m{i}") for i in range(3)]
    assert target.deadline_seconds(messages) == 30
    big = [make_message(QUEUE.name, message_id=f"m{i}", body="x" * (1024 * 1024)) for i in range(10)]
    assert requests_needed(big) == 4 and target.deadline_seconds(big) == 120


def test_each_part_is_the_json_of_its_records_and_the_parts_are_lambdas_split() -> None:
    batch = records(3, body="x" * (3 * 1024 * 1024))
    parts = event_payloads(batch)
    assert [part for part, _ in parts] == split_by_size(batch)
    assert [len(part) for part, _ in parts] == [1, 1, 1]  # halved, and the half of two halved again
    for part, body in parts:
        assert body == json.dumps({"Records": part}).encode("utf-8")
        assert len(body) <= MAX_PAYLOAD_BYTES or len(part) == 1


def test_the_apps_answer_is_read_as_lambda_reads_a_functions_with_its_status_kept() -> None:
    batch = records(3)
    read = lambda body: judge_response(body, batch, False, success=SUCCESSES[207], answerer="the app")  # noqa: E731
    assert read(b"") == [SUCCESS] * 3 and all(outcome.status == 207 for outcome in read(b"  \n"))
    assert read(b'{"batchItemFailures": []}') == read(b"null") == read(b'"OK"') == read(b"{}") == [SUCCESS] * 3
    failed = read(answer("m1"))
    assert failed == [SUCCESS, FAILED, SUCCESS] and failed[1].status == 207
    for bad in (answer("m9"), answer(""), answer(None), b'{"batchItemFailures": [{"id": "m1"}]}'):
        outcomes = read(bad)
        assert {(outcome.result, outcome.error_type) for outcome in outcomes} == {(Result.FAILURE, "InvalidResponse")}
        assert "unknown or empty itemIdentifier" in outcomes[0].error
    invalid = read(b"OK")
    assert invalid == [Outcome.failure("InvalidResponse", "the app's response is not valid JSON")] * 3


def test_the_lambda_targets_text_is_unchanged_by_the_move() -> None:
    batch = records(2)
    assert judge_response(answer("m0"), batch, False) == [
        Outcome.failure("BatchItemFailure", "the function reported this record as failed"), SUCCESS]
    assert judge_response(b"{", batch, False)[0].error == "the function's response is not valid JSON"


@pytest.mark.parametrize(("outcomes", "expected"), [
    ([SUCCESS, SUCCESS], [SUCCESS, SUCCESS]),
    ([SUCCESS, FAILED, FAILED, SUCCESS], [SUCCESS, FAILED, RELEASED, RELEASED]),
    ([FAILED, SUCCESS, SUCCESS], [FAILED, RELEASED, RELEASED]),
    ([SUCCESS, SUCCESS, FAILED], [SUCCESS, SUCCESS, FAILED]),
])
def test_fifo_keeps_the_first_failure_and_releases_the_rest_of_the_group_behind_it(
    outcomes: list[Outcome], expected: list[Outcome],
) -> None:
    assert in_group_order(outcomes) == expected
    assert RELEASED.result is Result.RELEASED


def test_a_part_that_was_overloaded_holds_the_rest_back_and_on_fifo_so_does_a_failed_one() -> None:
    retry = Outcome(Result.RETRY, "HTTP 429", "HTTP 429, Retry-After 2s", 2.0, 429)
    overloaded = Outcome.overloaded("HTTP 503", "the app answered HTTP 503 without Retry-After")
    assert held_back([retry, retry], False) is retry and held_back([overloaded], True) is overloaded
    assert held_back([SUCCESS, FAILED], False) is None and held_back([SUCCESS, SUCCESS], True) is None
    assert held_back([SUCCESS, FAILED], True) is RELEASED
