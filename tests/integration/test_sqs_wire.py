"""SqsWire, the hot SQS calls without botocore's client, against moto and real misbehaving peers.

Every result is compared with what the boto3 client returns for the same call, since callers
(SqsQueue, Message, the Lambda payload) must not be able to tell the two apart.
"""

from __future__ import annotations

import dataclasses
from dataclasses import replace
import hashlib
import hmac
import json
import random
import socket
import ssl
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import boto3
import botocore.exceptions
from botocore.httpsession import get_cert_path
import gevent
import pytest
from gevent.server import StreamServer

from tests.support import CountingProxy, MotoServer, Queue, count_messages, wait_until
from tests.support.moto import free_port
from tests.support.raw_http import read_request
from tests.support.tls import self_signed_certificate
from workerless_gevent.aws.clients import build_clients
from workerless_gevent.errors import AWS_ERRORS, describe_error, error_code
from workerless_gevent.config.model import AwsConfig, Config, HttpTargetConfig, QueueConfig
from workerless_gevent.message import Message
from workerless_gevent.metrics import Registry
from workerless_gevent.delivery.batch_answers import STALE_HANDLE_CODES
from workerless_gevent.delivery.queue import SqsQueue, is_sender_fault
from workerless_gevent.wire.retries import Retrier
from workerless_gevent.wire.sqs import SqsWire

RECEIVE_ALL: dict[str, Any] = {"MessageSystemAttributeNames": ["All"], "MessageAttributeNames": ["All"]}
ATTRIBUTES: dict[str, dict[str, Any]] = {
    "text": {"DataType": "String", "StringValue": "h\u00e9llo \u2713 <&>\n\"quoted\""},
    "custom_text": {"DataType": "String.custom", "StringValue": "x"},
    "number": {"DataType": "Number", "StringValue": "-12.5e3"},
    "integer": {"DataType": "Number.int", "StringValue": "42"},
    "binary": {"DataType": "Binary", "BinaryValue": bytes(range(256))},
    "image": {"DataType": "Binary.png", "BinaryValue": b"\x89PNG\r\n\x1a\n\x00\xff"},
    "empty_looking": {"DataType": "String", "StringValue": " "},
}
BODY = "{\"k\": \"v \u00e9 \U0001f600\"}\t\r\n trailing  "


def wire_for(client: Any, **settings: Any) -> SqsWire:
    settings.setdefault("concurrency", 10)
    settings.setdefault("read_timeout", 30)
    return SqsWire.for_client(client, boto3.session.Session().get_credentials(), **settings)


@pytest.fixture
def wire(sqs: Any) -> Iterator[SqsWire]:
    made = wire_for(sqs)
    yield made
    made.close()


@pytest.fixture
def proxy(moto_server: MotoServer) -> Iterator[CountingProxy]:
    server = CountingProxy(moto_server.url)
    server.start()
    yield server
    server.stop()


def without_metadata(response: dict[str, Any]) -> dict[str, Any]:
    return {key: value for key, value in response.items() if key != "ResponseMetadata"}


def comparable(raw: dict[str, Any]) -> dict[str, Any]:
    """A received message minus what differs between two receives of it."""
    varying = {"ApproximateReceiveCount", "ApproximateFirstReceiveTimestamp"}
    result = {key: value for key, value in raw.items() if key != "ReceiptHandle"}
    result["Attributes"] = {k: v for k, v in raw["Attributes"].items() if k not in varying}
    return result


def receive_twice(sqs: Any, wire: SqsWire, queue: Queue) -> tuple[dict[str, Any], dict[str, Any]]:
    """The same message received by the wire, then (visible again at once) by boto3."""
    via_wire = wire.receive_message(QueueUrl=queue.url, MaxNumberOfMessages=10, WaitTimeSeconds=0,
                                    VisibilityTimeout=0, **RECEIVE_ALL)
    via_boto3 = sqs.receive_message(QueueUrl=queue.url, MaxNumberOfMessages=10, WaitTimeSeconds=0,
                                    VisibilityTimeout=0, **RECEIVE_ALL)
    assert set(via_wire) == set(via_boto3) == {"Messages", "ResponseMetadata"}
    assert via_wire["ResponseMetadata"]["HTTPStatusCode"] == 200
    (mine,), (theirs,) = via_wire["Messages"], via_boto3["Messages"]
    return mine, theirs


