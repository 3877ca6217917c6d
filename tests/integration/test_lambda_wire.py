"""LambdaWire, Invoke without botocore's client, against moto's Lambda, the stand-in and peers that misbehave.

Results and errors are compared with what a boto3 client (total_max_attempts=1, as the daemon's)
returns for the same call, and LambdaTarget's outcomes through both, since the target must not be
able to tell them apart. The only retry the wire makes is of a connection that never opened.
"""

from __future__ import annotations

import json
import random
import socket
import time
from collections.abc import Callable, Iterator
from typing import Any

import boto3
import botocore.exceptions
import gevent
import pytest
from botocore.auth import SigV4Auth
from botocore.awsrequest import AWSRequest
from gevent.server import StreamServer

from tests.integration.test_sqs_wire import RawServer, credentials, http_reply, raw_server  # noqa: F401
from tests.support import (
    FakeLambda,
    LambdaReply,
    MotoServer,
    Queue,
    lambda_function_error,
    lambda_result,
    lambda_service_error,
    lambda_throttle,
    wait_until,
)
from tests.support.moto import REGION, build_client, free_port
from tests.support.raw_http import read_request
from tests.unit.sqs_messages import raw_message
from workerless_gevent.aws.clients import build_clients
from workerless_gevent.errors import AWS_ERRORS, describe_error, error_code
from workerless_gevent.config.model import AwsConfig, Config, LambdaTargetConfig, QueueConfig
from workerless_gevent.wire.aws_lambda import LambdaWire, retry_cost_if_nothing_sent
from workerless_gevent.wire.sqs import SqsWire
from workerless_gevent.message import Message
from workerless_gevent.metrics import Registry
from workerless_gevent.wire.retries import BUDGET_TOKENS, Retrier, RetryBudget
from workerless_gevent.lifecycle.assembly import build_parts
from workerless_gevent.targets import QueueInfo
from workerless_gevent.targets.aws_lambda import LambdaTarget

ARN = "arn:aws:lambda:us-east-1:123456789012:function:billing"
PAYLOAD = json.dumps({"Records": [{"body": "h\u00e9llo \U0001f600 \"q\" \\ \t"}]}, ensure_ascii=False).encode()
QUEUE = QueueInfo(name="jobs", arn="arn:aws:sqs:us-east-1:123456789012:jobs", region=REGION, is_fifo=False)
SUCCESS_REPLY = http_reply(200, b'{"ok": true}', {"X-Amz-Executed-Version": "$LATEST", "x-amzn-RequestId": "r-1"})


def boto3_lambda(url: str, **config: Any) -> Any:
    return build_client("lambda", url, retries={"mode": "standard", "total_max_attempts": 1}, **config)


def wire_for(client: Any, **settings: Any) -> LambdaWire:
    settings.setdefault("concurrency", 4)
    settings.setdefault("read_timeout", 5)
    return LambdaWire.for_client(client, client._request_signer._credentials, **settings)


def wire_to(url: str, budget: RetryBudget | None = None, seed: int = 7, **settings: Any) -> LambdaWire:
    settings.setdefault("concurrency", 2)
    settings.setdefault("read_timeout", 5)
    retrier = Retrier(random.Random(seed), budget, cost=retry_cost_if_nothing_sent)
    return LambdaWire(url, REGION, credentials(), retrier=retrier, **settings)


def call(client: Any, **arguments: Any) -> dict[str, Any] | Exception:
    """The response with its Payload read, or the AWS error raised."""
    try:
        response = dict(client.invoke(**arguments))
    except AWS_ERRORS as error:
        return error
    response["Payload"] = response["Payload"].read()
    return response


def without_metadata(response: dict[str, Any] | Exception) -> dict[str, Any]:
    assert isinstance(response, dict), response
    return {key: value for key, value in response.items() if key != "ResponseMetadata"}


def assert_same_error(mine: Any, theirs: Any) -> None:
    assert isinstance(mine, AWS_ERRORS) and isinstance(theirs, AWS_ERRORS), (mine, theirs)
    assert type(mine) is type(theirs)
    assert error_code(mine) == error_code(theirs)
    assert describe_error(mine) == describe_error(theirs)
    if isinstance(theirs, botocore.exceptions.ClientError):
        assert mine.response["Error"] == theirs.response["Error"]
        status = mine.response["ResponseMetadata"]["HTTPStatusCode"]
        assert status == theirs.response["ResponseMetadata"]["HTTPStatusCode"]
        assert mine.operation_name == theirs.operation_name == "Invoke"


