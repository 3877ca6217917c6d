"""The daemon's own AssumeRoleWithWebIdentity (workerless_gevent/aws/web_identity.py) against a fake STS on
127.0.0.1 (tests/support/sts.py): the whole answer as the child's (botocore's chain run in this process) with the
same request; botocore's retries (a 500 and IDPCommunicationError three times, InvalidIdentityToken once); the
failures it turns into one line."""

from __future__ import annotations

import os
import random
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.aws_environment import childs_answer, ours
from tests.support.sts import FakeSts
from workerless_gevent.aws.web_identity import WebIdentity
from workerless_gevent.errors import StartupError

SERVICES = ("sqs", "lambda")
ROLE = "arn:aws:iam::123456789012:role/app"


@pytest.fixture
def sts(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[FakeSts]:
    """No AWS variable but web identity's and no AWS file, as in an EKS pod with IRSA; STS's keys last an hour."""
    for name in list(os.environ):
        if name.startswith(("AWS_", "ECS_CONTAINER_METADATA")) or name.lower().endswith("_proxy"):
            monkeypatch.delenv(name)
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "config"))
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "credentials"))
    (tmp_path / "token").write_text("eyJhbGciOiJSUzI1NiJ9.first")
    service = FakeSts(lifetime=3600)
    service.start()
    for name, value in {"AWS_WEB_IDENTITY_TOKEN_FILE": str(tmp_path / "token"), "AWS_ROLE_ARN": ROLE,
                        "AWS_ENDPOINT_URL_STS": service.url, "AWS_REGION": "eu-west-1"}.items():
        monkeypatch.setenv(name, value)
    yield service
    service.stop()


@pytest.mark.parametrize("variables", [{"AWS_ROLE_SESSION_NAME": "worker-7"}, {}, {"AWS_DEFAULT_REGION": "us-east-2"}])
def test_the_daemons_call_answers_as_the_child_would_with_the_same_request(
        sts: FakeSts, monkeypatch: pytest.MonkeyPatch, variables: dict[str, str]) -> None:
    for name, value in variables.items():
        monkeypatch.setenv(name, value)
    childs = childs_answer(SERVICES)
    answer = ours(SERVICES).result()
    assert answer._replace(credentials=None, expires_at=None) == childs._replace(credentials=None, expires_at=None)
    assert childs.credentials == ("ASIA0000000000000001", "secret", "sts-session-1")
    assert answer.credentials == ("ASIA0000000000000002", "secret", "sts-session-2")  # the next keys STS handed out
    # each the Expiration its own call was handed (the two calls are as far apart as the child's exit took)
    assert [childs.expires_at, answer.expires_at] == [request.expires for request in sts.requests]
    botocores, daemons = (request.form for request in sts.requests)
    if "AWS_ROLE_SESSION_NAME" not in variables:  # each botocore-session-<its own start>
        assert daemons["RoleSessionName"].startswith("botocore-session-")
        botocores["RoleSessionName"] = daemons["RoleSessionName"]
    assert daemons == botocores == {"Action": "AssumeRoleWithWebIdentity", "Version": "2011-06-15", "RoleArn": ROLE,
                                    "RoleSessionName": variables.get("AWS_ROLE_SESSION_NAME",
                                                                     daemons["RoleSessionName"]),
                                    "WebIdentityToken": "eyJhbGciOiJSUzI1NiJ9.first"}
    assert [request.signed for request in sts.requests] == [False, False]


def identity(sts: FakeSts) -> WebIdentity:
    return WebIdentity(sts.url, os.environ, "/etc/ssl/unused.pem", random.Random(3))


def test_the_token_file_is_read_at_each_call_and_the_session_name_kept(sts: FakeSts, tmp_path: Path) -> None:
    caller = identity(sts)
    first, _ = caller.fetch()
    (tmp_path / "token").write_text("eyJhbGciOiJSUzI1NiJ9.rotated\n")
    second, expires_at = caller.fetch()
    assert (first.token, second.token) == ("sts-session-1", "sts-session-2") and expires_at is not None
    assert [request.token for request in sts.requests] == ["eyJhbGciOiJSUzI1NiJ9.first",
                                                          "eyJhbGciOiJSUzI1NiJ9.rotated\n"]
    assert len({request.form["RoleSessionName"] for request in sts.requests}) == 1


@pytest.mark.parametrize(("error", "attempts"), [((500, "InternalFailure"), 3), ((400, "IDPCommunicationError"), 3),
                                                 ((400, "Throttling"), 3), ((400, "InvalidIdentityToken"), 1),
                                                 ((403, "AccessDenied"), 1)])
def test_failures_are_retried_as_botocores_standard_mode_retries_them(sts: FakeSts, error: tuple[int, str],
                                                                      attempts: int) -> None:
    sts.error = error
    with pytest.raises(StartupError) as raised:
        identity(sts).fetch()
    plural = "" if attempts == 1 else "s"
    assert str(raised.value) == (f"no AWS credentials from STS AssumeRoleWithWebIdentity at {sts.url} for {ROLE} "
                                 f"({attempts} attempt{plural}): {error[1]}: failing on purpose")
    assert len(sts.requests) == attempts


def test_an_unreadable_token_file_is_one_line_and_no_call(sts: FakeSts, monkeypatch: pytest.MonkeyPatch,
                                                          tmp_path: Path) -> None:
    monkeypatch.setenv("AWS_WEB_IDENTITY_TOKEN_FILE", str(tmp_path / "missing"))
    with pytest.raises(StartupError) as raised:
        identity(sts).fetch()
    assert str(raised.value).startswith(f"AWS_WEB_IDENTITY_TOKEN_FILE: cannot read '{tmp_path / 'missing'}': ")
    assert sts.requests == []


def test_sts_not_listening_is_retried_then_one_line(sts: FakeSts) -> None:
    url = sts.url
    sts.stop()
    with pytest.raises(StartupError, match=r"\(3 attempts\): EndpointConnectionError: Could not connect"):
        WebIdentity(url, os.environ, "/etc/ssl/unused.pem", random.Random(3)).fetch()
