"""targets/aws_lambda.py and targets/sqs_event.py: Lambda's SQS event shape, its batch-response rules, throttles and
a batch's lease (the parts themselves: test_event_parts.py)."""

from __future__ import annotations

import base64
import json
import random
from typing import Any

import botocore.exceptions
import pytest

from tests.unit.sqs_messages import (
    FIRST_RECEIVED_MS,
    SENDER_ID,
    SENT_MS,
    binary_attribute,
    make_message,
    string_attribute,
)
from workerless_gevent.config.model import LambdaTargetConfig
from workerless_gevent.targets import SUCCESS, Outcome, QueueInfo, Result
from workerless_gevent.targets.aws_lambda import LambdaTarget
from workerless_gevent.targets.sqs_event import build_record, judge_response

ARN = "arn:aws:sqs:us-east-2:123456789012:payments"
QUEUE = QueueInfo(name="payments", arn=ARN, region="us-east-2", is_fifo=False)
FIFO_QUEUE = QueueInfo(name="payments.fifo", arn=ARN + ".fifo", region="us-east-2", is_fifo=True)


def records(count: int, queue: QueueInfo = QUEUE) -> list[dict[str, Any]]:
    return [build_record(queue, make_message(queue.name, message_id=f"m{i}")) for i in range(count)]


def test_record_has_exactly_lambdas_shape() -> None:
    message = make_message(message_id="059f36b4", body='{"foo": 2}', receive_count=2,
                           message_attributes={"req-id": string_attribute("24479a02")})
    assert build_record(QUEUE, message) == {
        "messageId": "059f36b4",
        "receiptHandle": "AQEB059f36b4handle==",
        "body": '{"foo": 2}',
        "attributes": {
            "ApproximateReceiveCount": "2",
            "SentTimestamp": SENT_MS,
            "SenderId": SENDER_ID,
            "ApproximateFirstReceiveTimestamp": FIRST_RECEIVED_MS,
        },
        "messageAttributes": {
            "req-id": {"stringValue": "24479a02", "stringListValues": [], "binaryListValues": [], "dataType": "String"},
        },
        "md5OfBody": message.md5_of_body,
        "eventSource": "aws:sqs",
        "eventSourceARN": ARN,
        "awsRegion": "us-east-2",
    }


def test_record_is_json_serializable_with_binary_attributes() -> None:
    message = make_message(message_attributes={"blob": binary_attribute(b"\x00\xffdata")})
    record = build_record(QUEUE, message)
    assert json.loads(json.dumps(record)) == record


def test_message_attributes_in_camel_case_with_base64() -> None:
    message = make_message(message_attributes={
        "color": string_attribute("red"),
        "size": string_attribute("3.5", "Number"),
        "count": string_attribute("7", "Number.int"),
        "blob": binary_attribute(b"1100"),
        "lists": {"StringListValues": ["abc", "123"], "BinaryListValues": [b"0", b"1"], "DataType": "Binary"},
    })
    assert build_record(QUEUE, message)["messageAttributes"] == {
        "color": {"stringValue": "red", "stringListValues": [], "binaryListValues": [], "dataType": "String"},
        "size": {"stringValue": "3.5", "stringListValues": [], "binaryListValues": [], "dataType": "Number"},
        "count": {"stringValue": "7", "stringListValues": [], "binaryListValues": [], "dataType": "Number.int"},
        "blob": {"binaryValue": "MTEwMA==", "stringListValues": [], "binaryListValues": [], "dataType": "Binary"},
        "lists": {"stringListValues": ["abc", "123"], "binaryListValues": ["MA==", "MQ=="], "dataType": "Binary"},
    }


def test_binary_value_round_trips_through_base64() -> None:
    rng = random.Random(7)
    data = bytes(rng.randrange(256) for _ in range(300))
    record = build_record(QUEUE, make_message(message_attributes={"blob": binary_attribute(data)}))
    assert base64.b64decode(record["messageAttributes"]["blob"]["binaryValue"]) == data


def test_no_message_attributes_give_an_empty_object() -> None:
    assert build_record(QUEUE, make_message())["messageAttributes"] == {}


def test_fifo_record_attributes() -> None:
    fifo = {"SequenceNumber": "18849496460467696128", "MessageGroupId": "customer-7",
            "MessageDeduplicationId": "dedupe-1"}
    record = build_record(FIFO_QUEUE, make_message(FIFO_QUEUE.name, attributes=fifo))
    assert record["attributes"] == {
        "ApproximateReceiveCount": "1",
        "SentTimestamp": SENT_MS,
        "SenderId": SENDER_ID,
        "ApproximateFirstReceiveTimestamp": FIRST_RECEIVED_MS,
        **fifo,
    }
    assert record["eventSourceARN"] == ARN + ".fifo"


def test_standard_record_attributes_are_the_four_lambda_sends() -> None:
    record = build_record(QUEUE, make_message())
    assert list(record["attributes"]) == [
        "ApproximateReceiveCount", "SentTimestamp", "SenderId", "ApproximateFirstReceiveTimestamp"]


def test_trace_header_is_passed_on_like_lambda_does() -> None:
    record = build_record(QUEUE, make_message(attributes={"AWSTraceHeader": "Root=1-5759e988-bd862e3fe1be46a994272793"}))
    assert record["attributes"]["AWSTraceHeader"] == "Root=1-5759e988-bd862e3fe1be46a994272793"


# --- judge_response: Lambda's ReportBatchItemFailures rules -------------------------------------