def messages(count: int = 3) -> list[Message]:
    return [Message.from_sqs(QUEUE.name, raw_message(message_id=f"m-{n}", body=f"body {n}"), 1.0, 2.0)
            for n in range(count)]


# ------------------------------------------------------------------ moto's Lambda


def test_payloads_come_back_bytes_exact_as_through_boto3(moto_server: MotoServer, moto_lambda_function: str) -> None:
    client = boto3_lambda(moto_server.url)
    wire = wire_for(client)
    echoed = call(wire, FunctionName=moto_lambda_function, InvocationType="RequestResponse", Payload=PAYLOAD)
    assert (without_metadata(echoed)["StatusCode"], without_metadata(echoed)["Payload"]) == (200, PAYLOAD)
    assert without_metadata(echoed) == without_metadata(
        call(client, FunctionName=moto_lambda_function, InvocationType="RequestResponse", Payload=PAYLOAD))
    result = '{"batchItemFailures": [{"itemIdentifier": "m-\u00e9"}]}\n '
    moto_server.queue_lambda_results(result, result)
    mine = call(wire, FunctionName=moto_lambda_function, InvocationType="RequestResponse", Payload=b"{}")
    theirs = call(client, FunctionName=moto_lambda_function, InvocationType="RequestResponse", Payload=b"{}")
    assert without_metadata(mine)["Payload"] == result.encode() == without_metadata(theirs)["Payload"]
    assert isinstance(mine, dict) and mine["ResponseMetadata"]["HTTPStatusCode"] == 200
    sent = moto_server.lambda_invocations(moto_lambda_function)
    assert [(i.raw, i.invocation_type) for i in sent] == [(PAYLOAD, "RequestResponse"), (PAYLOAD, "RequestResponse"),
                                                          (b"{}", "RequestResponse"), (b"{}", "RequestResponse")]
    wire.close()


def test_an_arn_and_a_qualifier_reach_moto(moto_server: MotoServer, moto_lambda_function: str) -> None:
    client = boto3_lambda(moto_server.url)
    arn = client.get_function(FunctionName=moto_lambda_function)["Configuration"]["FunctionArn"]
    wire = wire_for(client)
    response = call(wire, FunctionName=arn, InvocationType="RequestResponse", Payload=PAYLOAD, Qualifier="$LATEST")
    assert without_metadata(response)["StatusCode"] == 200
    (invocation,) = moto_server.lambda_invocations(arn)
    assert (invocation.function_name, invocation.qualifier, invocation.raw) == (arn, "$LATEST", PAYLOAD)
    wire.close()


# ------------------------------------------------------------------ the stand-in: errors and throttles


REPLIES = {
    "success": lambda_result({"batchItemFailures": []}),
    "empty-body": lambda_result(b""),
    "unhandled": lambda_function_error("KeyError: 'order'", "KeyError"),
    "handled": LambdaReply(200, b'{"errorMessage": "no", "errorType": "ValueError"}',
                           {"X-Amz-Function-Error": "Handled"}),
    "throttle-429": lambda_throttle(),
    "not-found-404": lambda_service_error(404, "ResourceNotFoundException", "Function not found: fn"),
    "service-500": lambda_service_error(500, "ServiceException", "internal"),
    "ec2-throttled-502": lambda_service_error(502, "EC2ThrottledException", "ENI throttled"),
    "kms-502": LambdaReply(502, b'{"Type": "User", "Message": "KMS key is disabled"}',
                           {"x-amzn-ErrorType": "KMSDisabledException:http://internal.amazon.com/coral/"}),
    "too-large-413": lambda_service_error(413, "RequestTooLargeException", "Request must be smaller"),
    "html-502": LambdaReply(502, b"<html><body>Bad Gateway</body></html>"),
    "empty-503": LambdaReply(503, b""),
    "text-400": LambdaReply(400, b"not json at all"),
    "code-in-body-400": LambdaReply(400, b'{"code": "aws#InvalidParameterValueException:x", "message": "bad"}'),
}


@pytest.mark.parametrize("name", list(REPLIES))
def test_each_answer_parses_as_boto3_parses_it_and_is_sent_once(fake_lambda: FakeLambda, name: str) -> None:
    fake_lambda.reply(REPLIES[name])
    client = boto3_lambda(fake_lambda.url)
    arguments = {"FunctionName": "fn", "InvocationType": "RequestResponse", "Payload": PAYLOAD}
    mine, theirs = call(wire_for(client), **arguments), call(client, **arguments)
    if isinstance(theirs, Exception):
        assert_same_error(mine, theirs)
    else:
        assert without_metadata(mine) == without_metadata(theirs)
    assert len(fake_lambda.invocations) == 2  # one each: nothing the stand-in answered is repeated
    assert fake_lambda.invocations[0].raw == fake_lambda.invocations[1].raw == PAYLOAD