def assert_same_message(mine: dict[str, Any], theirs: dict[str, Any]) -> None:
    assert set(mine) == set(theirs)
    for key, expected in theirs.items():  # field by field, so a failure names the field
        if key == "Attributes":
            assert set(mine[key]) == set(expected)
            for name, value in comparable(theirs)[key].items():
                assert mine[key][name] == value and type(mine[key][name]) is type(value), name
        elif key == "MessageAttributes":
            assert set(mine[key]) == set(expected)
            for name, value in expected.items():
                assert mine[key][name] == value, name
                assert {k: type(v) for k, v in mine[key][name].items()} == {k: type(v) for k, v in value.items()}
        elif key != "ReceiptHandle":
            assert mine[key] == expected and type(mine[key]) is type(expected), key
    assert mine["Attributes"]["ApproximateReceiveCount"] == "1"
    assert theirs["Attributes"]["ApproximateReceiveCount"] == "2"


def test_receive_matches_boto3_field_by_field_with_every_attribute_type(
    sqs: Any, wire: SqsWire, make_queue: Callable[..., Queue]
) -> None:
    queue = make_queue()
    sqs.send_message(QueueUrl=queue.url, MessageBody=BODY, MessageAttributes=ATTRIBUTES)
    mine, theirs = receive_twice(sqs, wire, queue)
    assert_same_message(mine, theirs)
    assert mine["Body"] == BODY
    assert mine["MessageAttributes"]["binary"]["BinaryValue"] == bytes(range(256))
    assert mine["MessageAttributes"]["image"]["BinaryValue"] == ATTRIBUTES["image"]["BinaryValue"]
    assert {"SentTimestamp", "SenderId", "ApproximateFirstReceiveTimestamp"} <= set(mine["Attributes"])
    assert mine["Attributes"]["SentTimestamp"].isdigit()  # epoch-ms strings, as botocore gives them
    # the daemon's view: two Messages that differ only in what differs between receives
    as_message = [dataclasses.asdict(Message.from_sqs(queue.name, raw, 1.0, 2.0)) for raw in (mine, theirs)]
    for fields in as_message:
        fields.pop("receipt_handle")
        fields["attributes"] = comparable({"Attributes": fields["attributes"]})["Attributes"]
    assert as_message[0] == as_message[1]


def test_fifo_receive_matches_boto3_with_group_sequence_and_deduplication(
    sqs: Any, wire: SqsWire, make_queue: Callable[..., Queue]
) -> None:
    queue = make_queue(fifo=True)
    sqs.send_message(QueueUrl=queue.url, MessageBody="first", MessageGroupId="group-a",
                     MessageDeduplicationId="dedup-1", MessageAttributes={"b": ATTRIBUTES["binary"]})
    mine, theirs = receive_twice(sqs, wire, queue)
    assert_same_message(mine, theirs)
    assert mine["Attributes"]["MessageGroupId"] == "group-a"
    assert mine["Attributes"]["MessageDeduplicationId"] == "dedup-1"
    assert mine["Attributes"]["SequenceNumber"].isdigit()
    message = Message.from_sqs(queue.name, mine, 1.0, 2.0)
    assert message.group_id == "group-a" and message.receive_count == 1


def test_receive_of_an_empty_queue_and_requested_attributes_only(
    sqs: Any, wire: SqsWire, make_queue: Callable[..., Queue]
) -> None:
    queue = make_queue()
    empty = wire.receive_message(QueueUrl=queue.url, MaxNumberOfMessages=10, WaitTimeSeconds=0, **RECEIVE_ALL)
    assert without_metadata(empty) == without_metadata(
        sqs.receive_message(QueueUrl=queue.url, MaxNumberOfMessages=10, WaitTimeSeconds=0, **RECEIVE_ALL))
    assert empty.get("Messages", []) == []
    sqs.send_message(QueueUrl=queue.url, MessageBody="plain")
    (message,) = wire.receive_message(QueueUrl=queue.url, VisibilityTimeout=0)["Messages"]
    (theirs,) = sqs.receive_message(QueueUrl=queue.url, VisibilityTimeout=0)["Messages"]
    assert set(message) == set(theirs) and message["Body"] == "plain"


def test_long_poll_returns_a_message_sent_while_it_waits(
    sqs: Any, wire: SqsWire, make_queue: Callable[..., Queue]
) -> None:
    queue = make_queue()
    poll = gevent.spawn(wire.receive_message, QueueUrl=queue.url, MaxNumberOfMessages=10, WaitTimeSeconds=5,
                        **RECEIVE_ALL)
    gevent.sleep(0.5)
    sqs.send_message(QueueUrl=queue.url, MessageBody="late")
    response = poll.get(timeout=10)
    assert [m["Body"] for m in response["Messages"]] == ["late"]


