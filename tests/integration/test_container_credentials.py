"""The daemon's own fetch from a container credentials endpoint (workerless_gevent/aws/container.py) against a
real endpoint on 127.0.0.1: the whole answer as the child's (botocore's ContainerProvider, run in this process),
botocore's retries and timeouts, and the failures it turns into one line."""

from __future__ import annotations

import json
import os
import socket
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from gevent import pywsgi

from tests.support.aws_environment import bare_aws_environment
from tests.support.moto import free_port
from workerless_gevent.aws.child import parse_answer, request_of
from workerless_gevent.aws.child_answer import resolve
from workerless_gevent.aws.container import ContainerEndpoint
from workerless_gevent.aws.environment import resolve_from_environment
from workerless_gevent.aws.renewal import FetchedResolution
from workerless_gevent.config.model import AwsConfig
from workerless_gevent.errors import StartupError

DOCUMENT = {"AccessKeyId": "ASIAEXAMPLE", "SecretAccessKey": "secret", "Token": "session-token",
            "Expiration": "2030-01-02T03:04:05Z", "RoleArn": "arn:aws:iam::123456789012:role/task"}


class ScriptedEndpoint:
    """Answers each GET with the next (status, body) of `script`, the last one for good; records the requests."""

    def __init__(self, script: list[tuple[int, bytes]]) -> None:
        self.script = script
        self.requests: list[dict[str, Any]] = []
        self.server = pywsgi.WSGIServer(("127.0.0.1", free_port()), self.app, log=None)

    def app(self, environ: dict[str, Any], start_response: Any) -> list[bytes]:
        self.requests.append({"path": environ["PATH_INFO"], "query": environ.get("QUERY_STRING", ""),
                              "authorization": environ.get("HTTP_AUTHORIZATION"), "accept": environ.get("HTTP_ACCEPT")})
        status, body = self.script[min(len(self.requests), len(self.script)) - 1]
        start_response(f"{status} X", [("Content-Length", str(len(body)))])
        return [body]

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_port}/v2/credentials?role=task"