@pytest.mark.parametrize("name", list(REPLIES))
def test_the_target_judges_each_answer_as_it_does_through_boto3(fake_lambda: FakeLambda, name: str) -> None:
    fake_lambda.reply(REPLIES[name])
    client = boto3_lambda(fake_lambda.url)
    config = LambdaTargetConfig(name="billing", function=ARN, qualifier="live")
    via_wire = LambdaTarget(config, wire_for(client), random.Random(3))
    via_boto3 = LambdaTarget(config, client, random.Random(3))
    mine, theirs = via_wire.deliver(QUEUE, messages()), via_boto3.deliver(QUEUE, messages())
    assert mine == theirs
    is_paused = via_wire.pause.remaining_seconds() > 0
    assert is_paused == (via_boto3.pause.remaining_seconds() > 0) == (name in ("throttle-429", "ec2-throttled-502"))
    sent_by_wire, sent_by_boto3 = fake_lambda.invocations
    assert (sent_by_wire.function_name, sent_by_wire.qualifier, sent_by_wire.invocation_type) == (
        ARN, "live", "RequestResponse")
    assert (sent_by_wire.function_name, sent_by_wire.qualifier, sent_by_wire.raw) == (
        sent_by_boto3.function_name, sent_by_boto3.qualifier, sent_by_boto3.raw)
    assert sent_by_wire.headers["user-agent"].startswith("workerless/")


# ------------------------------------------------------------------ the request on the wire


def test_the_request_is_the_one_botocore_sends_and_signs(raw_server: Callable[..., RawServer]) -> None:  # noqa: F811
    server = raw_server(lambda connection, nth, request: SUCCESS_REPLY)
    name, qualifier = ARN + "-\u00e9 x", "v 1:$LATEST"
    arguments = {"FunctionName": name, "InvocationType": "Event", "Payload": PAYLOAD, "Qualifier": qualifier}
    wire = wire_to(server.url)
    call(wire, **arguments)
    client = boto3.client("lambda", endpoint_url=server.url, region_name=REGION, aws_access_key_id="AKIDEXAMPLE",
                          aws_secret_access_key="secret/key+1", aws_session_token="token=")
    call(client, **arguments)
    mine, theirs = (parse_request(request) for request in server.requests)
    assert mine["line"] == theirs["line"]  # the same escaped path and query
    assert mine["line"].startswith("POST /2015-03-31/functions/arn%3Aaws%3Alambda%3Aus-east-1%3A")
    assert mine["body"] == theirs["body"] == PAYLOAD
    for header in ("host", "x-amz-invocation-type", "x-amz-security-token", "content-length"):
        assert mine["headers"][header] == theirs["headers"][header], header
    # botocore's signature of the wire's request, at the wire's X-Amz-Date
    method, target, _ = mine["line"].split(" ")
    request = AWSRequest(method=method, url=server.url + target, data=mine["body"],
                         headers={"X-Amz-Invocation-Type": "Event"})
    auth = SigV4Auth(credentials().get_frozen_credentials(), "lambda", REGION)
    request.context["timestamp"] = mine["headers"]["x-amz-date"]
    auth._modify_request_before_signing(request)
    auth._inject_signature_to_request(
        request, auth.signature(auth.string_to_sign(request, auth.canonical_request(request)), request))
    assert mine["headers"]["authorization"] == request.headers["Authorization"]
    assert theirs["headers"]["authorization"].split(", Signature=")[0].replace(
        theirs["headers"]["x-amz-date"][:8], "") == mine["headers"]["authorization"].split(", Signature=")[0].replace(
        mine["headers"]["x-amz-date"][:8], "")  # same credential scope and signed headers as boto3's


def parse_request(request: bytes) -> dict[str, Any]:
    head, _, body = request.partition(b"\r\n\r\n")
    line, *lines = head.decode("utf-8").split("\r\n")
    headers = {name.strip().lower(): value.strip() for name, _, value in (h.partition(":") for h in lines)}
    return {"line": line, "headers": headers, "body": body}


# ------------------------------------------------------------------ peers that misbehave


def test_a_refused_connection_is_retried_as_standard_mode_then_raised_as_boto3_raises() -> None:
    url = f"http://127.0.0.1:{free_port()}"
    budget = RetryBudget()
    started = time.monotonic()
    mine = call(wire_to(url, budget), FunctionName="fn", Payload=b"{}")
    assert time.monotonic() - started < 1 + 2 + 1  # jittered pauses of at most 1 s, then 2 s
    assert budget.tokens == BUDGET_TOKENS - 2 * 5  # three attempts
    assert_same_error(mine, call(boto3_lambda(url), FunctionName="fn", Payload=b"{}"))
    assert isinstance(mine, botocore.exceptions.EndpointConnectionError)