def test_batches_report_a_stale_receipt_as_a_failed_entry_like_boto3(
    sqs: Any, wire: SqsWire, make_queue: Callable[..., Queue]
) -> None:
    queue = make_queue()
    for index in range(3):
        sqs.send_message(QueueUrl=queue.url, MessageBody=f"m{index}")
    received: list[dict[str, Any]] = []
    while len(received) < 3:
        received += wire.receive_message(QueueUrl=queue.url, MaxNumberOfMessages=10, VisibilityTimeout=60)["Messages"]
    handles = [m["ReceiptHandle"] for m in received]

    visibility = wire.change_message_visibility_batch(QueueUrl=queue.url, Entries=[
        {"Id": "0", "ReceiptHandle": handles[0], "VisibilityTimeout": 0},
        {"Id": "1", "ReceiptHandle": "not-a-receipt-handle", "VisibilityTimeout": 0},
        {"Id": "2", "ReceiptHandle": handles[2], "VisibilityTimeout": 120},
    ])
    boto3_visibility = sqs.change_message_visibility_batch(QueueUrl=queue.url, Entries=[
        {"Id": "1", "ReceiptHandle": "not-a-receipt-handle", "VisibilityTimeout": 0}])
    assert sorted(e["Id"] for e in visibility["Successful"]) == ["0", "2"]
    (failed,) = visibility["Failed"]
    assert failed == boto3_visibility["Failed"][0]
    assert failed["Id"] == "1" and failed["SenderFault"] is True and failed["Code"].endswith(STALE_HANDLE_CODES)

    deleted = wire.delete_message_batch(QueueUrl=queue.url, Entries=[
        {"Id": "0", "ReceiptHandle": "stale"}, {"Id": "1", "ReceiptHandle": handles[1]},
        {"Id": "2", "ReceiptHandle": handles[2]}])
    boto3_deleted = sqs.delete_message_batch(QueueUrl=queue.url, Entries=[{"Id": "0", "ReceiptHandle": "stale"}])
    assert sorted(e["Id"] for e in deleted["Successful"]) == ["1", "2"]
    assert deleted["Failed"] == boto3_deleted["Failed"]
    assert deleted["Failed"][0]["Code"].endswith(STALE_HANDLE_CODES)
    assert count_messages(sqs, queue.url) == 1  # the one made visible again by the first batch


def test_all_successful_batch_has_no_failed_entries(
    sqs: Any, wire: SqsWire, make_queue: Callable[..., Queue]
) -> None:
    queue = make_queue()
    sqs.send_message(QueueUrl=queue.url, MessageBody="x")
    (message,) = wire.receive_message(QueueUrl=queue.url)["Messages"]
    response = wire.delete_message_batch(QueueUrl=queue.url, Entries=[
        {"Id": "0", "ReceiptHandle": message["ReceiptHandle"]}])
    assert response["Successful"] == [{"Id": "0"}] and response.get("Failed", []) == []
    assert count_messages(sqs, queue.url) == 0


@pytest.mark.parametrize("call", ["receive", "delete", "visibility"])
def test_a_nonexistent_queue_raises_the_client_error_boto3_raises(sqs: Any, wire: SqsWire, call: str) -> None:
    url = f"{wire.endpoint_url}/123456789012/no-such-queue-{time.monotonic_ns()}"
    entries = [{"Id": "0", "ReceiptHandle": "x"}]
    calls: dict[str, Callable[[Any], Any]] = {
        "receive": lambda client: client.receive_message(QueueUrl=url, MaxNumberOfMessages=1),
        "delete": lambda client: client.delete_message_batch(QueueUrl=url, Entries=entries),
        "visibility": lambda client: client.change_message_visibility_batch(
            QueueUrl=url, Entries=[dict(entries[0], VisibilityTimeout=0)]),
    }
    with pytest.raises(botocore.exceptions.ClientError) as expected:
        calls[call](sqs)
    with pytest.raises(botocore.exceptions.ClientError) as raised:
        calls[call](wire)
    mine, theirs = raised.value, expected.value
    assert type(mine) is type(theirs)  # the client's modeled class, e.g. QueueDoesNotExist
    assert isinstance(mine, AWS_ERRORS)
    assert error_code(mine) == error_code(theirs)
    assert mine.response["Error"] == theirs.response["Error"]
    assert mine.response["ResponseMetadata"]["HTTPStatusCode"] == theirs.response["ResponseMetadata"]["HTTPStatusCode"]
    assert describe_error(mine) == describe_error(theirs)
    assert is_sender_fault(mine) and is_sender_fault(theirs)
    assert mine.operation_name == theirs.operation_name


def test_connection_refused_is_an_aws_error() -> None:
    wire = SqsWire(f"http://127.0.0.1:{free_port()}", "us-east-1", credentials(), concurrency=2, read_timeout=5)
    with pytest.raises(AWS_ERRORS) as raised:
        wire.receive_message(QueueUrl="http://x/1/q", MaxNumberOfMessages=1)
    assert isinstance(raised.value, botocore.exceptions.EndpointConnectionError)
    assert not is_sender_fault(raised.value)
    assert "Could not connect to the endpoint URL" in describe_error(raised.value)