@pytest.fixture
def bare_environment(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """No AWS variable and no AWS file, as on a Fargate task with a task role."""
    bare_aws_environment(monkeypatch, tmp_path)
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    monkeypatch.setenv("AWS_REGION", "eu-west-1")


def serve(script: list[tuple[int, bytes]]) -> Iterator[ScriptedEndpoint]:
    endpoint = ScriptedEndpoint(script)
    endpoint.server.start()
    yield endpoint
    endpoint.server.stop()


@pytest.fixture
def endpoint(request: pytest.FixtureRequest) -> Iterator[ScriptedEndpoint]:
    yield from serve(getattr(request, "param", [(200, json.dumps(DOCUMENT).encode())]))


@pytest.mark.parametrize("expiration", ["2030-01-02T03:04:05Z", "2030-01-02T03:04:05+00:00",
                                        "2030-01-02T03:04:05.250Z", "2030-01-02T05:04:05+02:00"])
@pytest.mark.parametrize("token_variable", [None, "AWS_CONTAINER_AUTHORIZATION_TOKEN",
                                            "AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE"])
def test_the_daemons_fetch_answers_as_the_child_would(
        monkeypatch: pytest.MonkeyPatch, bare_environment: None, tmp_path: Path, expiration: str,
        token_variable: str | None) -> None:
    for endpoint in serve([(200, json.dumps({**DOCUMENT, "Expiration": expiration}).encode())]):
        monkeypatch.setenv("AWS_CONTAINER_CREDENTIALS_FULL_URI", endpoint.url)
        if token_variable == "AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE":
            (tmp_path / "token").write_text("file-token")
            monkeypatch.setenv(token_variable, str(tmp_path / "token"))
        elif token_variable:
            monkeypatch.setenv(token_variable, "variable-token")
        childs = parse_answer(json.dumps(resolve(request_of(AwsConfig(), "conf/test.toml", ("sqs", "lambda")))), 0)
        ours = resolve_from_environment(AwsConfig(), dict(os.environ), "conf/test.toml", ("sqs", "lambda"))
        assert isinstance(ours, FetchedResolution)
        assert ours.result() == childs
        assert len({json.dumps(request, sort_keys=True) for request in endpoint.requests}) == 1  # both asked alike
        assert endpoint.requests[0]["authorization"] == {None: None, "AWS_CONTAINER_AUTHORIZATION_TOKEN": "variable-token",
                                                         "AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE": "file-token"}[token_variable]


@pytest.mark.parametrize("endpoint", [[(500, b"busy"), (200, b"not json"), (200, json.dumps(DOCUMENT).encode())]],
                         indirect=True)
def test_a_failing_endpoint_is_asked_three_times_a_second_apart(endpoint: ScriptedEndpoint) -> None:
    began = time.monotonic()
    frozen, expires_at = ContainerEndpoint(endpoint.url, {"AWS_CONTAINER_AUTHORIZATION_TOKEN": "t"}, "").fetch()
    assert (frozen.access_key, frozen.secret_key, frozen.token) == ("ASIAEXAMPLE", "secret", "session-token")
    assert expires_at == 1893553445.0  # 2030-01-02T03:04:05Z
    assert len(endpoint.requests) == 3 and time.monotonic() - began >= 2.0
    assert all(r["authorization"] == "t" and r["accept"] == "application/json" for r in endpoint.requests)
    assert endpoint.requests[0]["path"] == "/v2/credentials" and endpoint.requests[0]["query"] == "role=task"


@pytest.mark.parametrize("endpoint", [[(403, b'{"message": "denied"}')]], indirect=True)
def test_an_endpoint_that_keeps_failing_is_one_line(endpoint: ScriptedEndpoint) -> None:
    with pytest.raises(StartupError) as raised:
        ContainerEndpoint(endpoint.url, {}, "").fetch()
    assert str(raised.value) == (f"no AWS credentials from the container endpoint {endpoint.url} (3 attempts): "
                                 'status 403: {"message": "denied"}')
    assert len(endpoint.requests) == 3


@pytest.mark.parametrize("endpoint", [[(200, json.dumps({"AccessKeyId": "A", "SecretAccessKey": "s"}).encode())]],
                         indirect=True)
def test_an_answer_without_token_or_expiration_is_refused_at_once(endpoint: ScriptedEndpoint) -> None:
    with pytest.raises(StartupError, match="not a credentials document"):
        ContainerEndpoint(endpoint.url, {}, "").fetch()
    assert len(endpoint.requests) == 1  # botocore does not retry it either


def test_a_token_file_is_read_at_each_fetch_and_a_newline_in_it_is_refused(
        endpoint: ScriptedEndpoint, tmp_path: Path) -> None:
    token = tmp_path / "token"
    token.write_text("first")
    fetcher = ContainerEndpoint(endpoint.url, {"AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE": str(token),
                                               "AWS_CONTAINER_AUTHORIZATION_TOKEN": "the file wins"}, "")
    fetcher.fetch()
    token.write_text("second")
    fetcher.fetch()
    assert [r["authorization"] for r in endpoint.requests] == ["first", "second"]
    token.write_text("third\n")
    with pytest.raises(StartupError, match="AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE: the token is not a legal header"):
        fetcher.fetch()
    token.unlink()
    with pytest.raises(StartupError, match="AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE: cannot read"):
        fetcher.fetch()
    assert len(endpoint.requests) == 2


def test_an_endpoint_that_never_answers_times_out_at_each_attempt() -> None:
    with socket.socket() as silent:  # accepts connections (the kernel's backlog) and never answers
        silent.bind(("127.0.0.1", 0))
        silent.listen(8)
        url = f"http://127.0.0.1:{silent.getsockname()[1]}/creds"
        began = time.monotonic()
        with pytest.raises(StartupError, match=r"\(3 attempts\): TimeoutError"):
            ContainerEndpoint(url, {}, "").fetch()
        # 3 reads of 2 s and 2 pauses of 1 s; the watchdog strikes up to 0.25 s late
        assert 7.5 <= time.monotonic() - began < 20