def test_an_endpoint_listening_by_the_retry_gets_the_invoke_once() -> None:
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))  # bound, not listening: connections are refused
    url = f"http://127.0.0.1:{listener.getsockname()[1]}"
    budget, requests = RetryBudget(), []

    def answer(sock: socket.socket, address: Any) -> None:
        requests.append(sock.recv(65536))
        sock.sendall(SUCCESS_REPLY)

    def listen_once_refused() -> StreamServer:
        wait_until(lambda: budget.tokens < BUDGET_TOKENS, 10, interval=0.005, message="no retry was paid for")
        listener.listen(16)
        server = StreamServer(listener, answer)
        server.start()
        return server

    opener = gevent.spawn(listen_once_refused)
    # seed 2: the first pause is 0.96 s, ample for the opener to see the spent budget and listen
    response = call(wire_to(url, budget, seed=2), FunctionName="fn", Payload=b"{}")
    opener.get(timeout=10).stop(timeout=1)
    assert without_metadata(response)["Payload"] == b'{"ok": true}'
    assert len(requests) == 1 and budget.tokens == BUDGET_TOKENS - 5 + 5  # the success refills what it spent


def test_a_silent_function_is_a_read_timeout_never_repeated(
    raw_server: Callable[..., RawServer],  # noqa: F811
) -> None:
    def never(connection: int, nth: int, request: bytes) -> bytes | None:
        gevent.sleep(30)
        return None

    server = raw_server(never)
    budget = RetryBudget()
    started = time.monotonic()
    mine = call(wire_to(server.url, budget, read_timeout=0.5, connect_timeout=0.2), FunctionName="fn",
                Payload=b"{}")
    assert 0.4 < time.monotonic() - started < 3
    assert isinstance(mine, botocore.exceptions.ReadTimeoutError)
    assert (len(server.requests), budget.tokens) == (1, BUDGET_TOKENS)
    assert type(call(boto3_lambda(server.url, read_timeout=0.5), FunctionName="fn", Payload=b"{}")) is type(mine)


class ClosingServer:
    """Reads each request, writes `reply` (if any) and closes the connection."""

    def __init__(self, reply: bytes | None) -> None:
        self.reply = reply
        self.requests: list[bytes] = []
        self.server = StreamServer(("127.0.0.1", 0), self.handle)
        self.server.start()
        self.url = f"http://127.0.0.1:{self.server.server_port}"

    def handle(self, sock: socket.socket, address: Any) -> None:
        read = read_request(sock, b"")
        if read is not None:
            self.requests.append(read[0])
            if self.reply is not None:
                sock.sendall(self.reply)
        sock.close()


@pytest.fixture
def closing_server() -> Iterator[Callable[[bytes | None], ClosingServer]]:
    made: list[ClosingServer] = []

    def make(reply: bytes | None) -> ClosingServer:
        made.append(ClosingServer(reply))
        return made[-1]

    yield make
    for server in made:
        server.server.stop(timeout=1)