def test_missing_credentials_is_an_aws_error() -> None:
    wire = SqsWire(f"http://127.0.0.1:{free_port()}", "us-east-1", None, concurrency=1, read_timeout=5)
    with pytest.raises(botocore.exceptions.NoCredentialsError):
        wire.receive_message(QueueUrl="http://x/1/q")


# ------------------------------------------------------------------ peers that misbehave


class RawServer:
    """A TCP server on 127.0.0.1 that answers each request as `answer(connection, request)` says:
    bytes to send (and keep the connection), None to close the connection without answering."""

    def __init__(self, answer: Callable[[int, int, bytes], bytes | None]) -> None:
        self.answer = answer
        self.connections = 0
        self.requests: list[bytes] = []
        self.server = StreamServer(("127.0.0.1", 0), self.handle)
        self.server.start()
        self.url = f"http://127.0.0.1:{self.server.server_port}"

    def handle(self, sock: socket.socket, address: Any) -> None:
        self.connections += 1
        connection, on_connection = self.connections, 0
        buffer = b""
        while True:
            read = read_request(sock, buffer)
            if read is None:
                return
            request, buffer = read
            self.requests.append(request)
            on_connection += 1
            reply = self.answer(connection, on_connection, request)
            if reply is None:
                sock.close()
                return
            sock.sendall(reply)

    def stop(self) -> None:
        self.server.stop(timeout=1)


def http_reply(status: int, body: bytes, headers: dict[str, str] | None = None) -> bytes:
    lines = [f"HTTP/1.1 {status} X", f"Content-Length: {len(body)}"]
    lines += [f"{name}: {value}" for name, value in (headers or {}).items()]
    return ("\r\n".join(lines) + "\r\n\r\n").encode() + body


EMPTY_RECEIVE = http_reply(200, b"{}", {"Content-Type": "application/x-amz-json-1.0", "x-amzn-RequestId": "r-1"})


def credentials() -> Any:
    return boto3.session.Session(aws_access_key_id="AKIDEXAMPLE", aws_secret_access_key="secret/key+1",
                                 aws_session_token="token=").get_credentials()


@pytest.fixture
def raw_server() -> Iterator[Callable[..., RawServer]]:
    made: list[RawServer] = []

    def make(answer: Callable[[int, int, bytes], bytes | None]) -> RawServer:
        made.append(RawServer(answer))
        return made[-1]

    yield make
    for server in made:
        server.stop()


def test_a_pooled_connection_closed_by_the_server_is_resent_once_on_a_new_one(
    raw_server: Callable[..., RawServer]
) -> None:
    # the first connection answers once, then is dropped when reused: as an idle keep-alive
    # connection that the server closed just as the next request went out
    server = raw_server(lambda connection, nth, request: EMPTY_RECEIVE if connection > 1 or nth == 1 else None)
    wire = SqsWire(server.url, "us-east-1", credentials(), concurrency=1, read_timeout=5)
    assert wire.receive_message(QueueUrl="q")["ResponseMetadata"] == {"HTTPStatusCode": 200, "RequestId": "r-1"}
    assert wire.receive_message(QueueUrl="q").get("Messages") is None
    assert (server.connections, len(server.requests)) == (2, 3)
    assert wire.delete_message_batch(QueueUrl="q", Entries=[])["ResponseMetadata"]["HTTPStatusCode"] == 200
    assert (server.connections, len(server.requests)) == (2, 4)  # the new connection is kept


def test_a_server_that_drops_the_request_on_a_new_connection_gets_it_once_then_an_aws_error(
    raw_server: Callable[..., RawServer]
) -> None:
    # only a reused connection can be stale; the standard-mode retries (tested on their own) take care of
    # the rest, so this wire makes one attempt per call
    server = raw_server(lambda connection, nth, request: None)
    wire = SqsWire(server.url, "us-east-1", credentials(), concurrency=1, read_timeout=5,
                   retrier=Retrier(random.Random(0), max_attempts=1))
    with pytest.raises(botocore.exceptions.ConnectionClosedError) as raised:
        wire.delete_message_batch(QueueUrl="q", Entries=[{"Id": "0", "ReceiptHandle": "h"}])
    assert isinstance(raised.value, AWS_ERRORS) and not is_sender_fault(raised.value)
    assert len(server.requests) == 1
    with pytest.raises(botocore.exceptions.ConnectionClosedError):  # the pool is still usable
        wire.receive_message(QueueUrl="q")
    assert len(server.requests) == 2


