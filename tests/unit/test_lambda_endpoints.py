"""A Lambda target's endpoint_url: its defaults, when it is signed, the emulator's answers read as Lambda's, and
the IAM policy that leaves it out."""

from __future__ import annotations

import json
from typing import Any

import pytest

from workerless_gevent.aws.lambda_endpoints import is_signed
from workerless_gevent.rules import is_loopback_url
from workerless_gevent.commands.iam import build_policy
from workerless_gevent.config.building import build_config
from workerless_gevent.config.model import Config, LambdaTargetConfig
from workerless_gevent.wire.lambda_emulator import as_lambda_answer

TEXT = {"content-type": "text/plain; charset=utf-8"}
CREDENTIALS = object()


def lambda_target(**keys: Any) -> LambdaTargetConfig:
    config = build_config({"queues": [{"name": "jobs"}], "targets": {"default": {"type": "lambda", **keys}}},
                          "test.toml", {})
    target = config.targets["default"]
    assert isinstance(target, LambdaTargetConfig)
    return target


def test_an_endpoint_url_target_invokes_function_one_at_a_time_unless_told_otherwise() -> None:
    target = lambda_target(endpoint_url="http://127.0.0.1:8080")
    assert (target.function, target.max_concurrency, target.endpoint_url) == ("function", 1, "http://127.0.0.1:8080")
    target = lambda_target(endpoint_url="http://lambda:8080", function="billing-fn", max_concurrency=5)
    assert (target.function, target.max_concurrency) == ("billing-fn", 5)
    target = lambda_target(function="billing-fn")
    assert (target.max_concurrency, target.endpoint_url) == (None, None)


@pytest.mark.parametrize(("url", "loopback"), [
    ("http://127.0.0.1:8080", True), ("http://127.8.9.10:8080", True), ("http://[::1]:8080", True),
    ("http://localhost:8080", True), ("http://LOCALHOST:8080", True), ("http://lambda.localhost:8080", True),
    ("http://[::ffff:127.0.0.1]:8080", True), ("http://lambda:8080", False), ("http://10.0.0.7:8080", False),
    ("https://vpce-0a1b.lambda.eu-west-1.vpce.amazonaws.com", False), ("http://localhost.example.com", False),
])
def test_loopback_endpoints_are_never_signed_others_when_there_are_credentials(url: str, loopback: bool) -> None:
    assert is_loopback_url(url) is loopback
    assert is_signed(url, CREDENTIALS) is not loopback
    assert is_signed(url, None) is False


ERROR = {"errorMessage": "cannot process m1", "errorType": "ValueError", "requestId": "r", "stackTrace": []}


@pytest.mark.parametrize(("status", "body", "expected_body"), [
    (200, json.dumps(ERROR).encode(), json.dumps(ERROR).encode()),  # Python's runtime, 200 without the header
    (200, b'{"errorType":"Error","errorMessage":"failure","trace":[]}',  # Node.js'
     b'{"errorType":"Error","errorMessage":"failure","trace":[]}'),
    (200, b'{"errorMessage": "only the message"}', b'{"errorMessage": "only the message"}'),
    (502, b'{"errorType":"Runtime.ExitError","errorMessage":"RequestId: r Error: Runtime exited with error: exit '
          b'status 3"}', b'{"errorType":"Runtime.ExitError","errorMessage":"RequestId: r Error: Runtime exited '
          b'with error: exit status 3"}'),
    (200, b"Task timed out after 2.00 seconds",
     b'{"errorType": "Sandbox.Timedout", "errorMessage": "Task timed out after 2.00 seconds"}'),
])
def test_the_emulators_failures_are_lambdas_function_errors(status: int, body: bytes, expected_body: bytes) -> None:
    assert as_lambda_answer(status, dict(TEXT), body, "function") == (
        200, {**TEXT, "x-amz-function-error": "Unhandled"}, expected_body)


@pytest.mark.parametrize(("status", "body"), [
    (200, b'{"batchItemFailures": [{"itemIdentifier": "m1"}]}'),
    (200, b'{"batchItemFailures": [], "errorMessage": "kept: the handler reported its records"}'),
    (200, b"null"), (200, b""), (200, b'"done"'), (200, b"[1, 2]"), (200, b'{"errorType": 7}'),
    # a result of the handler's own that has an errorType among its fields: no runtime's error writes "processed"
    (200, b'{"processed": 3, "errorType": "none", "errorMessage": ""}'),
    (502, b""),  # an older emulator's crash: an Invoke API error as it is, which fails the batch
    (400, b""),  # an older emulator's answer to an invocation sent while one runs
    (500, b"internal"),
])
def test_results_and_other_answers_stay_as_they_are(status: int, body: bytes) -> None:
    assert as_lambda_answer(status, dict(TEXT), body, "function") == (status, TEXT, body)


def test_an_answer_with_lambdas_own_headers_stays_as_it_is() -> None:
    """An Invoke API that sends them (sam local start-lambda, LocalStack) is read as Lambda."""
    headers = {**TEXT, "x-amz-function-error": "Handled"}
    assert as_lambda_answer(200, headers, b"Task timed out after 1.00 seconds", "f") == (
        200, headers, b"Task timed out after 1.00 seconds")
    headers = {"x-amzn-errortype": "ResourceNotFoundException"}
    assert as_lambda_answer(404, headers, b"404 page not found", "f") == (404, headers, b"404 page not found")


def test_a_function_the_emulator_does_not_serve_is_resource_not_found_naming_it() -> None:
    status, headers, body = as_lambda_answer(404, dict(TEXT), b"404 page not found\n", "billing-fn")
    assert (status, headers["x-amzn-errortype"]) == (404, "ResourceNotFoundException")
    assert json.loads(body) == {"message": "the endpoint serves no function named 'billing-fn': the emulator in "
                                           "AWS's Lambda images serves 'function', the target's default"}


def test_an_endpoint_url_target_needs_no_invoke_permission() -> None:
    config = Config(source="test.toml", targets={
        "local": LambdaTargetConfig(name="local", function="function", endpoint_url="http://127.0.0.1:8080"),
        "remote": LambdaTargetConfig(name="remote", function="billing-fn"),
    })
    invoke = [item for item in build_policy(config, "eu-west-1")["Statement"] if item["Sid"] == "InvokeFunctions"]
    assert invoke == [{"Sid": "InvokeFunctions", "Effect": "Allow", "Action": ["lambda:InvokeFunction"],
                       "Resource": ["arn:aws:lambda:eu-west-1:*:function:billing-fn"]}]
    only_local = Config(source="test.toml", targets={"local": config.targets["local"]})
    assert "InvokeFunctions" not in [item["Sid"] for item in build_policy(only_local, "eu-west-1")["Statement"]]
