"""targets/http_batch.py and targets/sqs_event.py: the batch an HTTP target POSTs is the Lambda target's event, read
back by the Lambda target's rules, with the HTTP status kept (its parts and FIFO's rule: test_event_parts.py)."""

from __future__ import annotations

import json
from typing import Any

from tests.unit.sqs_messages import make_message
from workerless_gevent.config.model import HttpTargetConfig
from workerless_gevent.targets import SUCCESS, Outcome, QueueInfo, Result
from workerless_gevent.targets.event_parts import requests_needed
from workerless_gevent.targets.http import SUCCESSES, HttpTarget
from workerless_gevent.targets.http_batch import MAX_ANSWER_BYTES, BatchHttpTarget, build_http_target
from workerless_gevent.targets.sqs_event import build_record, judge_response

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
    assert batch.connections.parser_type.max_body_bytes == MAX_ANSWER_BYTES  # an answer is read so far, no further
    assert single.connections.parser_type.max_body_bytes > 2 ** 60  # one message's answer body is not kept
    assert batch.trace_headers() == {}


def test_a_batchs_lease_counts_each_post_it_needs() -> None:
    target = build_http_target(HttpTargetConfig(name="default", url=URL, batch_size=10, connect_timeout=5,
                                                inactivity_timeout=25))
    messages = [make_message(QUEUE.name, message_id=f"m{i}") for i in range(3)]
    assert target.deadline_seconds(QUEUE, messages) == 30
    big = [make_message(QUEUE.name, message_id=f"m{i}", body="x" * (1024 * 1024)) for i in range(10)]
    assert requests_needed(QUEUE, big) == 2 and target.deadline_seconds(QUEUE, big) == 60  # five 1 MiB in each


def test_the_apps_answer_is_read_as_lambda_reads_a_functions_with_its_status_kept() -> None:
    batch = records(3)
    read = lambda body: judge_response(body, batch, success=SUCCESSES[207], answerer="the app")  # noqa: E731
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
    assert judge_response(answer("m0"), batch) == [
        Outcome.failure("BatchItemFailure", "the function reported this record as failed"), SUCCESS]
    assert judge_response(b"{", batch)[0].error == "the function's response is not valid JSON"
