"""What a message looks like on arrival: aws-sqsd headers and body, and Lambda's SQS event shape."""

from __future__ import annotations

import base64
import calendar
import hashlib
import json
import time
from pathlib import Path
from typing import Any, Callable

from tests.support import (
    Daemon,
    FakeLambda,
    HttpApp,
    MotoServer,
    Queue,
    count_messages,
    wait_until,
    write_config,
)

MOTO_SENDER_ID = "AIDAIT2UOQQY3AUEKVGXU"  # moto's fixed SenderId
JSON_BODY = '{"greeting": "h\u00e9llo w\u00f6rld \u2713 \U0001f680", "list": [1, 2.5, null], "q": "\\"x\\""}'
ODD_BODY = "  line one\r\nline two\n\ttabbed \u00a0\u4e2d\u6587 <&> %20 trailing  "
BINARY = b"\x00\x01\xfe\xff binary"
ATTRIBUTES = {
    "color": {"DataType": "String", "StringValue": "blue"},
    "price": {"DataType": "Number", "StringValue": "12.50"},
    "count": {"DataType": "Number.int", "StringValue": "7"},
    "blob": {"DataType": "Binary", "BinaryValue": BINARY},
}


def send(sqs: Any, queue: Queue, body: str, **extra: Any) -> tuple[str, float]:
    sent_at = time.time()
    message_id = sqs.send_message(QueueUrl=queue.url, MessageBody=body, MessageAttributes=ATTRIBUTES,
                                  **extra)["MessageId"]
    return message_id, sent_at


def iso_seconds(text: str) -> float:
    """"2026-01-02T03:04:05.678Z" -> epoch seconds; fails unless it is ISO 8601 UTC with a Z."""
    assert text.endswith("Z") and "T" in text, text
    moment = time.strptime(text[:-1].split(".")[0], "%Y-%m-%dT%H:%M:%S")
    fraction = float("0." + text[:-1].split(".")[1]) if "." in text else 0.0
    return calendar.timegm(moment) + fraction


def test_http_delivery_carries_exactly_the_aws_sqsd_headers_and_the_body_byte_exact(
    daemon: Callable[..., Daemon], aws_env: dict[str, str], http_app: HttpApp,
    sqs: Any, make_queue: Callable[..., Queue],
) -> None:
    queue = make_queue()
    sent = {body: send(sqs, queue, body) for body in (JSON_BODY, ODD_BODY)}
    proc = daemon([f"--queues={queue.name}", f"--http={http_app.url}/jobs/run"], env=aws_env)
    requests = http_app.wait_for_requests(2, timeout=60)
    wait_until(lambda: count_messages(sqs, queue.url) == 0, 30, message="messages not deleted")
    assert proc.stop(timeout=30) == 0

    assert sorted(r.body for r in requests) == sorted(b.encode("utf-8") for b in sent)
    for request in requests:
        body = request.body.decode("utf-8")
        message_id, sent_at = sent[body]
        headers = request.headers
        assert (request.method, request.path, request.query) == ("POST", "/jobs/run", "")
        assert headers["user-agent"].startswith("aws-sqsd/") and "workerless" in headers["user-agent"]
        assert headers["content-type"] == "application/json"
        assert int(headers["content-length"]) == len(request.body)
        sqsd = {name: value for name, value in headers.items() if name.startswith("x-aws-sqsd-")}
        assert set(sqsd) == {
            "x-aws-sqsd-msgid", "x-aws-sqsd-queue", "x-aws-sqsd-first-received-at",
            "x-aws-sqsd-receive-count", "x-aws-sqsd-sender-id", "x-aws-sqsd-sent-at",
            "x-aws-sqsd-attr-color", "x-aws-sqsd-attr-price", "x-aws-sqsd-attr-count",
        }  # and none for the Binary attribute
        assert sqsd["x-aws-sqsd-msgid"] == message_id
        assert sqsd["x-aws-sqsd-queue"] == queue.name
        assert sqsd["x-aws-sqsd-receive-count"] == "1"
        assert sqsd["x-aws-sqsd-sender-id"] == MOTO_SENDER_ID
        assert (sqsd["x-aws-sqsd-attr-color"], sqsd["x-aws-sqsd-attr-price"],
                sqsd["x-aws-sqsd-attr-count"]) == ("blue", "12.50", "7")
        sent_header = iso_seconds(sqsd["x-aws-sqsd-sent-at"])
        first_received = iso_seconds(sqsd["x-aws-sqsd-first-received-at"])
        assert sent_at - 2 <= sent_header <= first_received <= request.arrived - time.monotonic() + time.time() + 2