def test_a_silent_server_is_a_read_timeout(raw_server: Callable[..., RawServer]) -> None:
    def never(connection: int, nth: int, request: bytes) -> bytes | None:
        gevent.sleep(30)
        return None

    server = raw_server(never)
    wire = SqsWire(server.url, "us-east-1", credentials(), concurrency=1, read_timeout=0.5, connect_timeout=0.2,
                   retrier=Retrier(random.Random(0), max_attempts=1))
    started = time.monotonic()
    with pytest.raises(botocore.exceptions.ReadTimeoutError) as raised:
        wire.receive_message(QueueUrl="q", WaitTimeSeconds=0)
    assert 0.4 < time.monotonic() - started < 3
    assert isinstance(raised.value, AWS_ERRORS) and len(server.requests) == 1  # not resent at once as if stale


@pytest.mark.parametrize(("reply", "code", "sender_fault"), [
    (http_reply(400, json.dumps({"__type": "com.amazonaws.sqs#ThrottlingException", "message": "slow down"}).encode(),
                {"x-amzn-query-error": "RequestThrottled;Sender"}), "RequestThrottled", False),
    (http_reply(403, json.dumps({"__type": "com.amazon.coral.service#InvalidSignatureException",
                                 "Message": "The request signature we calculated does not match"}).encode()),
     "InvalidSignatureException", True),
    (http_reply(502, b"<html>Bad Gateway</html>"), "502", False),
    (http_reply(500, json.dumps({"__type": "InternalError:http://internal/", "message": "x"}).encode(),
                {"x-amzn-query-error": "InternalError;Receiver"}), "InternalError", False),
])
def test_error_answers_map_to_botocore_codes(
    raw_server: Callable[..., RawServer], reply: bytes, code: str, sender_fault: bool
) -> None:
    server = raw_server(lambda connection, nth, request: reply)
    wire = SqsWire(server.url, "us-east-1", credentials(), concurrency=1, read_timeout=5)
    with pytest.raises(botocore.exceptions.ClientError) as raised:
        wire.delete_message_batch(QueueUrl="q", Entries=[])
    assert error_code(raised.value) == code
    assert is_sender_fault(raised.value) is sender_fault
    assert raised.value.response["ResponseMetadata"]["HTTPStatusCode"] == int(reply.split(b" ")[1])
    assert raised.value.operation_name == "DeleteMessageBatch"


def test_a_garbled_success_answer_is_an_aws_error(raw_server: Callable[..., RawServer]) -> None:
    server = raw_server(lambda connection, nth, request: http_reply(200, b"<xml/>"))
    wire = SqsWire(server.url, "us-east-1", credentials(), concurrency=1, read_timeout=5)
    with pytest.raises(AWS_ERRORS):
        wire.receive_message(QueueUrl="q")



def test_a_bare_5xx_is_described_as_an_answer_without_an_aws_error(raw_server: Callable[..., RawServer]) -> None:
    server = raw_server(lambda connection, nth, request: http_reply(500, b""))
    wire = SqsWire(server.url, "us-east-1", credentials(), concurrency=1, read_timeout=5, retrier=Retrier(random.Random(1)))
    with pytest.raises(botocore.exceptions.ClientError) as raised:
        wire.receive_message(QueueUrl="q")
    assert describe_error(raised.value) == "HTTP 500 with no AWS error in the answer"


@pytest.mark.parametrize("bad", [
    {"MessageAttributes": ["not", "a", "map"]},
    {"MessageAttributes": {"blob": {"DataType": "Binary", "BinaryValue": "not base64!"}}},
    {"MessageAttributes": {"blobs": {"DataType": "Binary", "BinaryListValues": ["abc"]}}},
    {"Attributes": ["ApproximateReceiveCount", "1"]},
], ids=["attributes-a-list", "binary-not-base64", "binary-list-not-base64", "system-attributes-a-list"])
def test_one_message_we_cannot_read_is_skipped_and_the_rest_of_the_answer_delivered(
    raw_server: Callable[..., RawServer], bad: dict[str, Any], caplog: pytest.LogCaptureFixture,
) -> None:
    good = {"MessageId": "m-good", "ReceiptHandle": "rh-good", "Body": "fine", "MD5OfBody": ""}
    broken = {"MessageId": "m-bad", "ReceiptHandle": "rh-secret", "Body": "x", **bad}
    answer = json.dumps({"Messages": [broken, good]}).encode()
    server = raw_server(lambda connection, nth, request: http_reply(200, answer, {"Content-Type": "application/x-amz-json-1.0"}))
    wire = SqsWire(server.url, "us-east-1", credentials(), concurrency=1, read_timeout=5)
    queue = SqsQueue(wire, QueueConfig(name="q"), server.url + "/1/q", "arn:aws:sqs:us-east-1:1:q", Registry().count)
    messages = queue.receive(10, 0)
    assert [message.message_id for message in messages] == ["m-good"]
    assert "received a message we cannot read" in caplog.text and "m-bad" in caplog.text
    assert "rh-secret" not in caplog.text