@pytest.mark.parametrize("reply", [
    None,  # the request is read, then the connection closed without a byte
    b"HTTP/1.1 200 OK\r\nContent-Len",  # boto3 takes this for a success with an empty payload
    b"HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\n{\"batchItemFailures\":",  # boto3: ResponseStreamingError
    b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\n{\"a\":",
], ids=["nothing", "mid-headers", "mid-body", "mid-chunk"])
def test_a_server_closing_before_the_whole_answer_fails_the_batch_and_is_not_repeated(
    closing_server: Callable[[bytes | None], ClosingServer], reply: bytes | None,
) -> None:
    server = closing_server(reply)
    budget = RetryBudget()
    wire = wire_to(server.url, budget)
    mine = call(wire, FunctionName="fn", Payload=b"{}")
    assert isinstance(mine, botocore.exceptions.ConnectionClosedError), mine
    assert (len(server.requests), budget.tokens) == (1, BUDGET_TOKENS)
    outcomes = LambdaTarget(LambdaTargetConfig(name="billing", function="fn"), wire, random.Random(1)).deliver(
        QUEUE, messages(2))
    assert [(o.result.value, o.error_type) for o in outcomes] == [("failure", "ConnectionClosedError")] * 2
    assert len(server.requests) == 2


def test_a_pooled_connection_closed_under_a_sent_invoke_is_not_resent(
    raw_server: Callable[..., RawServer],  # noqa: F811
) -> None:
    # unlike SQS calls, an Invoke that went out on a reused connection may have reached Lambda
    server = raw_server(lambda connection, nth, request: SUCCESS_REPLY if nth == 1 else None)
    wire = wire_to(server.url)
    assert without_metadata(call(wire, FunctionName="fn", Payload=b"{}"))["StatusCode"] == 200
    assert isinstance(call(wire, FunctionName="fn", Payload=b"{}"), botocore.exceptions.ConnectionClosedError)
    assert (server.connections, len(server.requests)) == (1, 2)
    assert without_metadata(call(wire, FunctionName="fn", Payload=b"{}"))["StatusCode"] == 200  # on a new one
    assert (server.connections, len(server.requests)) == (2, 3)


def test_missing_credentials_is_an_aws_error() -> None:
    wire = LambdaWire(f"http://127.0.0.1:{free_port()}", REGION, None, concurrency=1, read_timeout=5)
    with pytest.raises(botocore.exceptions.NoCredentialsError):
        wire.invoke(FunctionName="fn", Payload=b"{}")


# ------------------------------------------------------------------ wired in: build_clients and the target


def daemon_config(**aws: Any) -> Config:
    return Config(source="test", concurrency=7, queues=(QueueConfig(name="q"),), aws=AwsConfig(**aws),
                  targets={"default": LambdaTargetConfig(name="default", function="fn", timeout=30),
                           "other": LambdaTargetConfig(name="other", function="fn2", timeout=50)})


def test_build_clients_aims_the_wire_where_a_lambda_client_would_go(
    monkeypatch: pytest.MonkeyPatch, moto_server: MotoServer, fake_lambda: FakeLambda, sqs: Any,
    make_queue: Callable[..., Queue],
) -> None:
    monkeypatch.setenv("AWS_ENDPOINT_URL_LAMBDA", fake_lambda.url)
    clients = build_clients(daemon_config())
    wire = clients.lambda_
    assert isinstance(wire, LambdaWire)
    client = boto3.session.Session().client("lambda", region_name=REGION)
    assert wire.endpoint_url == client.meta.endpoint_url == fake_lambda.url
    assert wire.region == client.meta.region_name == REGION
    assert (wire.read_timeout, wire.connect_timeout) == (50 + 10, 5)  # the longest timeout + 10
    assert wire.http.slots.counter == 7 + 10
    queue = make_queue()
    config = Config(source="test", queues=(QueueConfig(name=queue.name),),
                    targets={"default": LambdaTargetConfig(name="default", function="fn", timeout=30,
                                                           overload="failure")})
    parts = build_parts(config, clients, Registry(), random.Random(1))
    target = parts.targets["default"]
    assert isinstance(target, LambdaTarget) and target.client is wire
    fake_lambda.reply(lambda_throttle())
    (outcome,) = target.deliver(parts.queue_infos[queue.name], messages(1))
    assert (outcome.result.value, outcome.error_type) == ("retry", "Throttled")
    (invocation,) = fake_lambda.invocations
    assert invocation.headers["user-agent"].startswith("workerless/")


def test_behind_a_proxy_invokes_stay_on_boto3(monkeypatch: pytest.MonkeyPatch, moto_server: MotoServer) -> None:
    monkeypatch.setenv("HTTP_PROXY", "http://127.0.0.1:3128")
    monkeypatch.setenv("NO_PROXY", "")
    clients = build_clients(daemon_config())
    assert clients.lambda_ is not None and not isinstance(clients.lambda_, LambdaWire)
    assert clients.lambda_.meta.config.retries["total_max_attempts"] == 1  # the boto3 client never retries either
    monkeypatch.setenv("NO_PROXY", "127.0.0.1")
    assert isinstance(build_clients(daemon_config()).lambda_, LambdaWire)


def test_the_wire_trusts_the_bundle_the_sqs_wire_trusts(monkeypatch: pytest.MonkeyPatch, tmp_path: Any) -> None:
    from tests.support.tls import self_signed_certificate

    monkeypatch.setenv("AWS_ENDPOINT_URL", "https://aws.example.test")
    cert, _ = self_signed_certificate(tmp_path)
    for clients in (build_clients(daemon_config(region=REGION)),
                    build_clients(daemon_config(region=REGION, ca_bundle=str(cert)))):
        assert isinstance(clients.lambda_, LambdaWire) and isinstance(clients.sqs, SqsWire)
        lambda_tls, sqs_tls = clients.lambda_.http.tls, clients.sqs.http.tls
        assert lambda_tls is not None and sqs_tls is not None
        assert lambda_tls.get_ca_certs() == sqs_tls.get_ca_certs() != []