FAILED = Outcome.failure("BatchItemFailure", "the function reported this record as failed")


def failures(*ids: object) -> bytes:
    return json.dumps({"batchItemFailures": [{"itemIdentifier": item} for item in ids]}).encode()


@pytest.mark.parametrize(
    "body",
    [
        pytest.param(b"", id="empty-body"),
        pytest.param(b"  \n", id="blank-body"),
        pytest.param(b"null", id="null"),
        pytest.param(b"{}", id="empty-object"),
        pytest.param(b'{"batchItemFailures": []}', id="empty-list"),
        pytest.param(b'{"batchItemFailures": null}', id="null-list"),
        pytest.param(b'{"statusCode": 200, "body": "ok"}', id="other-keys"),
        pytest.param(b'"done"', id="json-string"),
    ],
)
def test_full_success(body: bytes) -> None:
    assert judge_response(body, records(3)) == [SUCCESS] * 3


def test_listed_ids_fail_only_those() -> None:
    assert judge_response(failures("m1", "m3"), records(4)) == [SUCCESS, FAILED, SUCCESS, FAILED]


def test_repeated_id_fails_once() -> None:
    assert judge_response(failures("m0", "m0"), records(2)) == [FAILED, SUCCESS]


@pytest.mark.parametrize(
    ("body", "problem"),
    [
        pytest.param(failures("m1", "nope"), "batchItemFailures names an unknown or empty itemIdentifier ('nope')",
                     id="unknown-id"),
        pytest.param(failures(""), "batchItemFailures names an unknown or empty itemIdentifier ('')", id="empty-id"),
        pytest.param(failures(None), "batchItemFailures names an unknown or empty itemIdentifier (None)", id="null-id"),
        pytest.param(failures(1), "batchItemFailures names an unknown or empty itemIdentifier (1)", id="number-id"),
        pytest.param(b'{"batchItemFailures": [{"itemId": "m1"}]}',
                     "batchItemFailures names an unknown or empty itemIdentifier (None)", id="wrong-key-name"),
        pytest.param(b'{"batchItemFailures": ["m1"]}',
                     "batchItemFailures names an unknown or empty itemIdentifier (None)", id="bare-string-item"),
        pytest.param(b'{"batchItemFailures": [{"itemIdentifier": "m1"},',
                     "the function's response is not valid JSON", id="invalid-json"),
        pytest.param(b"\xff\xfe", "the function's response is not valid JSON", id="not-utf8"),
    ],
)
def test_bad_responses_fail_the_whole_batch(body: bytes, problem: str) -> None:
    assert judge_response(body, records(3)) == [Outcome.failure("InvalidResponse", problem)] * 3


# --- throttles are retries that pause the target -------------------------------------------------

def test_under_backpressure_a_throttle_is_an_overload_that_still_pauses_the_target() -> None:
    target = LambdaTarget(LambdaTargetConfig(name="billing", function="billing-fn"), None, random.Random(3))
    outcome = target.judge_error(client_error("TooManyRequestsException"))
    assert (outcome.result, outcome.error_type) == (Result.OVERLOADED, "Throttled")
    assert 0.5 <= target.pause.remaining_seconds() <= 2.0
    other = target.judge_error(client_error("ResourceNotFoundException"))
    assert (other.result, other.error_type) == (Result.FAILURE, "ResourceNotFoundException")

def client_error(code: str) -> botocore.exceptions.ClientError:
    return botocore.exceptions.ClientError({"Error": {"Code": code, "Message": "slow down"}}, "Invoke")


def test_throttle_is_a_jittered_retry_that_pauses_the_target() -> None:
    target = LambdaTarget(LambdaTargetConfig(name="billing", function="billing-fn", overload="failure"), None,
                          random.Random(3))
    first = target.judge_error(client_error("TooManyRequestsException"))
    assert (first.result, first.error_type, first.error) == (Result.RETRY, "Throttled",
                                                           "TooManyRequestsException: slow down")
    assert first.retry_after_seconds is not None and 1.0 <= first.retry_after_seconds <= 2.0
    assert target.pause.remaining_seconds() == pytest.approx(first.retry_after_seconds, abs=0.5)
    second = target.judge_error(client_error("TooManyRequestsException"))
    assert second.retry_after_seconds is not None and 2.0 <= second.retry_after_seconds <= 4.0


def test_other_invoke_errors_are_failures() -> None:
    target = LambdaTarget(LambdaTargetConfig(name="billing", function="billing-fn"), None, random.Random(3))
    outcome = target.judge_error(client_error("ResourceNotFoundException"))
    assert outcome == Outcome.failure("ResourceNotFoundException", "ResourceNotFoundException: slow down")
    assert target.pause.remaining_seconds() <= 0


def test_the_lease_of_a_batch_covers_every_invoke_it_needs() -> None:
    target = LambdaTarget(LambdaTargetConfig(name="billing", function="fn", timeout=60, batch_size=100,
                                             max_batching_window=1), None, random.Random(1))
    small = [make_message(message_id=str(i), body="x") for i in range(100)]
    assert target.deadline_seconds(QUEUE, small) == target.hard_deadline_seconds == 70
    big = [make_message(message_id=str(i), body="é" * 600_000) for i in range(20)]
    # 1.2 MB of UTF-8 a record (the estimate once counted that), but "é" is sent as \u00e9: 3.6 MB, one per invoke
    assert target.deadline_seconds(QUEUE, big) == 20 * target.hard_deadline_seconds