def sigv4_signature(request: bytes, secret: str) -> tuple[str, str]:
    """Recompute SigV4 from the bytes a server received (independently of botocore): (expected, sent)."""
    head, _, body = request.partition(b"\r\n\r\n")
    request_line, *header_lines = head.decode("latin-1").split("\r\n")
    method, path, _ = request_line.split(" ")
    headers: dict[str, str] = {}
    for line in header_lines:
        name, _, value = line.partition(":")
        headers[name.strip().lower()] = value.strip()
    authorization = headers["authorization"]
    credential = authorization.split("Credential=")[1].split(",")[0]
    signed = authorization.split("SignedHeaders=")[1].split(",")[0].split(";")
    sent = authorization.split("Signature=")[1]
    _, date, region, service, _ = credential.split("/")
    canonical = "\n".join([method, path, "", *(f"{name}:{headers[name]}" for name in signed), "",
                           ";".join(signed), hashlib.sha256(body).hexdigest()])
    scope = f"{date}/{region}/{service}/aws4_request"
    to_sign = "\n".join(["AWS4-HMAC-SHA256", headers["x-amz-date"], scope,
                         hashlib.sha256(canonical.encode()).hexdigest()])
    key = ("AWS4" + secret).encode()
    for part in (date, region, service, "aws4_request"):
        key = hmac.new(key, part.encode(), hashlib.sha256).digest()
    return hmac.new(key, to_sign.encode(), hashlib.sha256).hexdigest(), sent


def test_the_request_is_aws_json_signed_over_what_is_sent(raw_server: Callable[..., RawServer]) -> None:
    server = raw_server(lambda connection, nth, request: EMPTY_RECEIVE)
    wire = SqsWire(server.url, "eu-west-3", credentials(), concurrency=1, read_timeout=5)
    wire.receive_message(QueueUrl="https://sqs.eu-west-3.amazonaws.com/1/q\u00e9", MaxNumberOfMessages=10,
                         WaitTimeSeconds=20, VisibilityTimeout=300, **RECEIVE_ALL)
    (request,) = server.requests
    head, _, body = request.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").lower().split("\r\n")
    assert lines[0] == "post / http/1.1"
    assert [line for line in lines if line.startswith("host:")] == [f"host: 127.0.0.1:{server.server.server_port}"]
    assert "x-amz-target: amazonsqs.receivemessage" in lines
    assert "content-type: application/x-amz-json-1.0" in lines
    assert "x-amz-security-token: token=" in lines
    assert json.loads(body) == {"QueueUrl": "https://sqs.eu-west-3.amazonaws.com/1/q\u00e9", "MaxNumberOfMessages": 10,
                                "WaitTimeSeconds": 20, "VisibilityTimeout": 300, **RECEIVE_ALL}
    expected, sent = sigv4_signature(request, "secret/key+1")
    assert sent == expected
    assert "/eu-west-3/sqs/aws4_request" in head.decode()
    assert "host" in head.decode().split("SignedHeaders=")[1].split(",")[0].split(";")


# ------------------------------------------------------------------ wired in: clients and SqsQueue


def daemon_config(**aws: Any) -> Config:
    return Config(source="test", queues=(QueueConfig(name="q"),), aws=AwsConfig(**aws),
                  targets={"default": HttpTargetConfig(name="default", url="http://127.0.0.1:9/")})


def wire_of(clients: Any) -> SqsWire:
    assert isinstance(clients.sqs, SqsWire), clients.sqs
    return clients.sqs


def test_build_clients_aims_the_wire_where_a_boto3_sqs_client_would_go(
    moto_server: MotoServer, monkeypatch: pytest.MonkeyPatch, sqs: Any, make_queue: Callable[..., Queue]
) -> None:
    queue = make_queue()
    sqs.send_message(QueueUrl=queue.url, MessageBody="routed")
    dead = f"http://127.0.0.1:{free_port()}"
    monkeypatch.setenv("AWS_ENDPOINT_URL", dead)
    monkeypatch.setenv("AWS_ENDPOINT_URL_SQS", moto_server.url)  # the service-specific one wins
    wire = wire_of(build_clients(daemon_config()))
    client = boto3.session.Session().client("sqs", region_name="us-east-1")
    assert wire.endpoint_url == client.meta.endpoint_url == moto_server.url
    assert wire.region == client.meta.region_name == "us-east-1"
    elsewhere = wire_of(build_clients(daemon_config(region="eu-central-1")))
    assert elsewhere.region == "eu-central-1"
    response = wire.receive_message(QueueUrl=queue.url, VisibilityTimeout=0)
    assert [m["Body"] for m in response["Messages"]] == ["routed"]
    assert wire.get_queue_url(QueueName=queue.name)["QueueUrl"] == queue.url
    monkeypatch.delenv("AWS_ENDPOINT_URL_SQS")
    assert wire_of(build_clients(daemon_config())).endpoint_url == dead
    configured = build_clients(daemon_config(endpoint_url=moto_server.url))  # [aws] endpoint_url
    assert wire_of(configured).endpoint_url == moto_server.url


