"""Self-tests of the shared harness: each fixture does what the other tests rely on."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import urllib.request
from pathlib import Path
from typing import Any, Callable

import gevent
import pytest
from botocore.exceptions import ClientError
from geventhttpclient import HTTPClient

from tests.support import (
    Daemon,
    FakeLambda,
    HttpApp,
    MotoServer,
    Queue,
    count_messages,
    drain_bodies,
    lambda_function_error,
    lambda_result,
    lambda_throttle,
    wait_until,
    write_config,
)
from tests.support.moto import build_client


def test_sqs_send_receive_and_count(sqs: Any, make_queue: Callable[..., Queue]) -> None:
    queue = make_queue(VisibilityTimeout=30)
    for body in ("a", "b", "c"):
        sqs.send_message(QueueUrl=queue.url, MessageBody=body)
    assert count_messages(sqs, queue.url) == 3
    received = sqs.receive_message(QueueUrl=queue.url, MaxNumberOfMessages=1)["Messages"]
    assert count_messages(sqs, queue.url) == 3  # one in flight still counts
    assert sorted(drain_bodies(sqs, queue.url) + [received[0]["Body"]]) == ["a", "b", "c"]
    assert count_messages(sqs, queue.url) == 1
    assert queue.arn.endswith(":" + queue.name)


def test_fifo_queue_keeps_order(sqs: Any, make_queue: Callable[..., Queue]) -> None:
    queue = make_queue(fifo=True, ContentBasedDeduplication="true")
    assert queue.name.endswith(".fifo")
    for i in range(5):
        sqs.send_message(QueueUrl=queue.url, MessageBody=str(i), MessageGroupId="g")
    assert drain_bodies(sqs, queue.url) == [str(i) for i in range(5)]


def test_aws_env_reaches_moto_from_a_subprocess(
    aws_env: dict[str, str], moto_endpoint: str, sqs: Any, make_queue: Callable[..., Queue]
) -> None:
    queue = make_queue()
    assert aws_env["AWS_ENDPOINT_URL"] == moto_endpoint
    assert "AWS_PROFILE" not in aws_env
    code = "import boto3; print(boto3.client('sqs').list_queues()['QueueUrls'])"
    out = subprocess.run(
        [sys.executable, "-c", code], env=aws_env, capture_output=True, text=True, timeout=60
    )
    assert out.returncode == 0, out.stderr
    assert queue.url in out.stdout


def test_http_app_records_a_post(http_app: HttpApp) -> None:
    client = HTTPClient.from_url(http_app.url)
    response = client.post(
        "/work?x=1",
        body=b'{"a": 1}',
        headers={"Content-Type": "application/json", "X-Aws-Sqsd-Msgid": "m1"},
    )
    assert response.status_code == 200
    client.close()
    (request,) = http_app.wait_for_requests(1, timeout=5)
    assert (request.method, request.path, request.query) == ("POST", "/work", "x=1")
    assert request.body == b'{"a": 1}'
    assert request.headers["x-aws-sqsd-msgid"] == request.headers["X-AWS-SQSD-MSGID"] == "m1"
    assert request.headers["Content-Type"] == "application/json"


def test_http_app_reply_and_delay_overlap(http_app: HttpApp) -> None:
    http_app.respond = lambda req: (503, {"Retry-After": "7"}, b"busy")
    http_app.delay = 1.0  # long enough that all five are held at once even on a busy machine

    def post() -> tuple[int, str | None]:
        request = urllib.request.Request(http_app.url + "/", data=b"x", method="POST")
        try:
            urllib.request.urlopen(request, timeout=5)
        except urllib.error.HTTPError as error:
            return error.code, error.headers["Retry-After"]
        return 200, None

    jobs = [gevent.spawn(post) for _ in range(5)]
    gevent.joinall(jobs, timeout=5, raise_error=True)
    assert [job.value for job in jobs] == [(503, "7")] * 5
    assert http_app.max_concurrent == 5


def lambda_client(url: str, attempts: int = 1) -> Any:
    return build_client("lambda", url, retries={"mode": "standard", "total_max_attempts": attempts})


def test_fake_lambda_result_and_function_error(fake_lambda: FakeLambda) -> None:
    client = lambda_client(fake_lambda.url)
    fake_lambda.script(lambda_result({"batchItemFailures": []}), lambda_function_error("bad"))
    ok = client.invoke(FunctionName="billing", Qualifier="live", Payload=b'{"Records": []}')
    assert ok["StatusCode"] == 200 and "FunctionError" not in ok
    assert json.loads(ok["Payload"].read()) == {"batchItemFailures": []}
    arn = "arn:aws:lambda:us-east-1:123456789012:function:billing"
    failed = client.invoke(FunctionName=arn, Payload=b"{}")
    assert failed["FunctionError"] == "Unhandled"
    assert json.loads(failed["Payload"].read())["errorMessage"] == "bad"
    first, second = fake_lambda.wait_for_invocations(2, timeout=5)
    assert (first.function_name, first.qualifier) == ("billing", "live")
    assert first.payload == {"Records": []} and first.raw == b'{"Records": []}'
    assert (second.function_name, second.qualifier) == (arn, None)


def test_fake_lambda_throttle_is_a_client_error(fake_lambda: FakeLambda) -> None:
    fake_lambda.reply(lambda_throttle())
    with pytest.raises(ClientError) as caught:
        lambda_client(fake_lambda.url).invoke(FunctionName="f", Payload=b"{}")
    assert caught.value.response["Error"]["Code"] == "TooManyRequestsException"
    assert caught.value.response["ResponseMetadata"]["HTTPStatusCode"] == 429
    assert len(fake_lambda.invocations) == 1
    # Standard retry mode retries throttles: a client with 3 attempts invokes 3 times.
    with pytest.raises(ClientError):
        lambda_client(fake_lambda.url, attempts=3).invoke(FunctionName="f", Payload=b"{}")
    assert len(fake_lambda.invocations) == 4


def test_subprocess_reaches_fake_lambda_by_service_endpoint(
    aws_env: dict[str, str], fake_lambda: FakeLambda
) -> None:
    """The e2e pattern: SQS stays on moto, Lambda goes to the stand-in (server keeps serving)."""
    fake_lambda.reply(lambda_function_error("nope"))
    env = {**aws_env, "AWS_ENDPOINT_URL_LAMBDA": fake_lambda.url}
    code = "import boto3; print(boto3.client('lambda').invoke(FunctionName='f')['FunctionError'])"
    out = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=60
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "Unhandled"
    assert [i.function_name for i in fake_lambda.invocations] == ["f"]


def test_moto_lambda_without_docker(moto_server: MotoServer, moto_lambda_function: str) -> None:
    client = moto_server.client("lambda", retries={"total_max_attempts": 1})
    echoed = client.invoke(FunctionName=moto_lambda_function, Payload=b'{"n": 0}')
    assert echoed["StatusCode"] == 200 and echoed["Payload"].read() == b'{"n": 0}'
    moto_server.queue_lambda_results({"batchItemFailures": [{"itemIdentifier": "m1"}]}, "unused")
    queued = client.invoke(
        FunctionName=moto_lambda_function, Qualifier="$LATEST", Payload=b'{"n": 1}'
    )
    assert json.loads(queued["Payload"].read()) == {"batchItemFailures": [{"itemIdentifier": "m1"}]}
    invocations = moto_server.lambda_invocations(moto_lambda_function)
    assert [i.raw for i in invocations] == [b'{"n": 0}', b'{"n": 1}']
    assert invocations[1].qualifier == "$LATEST"
    # the second queued result is left over: the fixture drains it at teardown


def test_moto_lambda_result_queue_starts_empty(
    moto_server: MotoServer, moto_lambda_function: str
) -> None:
    # moto needs a JSON object payload: a bare string or list makes it answer 500
    client = moto_server.client("lambda")
    answer = client.invoke(FunctionName=moto_lambda_function, Payload=b'{"fresh": true}')
    assert answer["Payload"].read() == b'{"fresh": true}'


SCRATCH_DAEMON = """
import signal, sys, time
signal.signal(signal.SIGTERM, lambda *_: (print("stopping", flush=True), sys.exit(3)))
print(f"started {sys.argv[1:]}", flush=True)  # one string: unbuffered, print writes each argument on its own
while True:
    time.sleep(0.05)
"""


def test_daemon_runs_signals_and_logs(daemon: Callable[..., Daemon], tmp_path: Path) -> None:
    program = tmp_path / "scratch.py"
    program.write_text(SCRATCH_DAEMON)
    config = write_config(tmp_path, """
        name = "x"
        """)
    assert config.read_text() == 'name = "x"\n'
    proc = daemon(["-c", str(config)], program=program)
    assert "started" in proc.wait_for_output("started", timeout=10)
    assert str(config) in proc.output()
    proc.send_signal(signal.SIGTERM)
    assert proc.wait_exit(timeout=10) == 3
    assert "stopping" in proc.output()
    leftover = daemon([], program=program)
    leftover.wait_for_output("started", timeout=10)  # killed by the fixture at teardown


def test_wait_until_fails_with_message() -> None:
    assert wait_until(lambda: 42, timeout=1) == 42
    with pytest.raises(AssertionError, match="after 0.05s: never"):
        wait_until(lambda: False, timeout=0.05, message="never")