def expected_message_attributes() -> dict[str, Any]:
    def string(value: str, data_type: str) -> dict[str, Any]:
        return {"stringValue": value, "stringListValues": [], "binaryListValues": [], "dataType": data_type}

    return {
        "color": string("blue", "String"),
        "price": string("12.50", "Number"),
        "count": string("7", "Number.int"),
        "blob": {"binaryValue": base64.b64encode(BINARY).decode(), "stringListValues": [],
                 "binaryListValues": [], "dataType": "Binary"},
    }


def assert_lambda_record(record: dict[str, Any], queue: Queue, message_id: str, body: str, sent_at: float,
                         fifo_attributes: tuple[str, ...] = ()) -> None:
    assert set(record) == {"messageId", "receiptHandle", "body", "attributes", "messageAttributes",
                           "md5OfBody", "eventSource", "eventSourceARN", "awsRegion"}
    assert record["messageId"] == message_id
    assert isinstance(record["receiptHandle"], str) and record["receiptHandle"]
    assert record["body"] == body
    assert record["md5OfBody"] == hashlib.md5(body.encode("utf-8")).hexdigest()
    assert (record["eventSource"], record["eventSourceARN"], record["awsRegion"]) == (
        "aws:sqs", queue.arn, "us-east-1")
    attributes = record["attributes"]
    assert set(attributes) == {"ApproximateReceiveCount", "SentTimestamp", "SenderId",
                               "ApproximateFirstReceiveTimestamp", *fifo_attributes}
    assert attributes["ApproximateReceiveCount"] == "1"
    assert attributes["SenderId"] == MOTO_SENDER_ID
    assert abs(int(attributes["SentTimestamp"]) / 1000 - sent_at) < 5
    assert int(attributes["ApproximateFirstReceiveTimestamp"]) >= int(attributes["SentTimestamp"])
    assert record["messageAttributes"] == expected_message_attributes()


def test_lambda_delivery_sends_exactly_lambdas_sqs_event_shape(
    daemon: Callable[..., Daemon], aws_env: dict[str, str], fake_lambda: FakeLambda,
    sqs: Any, make_queue: Callable[..., Queue],
) -> None:
    queue = make_queue()
    message_id, sent_at = send(sqs, queue, JSON_BODY)
    env = {**aws_env, "AWS_ENDPOINT_URL_LAMBDA": fake_lambda.url}
    proc = daemon([f"--queues={queue.name}", "--function=billing-fn"], env=env)
    (invocation,) = fake_lambda.wait_for_invocations(1, timeout=60)
    wait_until(lambda: count_messages(sqs, queue.url) == 0, 30, message="message not deleted")
    assert proc.stop(timeout=30) == 0

    assert (invocation.function_name, invocation.qualifier, invocation.invocation_type) == (
        "billing-fn", None, "RequestResponse")
    assert set(invocation.payload) == {"Records"}
    (record,) = invocation.payload["Records"]
    assert_lambda_record(record, queue, message_id, JSON_BODY, sent_at)
    assert len(fake_lambda.invocations) == 1


def test_lambda_record_of_a_fifo_message_carries_the_fifo_attributes(
    daemon: Callable[..., Daemon], aws_env: dict[str, str], fake_lambda: FakeLambda,
    sqs: Any, make_queue: Callable[..., Queue],
) -> None:
    queue = make_queue(fifo=True)
    message_id, sent_at = send(sqs, queue, ODD_BODY, MessageGroupId="g1", MessageDeduplicationId="d1")
    env = {**aws_env, "AWS_ENDPOINT_URL_LAMBDA": fake_lambda.url}
    proc = daemon([f"--queues={queue.name}", "--function=fifo-fn"], env=env)
    (invocation,) = fake_lambda.wait_for_invocations(1, timeout=60)
    wait_until(lambda: count_messages(sqs, queue.url) == 0, 30, message="message not deleted")
    assert proc.stop(timeout=30) == 0

    (record,) = invocation.payload["Records"]
    assert_lambda_record(record, queue, message_id, ODD_BODY, sent_at,
                         ("SequenceNumber", "MessageGroupId", "MessageDeduplicationId"))
    assert (record["attributes"]["MessageGroupId"], record["attributes"]["MessageDeduplicationId"]) == ("g1", "d1")
    assert record["attributes"]["SequenceNumber"].isdigit()