def test_behind_a_proxy_or_on_fips_endpoints_sqs_stays_on_boto3(monkeypatch: pytest.MonkeyPatch,
                                                                 moto_server: MotoServer) -> None:
    monkeypatch.setenv("HTTP_PROXY", "http://127.0.0.1:3128")
    monkeypatch.setenv("NO_PROXY", "")
    assert not isinstance(build_clients(daemon_config()).sqs, SqsWire)
    monkeypatch.setenv("NO_PROXY", "127.0.0.1")
    assert isinstance(build_clients(daemon_config()).sqs, SqsWire)
    monkeypatch.delenv("AWS_ENDPOINT_URL", raising=False)
    monkeypatch.delenv("AWS_ENDPOINT_URL_SQS", raising=False)
    monkeypatch.setenv("AWS_USE_FIPS_ENDPOINT", "true")
    fips = build_clients(daemon_config(region="us-east-1")).sqs
    assert not isinstance(fips, SqsWire) and fips.meta.endpoint_url == "https://sqs-fips.us-east-1.amazonaws.com"


def test_send_and_attributes_on_the_wire_match_boto3(sqs: Any, make_queue: Callable[..., Queue]) -> None:
    queue = make_queue()
    wire = SqsWire(sqs.meta.endpoint_url, "us-east-1", credentials(), concurrency=2, read_timeout=10)
    attributes = {"text": {"DataType": "String", "StringValue": "é"},
                  "blob": {"DataType": "Binary", "BinaryValue": b"\x00\xffraw"}}
    sent = wire.send_message(QueueUrl=queue.url, MessageBody="via the wire", MessageAttributes=attributes,
                             DelaySeconds=0)
    (message,) = sqs.receive_message(QueueUrl=queue.url, MessageAttributeNames=["All"])["Messages"]
    assert message["MessageId"] == sent["MessageId"] and message["Body"] == "via the wire"
    assert message["MessageAttributes"]["blob"]["BinaryValue"] == b"\x00\xffraw"
    assert message["MessageAttributes"]["text"]["StringValue"] == "é"
    found = wire.get_queue_attributes(QueueUrl=queue.url, AttributeNames=["QueueArn"])["Attributes"]
    assert found == sqs.get_queue_attributes(QueueUrl=queue.url, AttributeNames=["QueueArn"])["Attributes"]
    with pytest.raises(botocore.exceptions.ClientError) as raised:
        wire.get_queue_url(QueueName="no-such-queue-here")
    with pytest.raises(botocore.exceptions.ClientError) as expected:
        sqs.get_queue_url(QueueName="no-such-queue-here")
    assert raised.value.response["Error"]["Code"] == expected.value.response["Error"]["Code"]
    wire.close()


def test_sqs_queue_on_the_wire_batches_and_counts_stale_receipts(
    sqs: Any, make_queue: Callable[..., Queue], proxy: CountingProxy
) -> None:
    queue, registry = make_queue(), Registry()
    for start in range(0, 12, 10):
        sqs.send_message_batch(QueueUrl=queue.url, Entries=[
            {"Id": str(i), "MessageBody": f"m{start + i}"} for i in range(min(10, 12 - start))])
    client = boto3.client("sqs", endpoint_url=proxy.url, region_name="us-east-1", aws_access_key_id="testing",
                          aws_secret_access_key="testing")
    sqs_q = SqsQueue(wire_for(client), QueueConfig(name=queue.name), queue.url, queue.arn, registry.count)
    messages: list[Message] = []
    while len(messages) < 12:
        batch = sqs_q.receive(10, 0)
        assert batch and all(isinstance(m, Message) for m in batch)
        messages += batch
    stale = dataclasses.replace(messages[3], receipt_handle="not-a-receipt-handle")
    sqs_q.change_visibility(messages[0], 0)
    for message in messages[1:3] + [stale] + messages[4:]:
        sqs_q.delete(message)
    wait_until(lambda: sqs_q.pending_count() == 0 and registry.total("StaleReceipts") == 1, 10,
               message=lambda: f"pending={sqs_q.pending_count()} totals={dict(registry.totals)}")
    wait_until(lambda: count_messages(sqs, queue.url) == 2, 10, message="deletes not applied")
    assert proxy.count("ReceiveMessage") == 2
    assert sorted(len(r.params["Entries"]) for r in proxy.between(0, float("inf"), "DeleteMessageBatch")) == [1, 10]
    assert proxy.count("ChangeMessageVisibilityBatch") == 1
    assert registry.total("SqsRequests", queue.name) == 2 + 2 + 1


