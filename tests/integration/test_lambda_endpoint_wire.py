"""A Lambda target's own endpoint_url on the wire, against the stand-in emulator: its own client, signed or not,
the emulator's answers in boto3's shape, and the target's outcomes from them."""

from __future__ import annotations

import json
import random
import time
from collections.abc import Iterator
from typing import Any, Callable

import botocore.exceptions
import pytest

from tests.integration.test_sqs_wire import credentials
from tests.support import MotoServer, Queue
from tests.support.lambda_emulator import LambdaEmulator
from tests.support.lambda_handlers.sqs_batch import handler
from tests.unit.sqs_messages import raw_message
from workerless_gevent.aws.clients import build_clients
from workerless_gevent.config.model import Config, LambdaTargetConfig, QueueConfig
from workerless_gevent.lifecycle.assembly import build_parts
from workerless_gevent.message import Message
from workerless_gevent.metrics import Registry
from workerless_gevent.targets import SUCCESS, QueueInfo
from workerless_gevent.targets.aws_lambda import LambdaTarget
from workerless_gevent.wire.aws_lambda import LambdaWire

REGION = "us-east-1"


@pytest.fixture
def emulator() -> Iterator[LambdaEmulator]:
    server = LambdaEmulator(handler, timeout_seconds=2)
    server.start()
    yield server
    server.stop()


def messages(queue: str, *bodies: str) -> list[Message]:
    return [Message.from_sqs(queue, raw_message(message_id=f"m{index}", body=body), time.time(), time.time() + 30)
            for index, body in enumerate(bodies)]


def test_an_endpoint_url_target_gets_its_own_unsigned_wire_straight_to_the_endpoint(
    monkeypatch: pytest.MonkeyPatch, moto_server: MotoServer, emulator: LambdaEmulator, sqs: Any,
    make_queue: Callable[..., Queue],
) -> None:
    monkeypatch.setenv("HTTP_PROXY", "http://127.0.0.1:9")  # nothing listens: a proxied call would fail
    monkeypatch.setenv("NO_PROXY", "127.0.0.1")  # moto's address; the endpoint's name is not in it
    endpoint_url = emulator.url.replace("127.0.0.1", "localhost")
    queue = make_queue()
    config = Config(source="test", concurrency=7, queues=(QueueConfig(name=queue.name, target="local"),),
                    targets={"local": LambdaTargetConfig(name="local", function="function", timeout=20,
                                                         endpoint_url=endpoint_url),
                             "remote": LambdaTargetConfig(name="remote", function="billing-fn")})
    parts = build_parts(config, build_clients(config, REGION), Registry(), random.Random(1))
    local, remote = parts.targets["local"], parts.targets["remote"]
    assert isinstance(local, LambdaTarget) and isinstance(remote, LambdaTarget)
    assert remote.client.endpoint_url == moto_server.url  # the daemon's Lambda client, where AWS_ENDPOINT_URL says
    wire = local.client
    assert isinstance(wire, LambdaWire)
    assert (wire.endpoint_url, wire.is_signed, wire.is_emulator, wire.read_timeout) == (endpoint_url, False, True, 30)

    info = QueueInfo(name=queue.name, arn=queue.arn, region=REGION, is_fifo=False)
    outcomes = local.deliver(info, messages(queue.name, "a", "fail-b", "c"))
    assert [outcome is SUCCESS for outcome in outcomes] == [True, False, True]
    assert outcomes[1].error_type == "BatchItemFailure"
    [invocation] = emulator.invocations
    assert invocation.function_name == "function"
    assert not {"authorization", "x-amz-date", "x-amz-security-token"} & set(invocation.headers)

    # A reload that replaces or removes the target closes it: its own wire's connections go with it.
    assert not wire.http.closed
    local.close()
    assert wire.http.closed


def test_a_signed_endpoint_wire_signs_as_for_lambda(emulator: LambdaEmulator) -> None:
    wire = LambdaWire(emulator.url, REGION, credentials(), concurrency=2, read_timeout=10, is_emulator=True)
    response = wire.invoke(FunctionName="function", Payload=json.dumps({"Records": []}))
    assert (response["StatusCode"], response["Payload"].read()) == (200, b'{"batchItemFailures": []}')
    headers = emulator.invocations[-1].headers
    assert headers["authorization"].startswith("AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/")
    assert "/us-east-1/lambda/aws4_request" in headers["authorization"]
    assert headers["x-amz-security-token"] == "token="


def test_the_emulators_answers_come_back_in_boto3s_shape(emulator: LambdaEmulator) -> None:
    wire = LambdaWire(emulator.url, REGION, None, concurrency=2, read_timeout=10, is_signed=False, is_emulator=True)
    event = {"Records": [{"messageId": "m1", "body": "raise", "attributes": {"ApproximateReceiveCount": "1"}}]}
    response = wire.invoke(FunctionName="function", Payload=json.dumps(event), Qualifier="live")
    assert (response["StatusCode"], response["FunctionError"]) == (200, "Unhandled")
    error = json.loads(response["Payload"].read())
    assert (error["errorType"], error["errorMessage"]) == ("ValueError", "cannot process m1")
    with pytest.raises(botocore.exceptions.ClientError) as raised:
        wire.invoke(FunctionName="billing-fn", Payload=b"{}")
    assert raised.value.response["Error"]["Code"] == "ResourceNotFoundException"
    assert "serves no function named 'billing-fn'" in raised.value.response["Error"]["Message"]


def test_an_answer_over_lambdas_limit_fails_the_invocation_and_is_not_read_whole() -> None:
    """Lambda answers at most 6 MB; an endpoint_url's emulator that sends 9 MiB fails the invocation past 7 MiB,
    with a line that says so, and the next invocation goes on a new connection."""

    def sized(event: dict[str, Any], context: Any) -> Any:
        return "x" * (9 * 1024 * 1024) if event.get("big") else {"batchItemFailures": []}

    server = LambdaEmulator(sized, timeout_seconds=10)
    server.start()
    try:
        wire = LambdaWire(server.url, REGION, None, concurrency=2, read_timeout=10, is_signed=False, is_emulator=True)
        with pytest.raises(botocore.exceptions.HTTPClientError) as raised:
            wire.invoke(FunctionName="function", Payload=json.dumps({"big": True}))
        assert f"answered HTTP 200 with a body over {7 * 1024 * 1024} bytes (Lambda's limit is 6 MB)" in str(
            raised.value)
        response = wire.invoke(FunctionName="function", Payload=json.dumps({"Records": []}))
        assert (response["StatusCode"], response["Payload"].read()) == (200, b'{"batchItemFailures": []}')
        assert len(server.invocations) == 2  # the first was not sent again
    finally:
        server.stop()
