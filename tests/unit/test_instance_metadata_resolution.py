"""`aws.environment` for an EC2 instance profile: taken exactly where botocore's own chain gets to its
InstanceMetadataProvider with every provider before it answering nothing, and with the endpoint, timeout,
attempts and IMDSv1 rule its fetcher would use; None (the child) for everything else. No request is sent:
the providers before IMDS read only the environment and files, and IMDS itself is never asked here
(tests/integration/test_instance_metadata.py fetches and compares)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.support.aws_environment import bare_aws_environment
from workerless_gevent.aws.child import Resolved
from workerless_gevent.aws.environment import resolve_from_environment
from workerless_gevent.aws.instance_metadata import InstanceMetadata, Settings
from workerless_gevent.aws.renewal import FetchedResolution
from workerless_gevent.aws.session import open_session, service_endpoint, trusted_ca_bundle
from workerless_gevent.config.model import AwsConfig


@pytest.fixture(autouse=True)
def bare_environment(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """No AWS, ECS or proxy variable, a home without ~/.aws or ~/.boto, the config files pointed at nothing."""
    bare_aws_environment(monkeypatch, tmp_path)


def botocores_imds_settings() -> Settings | None:
    """How botocore's own chain would ask IMDS, if it gets to its InstanceMetadataProvider with no provider before
    it answering and IMDS enabled; None otherwise."""
    import botocore.credentials
    import botocore.session

    resolver = botocore.credentials.create_credential_resolver(botocore.session.Session())
    for provider in resolver.providers:
        if provider.METHOD == "iam-role":
            break
        if provider.load() is not None:
            return None
    else:
        return None
    fetcher = provider._role_fetcher
    if fetcher._disabled:
        return None
    base_url = fetcher.get_base_url()
    return Settings(base_url if base_url.endswith("/") else base_url + "/", float(fetcher._timeout),
                    int(fetcher._num_attempts), bool(fetcher._imds_v1_disabled))


def settings_taken(services: tuple[str, ...] = ("sqs",)) -> Settings:
    answer = resolve_from_environment(AwsConfig(), dict(os.environ), "conf/test.toml", services)
    assert isinstance(answer, FetchedResolution)
    metadata = answer.fetch.__self__  # type: ignore[attr-defined]
    assert isinstance(metadata, InstanceMetadata)
    return metadata.settings


@pytest.mark.parametrize("variables", [
    {},
    {"AWS_EC2_METADATA_DISABLED": "false"},
    {"AWS_EC2_METADATA_SERVICE_ENDPOINT": "http://127.0.0.1:9/"},
    {"AWS_EC2_METADATA_SERVICE_ENDPOINT": "http://127.0.0.1:9"},
    {"AWS_EC2_METADATA_SERVICE_ENDPOINT": "http://imds.internal:8080/prefix"},
    {"AWS_EC2_METADATA_SERVICE_ENDPOINT": "http://[::1]:9/", "AWS_EC2_METADATA_SERVICE_ENDPOINT_MODE": "ipv4"},
    {"AWS_EC2_METADATA_SERVICE_ENDPOINT_MODE": "IPv6"},
    {"AWS_EC2_METADATA_SERVICE_ENDPOINT_MODE": "ipv4", "AWS_IMDS_USE_IPV6": "true"},
    {"AWS_IMDS_USE_IPV6": "True"},
    {"AWS_METADATA_SERVICE_TIMEOUT": "3", "AWS_METADATA_SERVICE_NUM_ATTEMPTS": "4"},
    {"AWS_EC2_METADATA_V1_DISABLED": "true"},
    {"AWS_EC2_METADATA_V1_DISABLED": "no"},
    {"HTTP_PROXY": "http://proxy:3128", "NO_PROXY": "169.254.169.254"},
    {"AWS_DEFAULT_REGION": "us-east-1", "AWS_REGION": "", "AWS_ENDPOINT_URL_SQS": "http://sqs:1"},
])
def test_an_instance_profile_alone_is_fetched_where_and_as_botocore_would(
        monkeypatch: pytest.MonkeyPatch, variables: dict[str, str]) -> None:
    for name, value in {"AWS_REGION": "eu-west-1", **variables}.items():
        monkeypatch.setenv(name, value)
    expected = botocores_imds_settings()
    assert expected is not None
    assert settings_taken(("sqs", "lambda")) == expected
    answer = resolve_from_environment(AwsConfig(), dict(os.environ), "conf/test.toml", ("sqs", "lambda"))
    assert isinstance(answer, FetchedResolution)
    session, region, where = open_session(AwsConfig(), os.environ, "conf/test.toml")
    endpoints = {service: service_endpoint(session, service, region, None) for service in ("sqs", "lambda")}
    assert answer.locate() == Resolved(region=region, where=where, endpoints=endpoints,
                                       ca_bundle=trusted_ca_bundle(None, session), credentials=None, expires_at=None)


def test_with_no_region_anywhere_imds_is_asked_for_it_too() -> None:
    """The region chain's last step (aws.region.ec2_region) is IMDS's: the daemon asks it too, no child."""
    assert botocores_imds_settings() == settings_taken() == Settings("http://169.254.169.254/", 1.0, 1, False)


@pytest.mark.parametrize(("variables", "reason"), [
    ({"AWS_EC2_METADATA_DISABLED": "true"}, "botocore asks no IMDS: no credentials, the child says so"),
    ({"AWS_EC2_METADATA_DISABLED": "TRUE"}, "the same, any case"),
    ({"AWS_EC2_METADATA_SERVICE_ENDPOINT_MODE": "ipv5"}, "botocore raises"),
    ({"AWS_EC2_METADATA_SERVICE_ENDPOINT_MODE": ""}, "botocore raises"),
    ({"AWS_EC2_METADATA_SERVICE_ENDPOINT": ""}, "an empty endpoint: botocore's default, the child's to read"),
    ({"AWS_EC2_METADATA_SERVICE_ENDPOINT": "https://127.0.0.1:9/"}, "not plain HTTP"),
    ({"AWS_EC2_METADATA_SERVICE_ENDPOINT": "127.0.0.1:9"}, "no scheme"),
    ({"AWS_EC2_METADATA_SERVICE_ENDPOINT": "http://u:p@127.0.0.1:9/"}, "user info"),
    ({"AWS_EC2_METADATA_SERVICE_ENDPOINT": "http://127.0.0.1:port/"}, "not a port"),
    ({"AWS_EC2_METADATA_SERVICE_ENDPOINT": "http://127.0.0.1:9/?x=1"}, "a query"),
    ({"AWS_METADATA_SERVICE_TIMEOUT": "1.5"}, "botocore's int() raises"),
    ({"AWS_METADATA_SERVICE_TIMEOUT": " 2"}, "int() reads it, we would not"),
    ({"AWS_METADATA_SERVICE_TIMEOUT": "0"}, "no time at all"),
    ({"AWS_METADATA_SERVICE_NUM_ATTEMPTS": "0"}, "no attempt at all"),
    ({"AWS_CONTAINER_AUTHORIZATION_TOKEN": "t"}, "a container variable"),
    ({"AWS_CONTAINER_CREDENTIALS_FULL_URI": ""}, "an empty container URI: the ContainerProvider fails"),
    ({"HTTP_PROXY": "http://proxy:3128"}, "through a proxy"),
    ({"AWS_ACCESS_KEY_ID": "AKID"}, "half the keys"),
    ({"AWS_SESSION_TOKEN": "t"}, "a key variable"),
    ({"AWS_ROLE_ARN": "arn:aws:iam::123456789012:role/r"}, "web identity without a token: botocore's next steps"),
    ({"AWS_CREDENTIAL_FILE": "/etc/ec2-creds"}, "the EC2 tools' file"),
    ({"BOTO_CONFIG": "/etc/boto"}, "boto2's config"),
    ({"AWS_PROFILE": "prod"}, "a profile"),
    ({"AWS_USE_FIPS_ENDPOINT": "true"}, "FIPS"),
    ({"AWS_REGION": "", "ECS_CONTAINER_METADATA_URI_V4": "http://169.254.170.2/v4/x"}, "ECS task metadata comes first"),
])
def test_an_instance_profile_goes_to_the_child_when_anything_else_could_answer(
        monkeypatch: pytest.MonkeyPatch, variables: dict[str, str], reason: str) -> None:
    for name, value in {"AWS_REGION": "eu-west-1", **variables}.items():
        monkeypatch.setenv(name, value)
    assert resolve_from_environment(AwsConfig(), dict(os.environ), "conf/test.toml", ("sqs",)) is None, reason


@pytest.mark.parametrize("path", ["config", "credentials", ".boto"])
def test_an_instance_profile_beside_any_credentials_file_goes_to_the_child(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path, path: str) -> None:
    """Even empty: the files may hold keys, a role, SSO, a credential_process, or IMDS settings of their own."""
    monkeypatch.setenv("AWS_REGION", "eu-west-1")
    (tmp_path / path).write_text("")
    assert resolve_from_environment(AwsConfig(), dict(os.environ), "conf/test.toml", ("sqs",)) is None


def test_a_container_endpoint_comes_first(monkeypatch: pytest.MonkeyPatch) -> None:
    from workerless_gevent.aws.container import ContainerEndpoint

    monkeypatch.setenv("AWS_REGION", "eu-west-1")
    monkeypatch.setenv("AWS_CONTAINER_CREDENTIALS_RELATIVE_URI", "/v2/credentials")
    answer = resolve_from_environment(AwsConfig(), dict(os.environ), "conf/test.toml", ("sqs",))
    assert isinstance(answer, FetchedResolution)
    assert isinstance(answer.fetch.__self__, ContainerEndpoint)  # type: ignore[attr-defined]


def test_web_identity_comes_first(monkeypatch: pytest.MonkeyPatch) -> None:
    from workerless_gevent.aws.web_identity import WebIdentity

    for name, value in {"AWS_REGION": "eu-west-1", "AWS_WEB_IDENTITY_TOKEN_FILE": "/var/token",
                        "AWS_ROLE_ARN": "arn:aws:iam::123456789012:role/r"}.items():
        monkeypatch.setenv(name, value)
    assert botocores_imds_settings() is None
    answer = resolve_from_environment(AwsConfig(), dict(os.environ), "conf/test.toml", ("sqs",))
    assert isinstance(answer, FetchedResolution)
    assert isinstance(answer.fetch.__self__, WebIdentity)  # type: ignore[attr-defined]


def test_static_keys_without_a_region_still_go_to_the_child(monkeypatch: pytest.MonkeyPatch) -> None:
    """Only IMDS's own keys bring the region from IMDS here; keys alone leave the region chain to the child."""
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "AKID")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "secret")
    assert resolve_from_environment(AwsConfig(), dict(os.environ), "conf/test.toml", ("sqs",)) is None


def test_keys_near_their_end_are_extended_as_botocore_extends_them() -> None:
    """InstanceMetadataFetcher._evaluate_expiration: within 15 min plus a jitter of 2-10 min of the expiry, the
    expiry becomes now plus that much (to the second); only in IMDS's own form."""
    import random

    from workerless_gevent.aws.instance_metadata import extended

    now = 1893553445.5  # 2030-01-02T03:04:05.5Z
    jitter = random.Random(3).randint(120, 600)
    assert extended("2030-01-02T03:14:05Z", now + 600, now, random.Random(3)) == float(int(now + 900 + jitter))
    assert extended("2030-01-02T09:04:05Z", now + 6 * 3600, now, random.Random(3)) == now + 6 * 3600
    assert extended("2030-01-02T03:14:05+00:00", now + 600, now, random.Random(3)) == now + 600