def test_sqs_queue_on_the_wire_surfaces_a_dead_endpoint_as_an_aws_error(
    sqs: Any, make_queue: Callable[..., Queue]
) -> None:
    queue = make_queue()
    dead = boto3.client("sqs", endpoint_url=f"http://127.0.0.1:{free_port()}", region_name="us-east-1",
                        aws_access_key_id="testing", aws_secret_access_key="testing")
    sqs_q = SqsQueue(wire_for(dead, read_timeout=2), QueueConfig(name=queue.name), queue.url, queue.arn,
                     Registry().count)
    with pytest.raises(AWS_ERRORS):
        sqs_q.receive(10, 0)


def test_null_members_are_left_out_as_botocore_does(raw_server: Callable[..., RawServer]) -> None:
    server = raw_server(lambda connection, nth, request: http_reply(200, b'{"Messages": null, "Failed": null}'))
    wire = SqsWire(server.url, "us-east-1", credentials(), concurrency=1, read_timeout=5)
    assert "Messages" not in wire.receive_message(QueueUrl="q")
    assert wire.delete_message_batch(QueueUrl="q", Entries=[]).get("Failed", []) == []


def test_https_to_a_server_that_does_not_speak_tls_is_an_aws_error(raw_server: Callable[..., RawServer]) -> None:
    server = raw_server(lambda connection, nth, request: EMPTY_RECEIVE)
    wire = SqsWire(server.url.replace("http://", "https://"), "us-east-1", credentials(), concurrency=1,
                   read_timeout=5, connect_timeout=0.5)
    assert wire.host == f"127.0.0.1:{server.server.server_port}"
    with pytest.raises(AWS_ERRORS):
        wire.receive_message(QueueUrl="q")
    assert server.requests == []


@pytest.mark.parametrize("url", ["https://sqs.eu-west-1.amazonaws.com", "https://sqs.eu-west-1.amazonaws.com:443",
                                 "http://LocalHost:80", "http://127.0.0.1:4566", "https://[::1]:8443", "http://[::1]"])
def test_the_signed_host_is_the_one_botocore_would_sign(url: str) -> None:
    import botocore.auth

    wire = SqsWire(url, "eu-west-1", credentials(), concurrency=1, read_timeout=5)
    assert wire.host == botocore.auth._host_from_url(url)
    wire.close()


def test_the_wire_trusts_botocores_bundle_not_the_system_store(monkeypatch: pytest.MonkeyPatch,
                                                              tmp_path: Path) -> None:
    """A slim container has no system CAs: with nothing configured, the wire must load botocore's bundle
    (certifi), as the boto3 clients do; AWS_CA_BUNDLE and [aws] ca_bundle replace it for both."""
    monkeypatch.delenv("AWS_CA_BUNDLE", raising=False)
    monkeypatch.setenv("AWS_ENDPOINT_URL", "https://sqs.example.test")

    def trusted(clients: Any) -> set[str]:
        context = wire_of(clients).http.tls
        return {cert["serialNumber"] for cert in context.get_ca_certs()}

    default = build_clients(daemon_config(region="us-east-1"))
    bundle = ssl.create_default_context(cafile=get_cert_path(True))
    assert trusted(default) == {cert["serialNumber"] for cert in bundle.get_ca_certs()} and len(trusted(default)) > 50
    cloudwatch = build_clients(replace(daemon_config(region="us-east-1"), name="app")).cloudwatch
    assert cloudwatch is not None and cloudwatch._endpoint.http_session._verify == get_cert_path(True)
    cert, _ = self_signed_certificate(tmp_path)
    ours = {cert_info["serialNumber"] for cert_info in ssl.create_default_context(cafile=str(cert)).get_ca_certs()}
    monkeypatch.setenv("AWS_CA_BUNDLE", str(cert))
    assert trusted(build_clients(daemon_config(region="us-east-1"))) == ours
    monkeypatch.delenv("AWS_CA_BUNDLE")
    configured = build_clients(daemon_config(region="us-east-1", ca_bundle=str(cert)))
    assert trusted(configured) == ours
    cloudwatch = build_clients(replace(daemon_config(region="us-east-1", ca_bundle=str(cert)), name="app")).cloudwatch
    assert cloudwatch is not None and cloudwatch._endpoint.http_session._verify == str(cert)
