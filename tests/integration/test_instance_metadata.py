"""The daemon's own fetch from EC2's instance metadata service (workerless_gevent/aws/instance_metadata.py) against
a fake IMDS on 127.0.0.1 (tests/support/instance_metadata.py): the whole answer, region included, as the child's
(botocore's chain run in this process) with the same requests; IMDSv1 where botocore falls back to it and not
where it may not; botocore's attempts and timeouts; the failures it turns into one line."""

from __future__ import annotations

import json
import random
import socket
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.aws_environment import bare_aws_environment, childs_answer, ours
from tests.support.instance_metadata import ROLE_PATH, InstanceMetadataService
from tests.support.moto import free_port
from workerless_gevent.aws.instance_metadata import InstanceMetadata, Settings, settings_of
from workerless_gevent.errors import ConfigError, StartupError

SERVICES = ("sqs", "lambda")


@pytest.fixture
def bare_environment(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """No AWS variable and no AWS file, as on an EC2 instance with an instance profile."""
    bare_aws_environment(monkeypatch, tmp_path)


@pytest.fixture
def imds(bare_environment: None, monkeypatch: pytest.MonkeyPatch) -> Iterator[InstanceMetadataService]:
    service = InstanceMetadataService()
    service.start()
    monkeypatch.setenv("AWS_EC2_METADATA_SERVICE_ENDPOINT", service.url)
    yield service
    service.stop()


def asked(service: InstanceMetadataService) -> list[tuple[str, str, str | None, bool]]:
    return [(r.method, r.path, r.ttl, r.token is not None) for r in service.requests]


@pytest.mark.parametrize(("variables", "token_status", "offset_expiration"), [
    ({"AWS_REGION": "ap-south-1"}, 200, False),
    ({}, 200, False),  # the region from the availability zone too
    ({"AWS_DEFAULT_REGION": "us-east-2"}, 404, False),  # no IMDSv2: IMDSv1, as botocore
    ({}, 403, True),
    ({"AWS_REGION": "eu-west-1", "AWS_METADATA_SERVICE_NUM_ATTEMPTS": "3"}, 405, False),
])
def test_the_daemons_fetch_answers_as_the_child_would_with_the_same_requests(
        imds: InstanceMetadataService, monkeypatch: pytest.MonkeyPatch, variables: dict[str, str], token_status: int,
        offset_expiration: bool) -> None:
    for name, value in variables.items():
        monkeypatch.setenv(name, value)
    imds.token_status = token_status  # both fetches get the same expiry, far off (not extended)
    imds.fixed_expiration = "2030-01-02T03:04:05" + ("+00:00" if offset_expiration else "Z")
    childs = childs_answer(SERVICES)
    childs_requests, imds.requests = asked(imds), []
    answer = ours(SERVICES).result()
    assert answer._replace(credentials=None) == childs._replace(credentials=None)
    assert answer.credentials == ("ASIA0000000000000002", "secret", "session-2")  # the next keys IMDS handed out
    assert childs.credentials == ("ASIA0000000000000001", "secret", "session-1")
    assert asked(imds) == childs_requests
    assert answer.expires_at == 1893553445.0
    assert (answer.region, answer.where) == ((variables.get("AWS_REGION") or variables.get("AWS_DEFAULT_REGION"),
                                              "AWS_REGION" if "AWS_REGION" in variables else "AWS_DEFAULT_REGION")
                                             if variables else ("eu-west-1", "EC2 instance metadata"))


def test_keys_near_their_expiry_are_extended_as_botocore_extends_them(imds: InstanceMetadataService,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    """IMDS's own form (Z) near its end: botocore reports 15 min plus 2-10 min of jitter from now; +00:00 it
    leaves alone (the e2e tests lean on that to renew in seconds)."""
    monkeypatch.setenv("AWS_REGION", "eu-west-1")
    imds.lifetime = 600
    began = time.time()
    childs, answer = childs_answer(SERVICES), ours(SERVICES).result()
    for expires_at in (childs.expires_at, answer.expires_at):
        assert expires_at is not None and int(began) + 900 + 120 <= expires_at <= time.time() + 900 + 600
    imds.offset_expiration = True
    childs, answer = childs_answer(SERVICES), ours(SERVICES).result()
    assert childs.expires_at is not None and answer.expires_at is not None
    assert abs(answer.expires_at - (began + 600)) < 5 and abs(childs.expires_at - (began + 600)) < 5


def fetcher(service_url: str, attempts: int = 1, timeout_seconds: float = 1.0, v1_disabled: bool = False
            ) -> InstanceMetadata:
    return InstanceMetadata(Settings(service_url, timeout_seconds, attempts, v1_disabled), random.Random(7))


def test_imdsv1_is_not_asked_where_it_is_disabled(imds: InstanceMetadataService) -> None:
    imds.token_status = 403
    with pytest.raises(StartupError) as raised:
        fetcher(imds.url, v1_disabled=True).fetch()
    assert str(raised.value) == (f"no AWS credentials from the EC2 instance metadata service {imds.url} (1 attempt): "
                                 "no IMDSv2 token, and AWS_EC2_METADATA_V1_DISABLED forbids asking without one")
    assert asked(imds) == [("PUT", "/latest/api/token", "21600", False)]


def test_an_imds_requiring_tokens_refuses_a_fallback_to_v1(imds: InstanceMetadataService) -> None:
    imds.token_status, imds.v1_allowed = 404, False
    with pytest.raises(StartupError, match=r"\(1 attempt\): latest/meta-data/iam/security-credentials/: status 401"):
        fetcher(imds.url).fetch()


def test_a_bad_token_request_gives_up_at_once(imds: InstanceMetadataService) -> None:
    imds.token_status = 400
    with pytest.raises(StartupError, match=r"\(3 attempts\): the token request was refused \(400\)"):
        fetcher(imds.url, attempts=3).fetch()
    assert len(imds.requests) == 1


def test_a_token_request_left_unanswered_goes_on_with_imdsv1_after_one_timeout(imds: InstanceMetadataService) -> None:
    imds.hang_tokens = True
    began = time.monotonic()
    frozen, _ = fetcher(imds.url, attempts=3).fetch()
    assert frozen.token == "session-1"
    assert asked(imds) == [("PUT", "/latest/api/token", "21600", False), ("GET", ROLE_PATH, None, False),
                           ("GET", ROLE_PATH + "app-role", None, False)]
    assert 1.0 <= time.monotonic() - began < 5  # one read timeout of 1 s (the watchdog strikes up to 0.25 s late)


def test_a_failing_imds_is_asked_each_attempt_then_one_line(imds: InstanceMetadataService) -> None:
    imds.failing = True
    with pytest.raises(StartupError) as raised:
        fetcher(imds.url, attempts=2, timeout_seconds=10).fetch()  # the answers are checked, not their timing
    assert str(raised.value) == (f"no AWS credentials from the EC2 instance metadata service {imds.url} (2 attempts): "
                                 "latest/meta-data/iam/security-credentials/: status 500: 'failing on purpose'")
    assert [(r.method, r.path) for r in imds.requests] == [("PUT", "/latest/api/token")] * 2 + [("GET", ROLE_PATH)] * 2


def test_an_answer_that_is_not_credentials_is_one_line(imds: InstanceMetadataService) -> None:
    """IMDS answers 200 with an error document when EC2 may not assume the role; botocore finds no keys in it."""
    imds.credentials = lambda: json.dumps({"Code": "AssumeRoleUnauthorizedAccess", "Message": "no"}).encode()  # type: ignore[method-assign]
    with pytest.raises(StartupError, match=r"\(1 attempt\): the answer has no AccessKeyId, SecretAccessKey, Token, "
                                           r"Expiration: AssumeRoleUnauthorizedAccess: no"):
        fetcher(imds.url, timeout_seconds=10).fetch()  # what is checked is the answer, not how soon it came


def test_nothing_listening_is_one_line_at_once(bare_environment: None) -> None:
    url = f"http://127.0.0.1:{free_port()}/"
    began = time.monotonic()
    with pytest.raises(StartupError, match=r"\(2 attempts\): latest/meta-data/iam/security-credentials/: "
                                           r"ConnectionRefusedError"):
        fetcher(url, attempts=2).fetch()
    assert time.monotonic() - began < 2


def test_a_silent_imds_times_out_at_each_request_after_the_timeout_set() -> None:
    with socket.socket() as silent:  # accepts connections (the kernel's backlog) and never answers
        silent.bind(("127.0.0.1", 0))
        silent.listen(16)
        url = f"http://127.0.0.1:{silent.getsockname()[1]}/"
        began = time.monotonic()
        with pytest.raises(StartupError, match=r"\(2 attempts\): latest/meta-data/iam/security-credentials/: "
                                               r"TimeoutError"):
            fetcher(url, attempts=2, timeout_seconds=2).fetch()
        # the token gives up after one silence, then 2 GETs: 3 reads of 2 s; the watchdog strikes up to 0.25 s late
        assert 5.9 <= time.monotonic() - began < 15


def test_no_region_from_imds_is_the_region_chains_own_error(imds: InstanceMetadataService) -> None:
    imds.zone = ""  # an empty answer: botocore's fetcher retries it, then gives up
    with pytest.raises(ConfigError) as childs:
        childs_answer(SERVICES)
    with pytest.raises(ConfigError) as daemons:
        ours(SERVICES).result()
    assert daemons.value.line() == childs.value.line() == ("workerless: no AWS region: set [aws] region, AWS_REGION "
                                                           "or AWS_DEFAULT_REGION (or run on EC2/ECS)")


def test_the_settings_read_as_botocore_reads_them() -> None:
    assert settings_of({}) == Settings("http://169.254.169.254/", 1.0, 1, False)
    assert settings_of({"AWS_EC2_METADATA_SERVICE_ENDPOINT_MODE": "IPv6"}) == Settings("http://[fd00:ec2::254]/", 1.0, 1,
                                                                                       False)
    assert settings_of({"AWS_IMDS_USE_IPV6": "true", "AWS_METADATA_SERVICE_TIMEOUT": "3",
                        "AWS_METADATA_SERVICE_NUM_ATTEMPTS": "2", "AWS_EC2_METADATA_V1_DISABLED": "TRUE"}) == Settings(
        "http://[fd00:ec2::254]/", 3.0, 2, True)
    assert settings_of({"AWS_EC2_METADATA_SERVICE_ENDPOINT": "http://10.0.0.1:8080", "AWS_IMDS_USE_IPV6": "true"}) == \
        Settings("http://10.0.0.1:8080/", 1.0, 1, False)