def test_lambda_delivery_to_motos_own_lambda(
    daemon: Callable[..., Daemon], aws_env: dict[str, str], moto_server: MotoServer,
    moto_lambda_function: str, sqs: Any, make_queue: Callable[..., Queue],
) -> None:
    queue = make_queue()
    sent = [send(sqs, queue, body) for body in (JSON_BODY, "second")]
    proc = daemon([f"--queues={queue.name}", f"--function={moto_lambda_function}"], env=aws_env)
    # moto echoes the event back: a response without batchItemFailures is full success
    wait_until(lambda: count_messages(sqs, queue.url) == 0, 60, message="messages not deleted")
    assert proc.stop(timeout=30) == 0

    invocations = moto_server.lambda_invocations(moto_lambda_function)
    records = [record for invocation in invocations for record in json.loads(invocation.raw)["Records"]]
    assert all(invocation.invocation_type == "RequestResponse" for invocation in invocations)
    assert sorted(record["body"] for record in records) == sorted([JSON_BODY, "second"])
    for (message_id, sent_at), body in zip(sent, (JSON_BODY, "second")):
        (record,) = [record for record in records if record["messageId"] == message_id]
        assert_lambda_record(record, queue, message_id, body, sent_at)
    assert "delivered=2 failed=0" in proc.output()


def test_large_body_arrives_byte_exact(
    daemon: Callable[..., Daemon], aws_env: dict[str, str], http_app: HttpApp,
    sqs: Any, make_queue: Callable[..., Queue],
) -> None:
    queue = make_queue()
    # about 250 KB of UTF-8, under SQS's 256 KiB limit; cut on a character boundary
    body = ("\u00e9\u2713 json-ish {\"k\": [1, 2]}\n" * 9000).encode("utf-8")[:250_000].decode("utf-8", "ignore")
    sqs.send_message(QueueUrl=queue.url, MessageBody=body)
    proc = daemon([f"--queues={queue.name}", f"--http={http_app.url}/"], env=aws_env)
    (request,) = http_app.wait_for_requests(1, timeout=60)
    wait_until(lambda: count_messages(sqs, queue.url) == 0, 30, message="not deleted")
    assert proc.stop(timeout=30) == 0
    assert request.body == body.encode("utf-8")
    assert int(request.headers["content-length"]) == len(body.encode("utf-8"))


def test_each_queue_goes_to_its_own_target(
    daemon: Callable[..., Daemon], aws_env: dict[str, str], http_app: HttpApp, fake_lambda: FakeLambda,
    sqs: Any, make_queue: Callable[..., Queue], tmp_path: Path,
) -> None:
    web, jobs = make_queue(), make_queue()
    config = write_config(tmp_path, f"""
[[queues]]
name = "{web.name}"
target = "web"

[[queues]]
name = "{jobs.name}"
target = "jobs"

[targets.web]
type = "http"
url = "{http_app.url}/web"

[targets.jobs]
type = "lambda"
function = "jobs-fn"
qualifier = "live"
""")
    sqs.send_message(QueueUrl=web.url, MessageBody="for the web app")
    sqs.send_message(QueueUrl=jobs.url, MessageBody="for the function")
    proc = daemon(["-c", str(config)], env={**aws_env, "AWS_ENDPOINT_URL_LAMBDA": fake_lambda.url})
    wait_until(lambda: count_messages(sqs, web.url) + count_messages(sqs, jobs.url) == 0, 60,
               message="messages not deleted")
    assert proc.stop(timeout=30) == 0
    (request,) = http_app.requests
    assert (request.path, request.body) == ("/web", b"for the web app")
    (invocation,) = fake_lambda.invocations
    assert (invocation.function_name, invocation.qualifier) == ("jobs-fn", "live")
    assert [r["body"] for r in invocation.payload["Records"]] == ["for the function"]
    assert invocation.payload["Records"][0]["eventSourceARN"] == jobs.arn
