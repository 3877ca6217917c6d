"""`aws.environment` against the child's answer (`aws.child_answer.resolve`, botocore's chain run in this process) for
environments that say everything themselves, and None wherever only botocore's chain can tell; for a container
credentials endpoint, against where botocore's own chain ends and the URL it would fetch."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.support.aws_environment import bare_aws_environment, childs_answer
from workerless_gevent.aws.child import Resolved
from workerless_gevent.aws.environment import resolve_from_environment
from workerless_gevent.aws.session import open_session, service_endpoint, trusted_ca_bundle
from workerless_gevent.config.model import AwsConfig

KEYS = {"AWS_ACCESS_KEY_ID": "AKIDEXAMPLE", "AWS_SECRET_ACCESS_KEY": "secret"}


@pytest.fixture(autouse=True)
def bare_environment(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """No AWS variable, a home without ~/.aws, the config files pointed at paths that do not exist."""
    bare_aws_environment(monkeypatch, tmp_path)
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")


@pytest.mark.parametrize(("variables", "aws", "services"), [
    ({**KEYS, "AWS_REGION": "eu-west-1", "AWS_ENDPOINT_URL": "http://127.0.0.1:9324"}, AwsConfig(), ("sqs",)),
    ({**KEYS, "AWS_SESSION_TOKEN": "token", "AWS_DEFAULT_REGION": "us-east-1"}, AwsConfig(), ("sqs", "lambda")),
    ({**KEYS, "AWS_SECURITY_TOKEN": "old-token", "AWS_REGION": "cn-north-1"}, AwsConfig(), ("sqs", "lambda")),
    ({**KEYS, "AWS_REGION": "us-gov-west-1", "AWS_CA_BUNDLE": "/etc/ssl/bundle.pem"}, AwsConfig(), ("sqs",)),
    ({**KEYS, "AWS_REGION": "eu-west-1", "AWS_ENDPOINT_URL": "http://all:1", "AWS_ENDPOINT_URL_SQS": "http://sqs:2"},
     AwsConfig(), ("sqs", "lambda")),
    ({**KEYS, "AWS_REGION": "eu-west-1"}, AwsConfig(region="ap-south-1", endpoint_url="http://127.0.0.1:1",
                                                    ca_bundle="/etc/ca.pem"), ("sqs", "lambda")),
])
def test_the_environment_answers_as_the_child_would(monkeypatch: pytest.MonkeyPatch, variables: dict[str, str],
                                                    aws: AwsConfig, services: tuple[str, ...]) -> None:
    for name, value in variables.items():
        monkeypatch.setenv(name, value)
    expected = childs_answer(services, aws)
    assert resolve_from_environment(aws, dict(os.environ), "conf/test.toml", services) == expected


@pytest.mark.parametrize(("variables", "aws"), [
    ({"AWS_REGION": "eu-west-1"}, AwsConfig()),  # no keys: the rest of botocore's chain
    ({"AWS_ACCESS_KEY_ID": "AKID", "AWS_REGION": "eu-west-1"}, AwsConfig()),  # half the keys: botocore's error
    ({**KEYS}, AwsConfig()),  # no region: ECS and EC2 metadata come next
    ({**KEYS, "AWS_REGION": "eu-west-1", "AWS_PROFILE": "prod"}, AwsConfig()),
    ({**KEYS, "AWS_REGION": "eu-west-1"}, AwsConfig(profile="prod")),
    ({**KEYS, "AWS_REGION": "eu-west-1", "AWS_CREDENTIAL_EXPIRATION": "2030-01-01T00:00:00Z"}, AwsConfig()),
    ({**KEYS, "AWS_REGION": "eu-west-1", "AWS_USE_FIPS_ENDPOINT": "true"}, AwsConfig()),
    ({**KEYS, "AWS_REGION": "eu-west-1", "AWS_ENDPOINT_URL": ""}, AwsConfig()),
])
def test_what_only_botocore_can_tell_goes_to_the_child(monkeypatch: pytest.MonkeyPatch, variables: dict[str, str],
                                                       aws: AwsConfig) -> None:
    for name, value in variables.items():
        monkeypatch.setenv(name, value)
    assert resolve_from_environment(aws, dict(os.environ), "conf/test.toml", ("sqs",)) is None


@pytest.mark.parametrize("file_variable", ["AWS_CONFIG_FILE", "AWS_SHARED_CREDENTIALS_FILE"])
def test_an_aws_config_or_credentials_file_goes_to_the_child(monkeypatch: pytest.MonkeyPatch, tmp_path: Path,
                                                            file_variable: str) -> None:
    """Either file may hold a region, an endpoint or FIPS for the default profile."""
    for name, value in {**KEYS, "AWS_REGION": "eu-west-1"}.items():
        monkeypatch.setenv(name, value)
    path = tmp_path / "aws-file"
    path.write_text("[default]\nregion = eu-west-2\n")
    monkeypatch.setenv(file_variable, str(path))
    assert resolve_from_environment(AwsConfig(), dict(os.environ), "conf/test.toml", ("sqs",)) is None


# ---------------------------------------------------------------- the container credentials endpoint

FULL_URI = "http://127.0.0.1:9/v2/credentials"


def botocores_container_url() -> str | None:
    """The URL botocore's own chain would fetch credentials from, if it gets to its ContainerProvider with
    no provider before it answering (each of those reads only the environment and files); None otherwise."""
    import botocore.credentials
    import botocore.session
    from botocore.utils import ContainerMetadataFetcher

    resolver = botocore.credentials.create_credential_resolver(botocore.session.Session())
    for provider in resolver.providers:
        if provider.METHOD == "container-role":
            break
        if provider.load() is not None:
            return None
    env, fetcher = os.environ, ContainerMetadataFetcher()
    if "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI" in env:  # as ContainerProvider._retrieve_or_fail chooses
        url = fetcher.full_url(env["AWS_CONTAINER_CREDENTIALS_RELATIVE_URI"])
    elif "AWS_CONTAINER_CREDENTIALS_FULL_URI" in env:
        url = env["AWS_CONTAINER_CREDENTIALS_FULL_URI"]
    else:
        return None
    try:
        fetcher._validate_allowed_url(url)
    except ValueError:
        return None
    return str(url)


@pytest.fixture
def no_proxy(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in list(os.environ):
        if name.lower() in ("http_proxy", "https_proxy", "all_proxy", "no_proxy"):
            monkeypatch.delenv(name)


@pytest.mark.parametrize("variables", [
    {"AWS_CONTAINER_CREDENTIALS_FULL_URI": FULL_URI},
    {"AWS_CONTAINER_CREDENTIALS_FULL_URI": FULL_URI, "AWS_CONTAINER_AUTHORIZATION_TOKEN": "token"},
    {"AWS_CONTAINER_CREDENTIALS_FULL_URI": FULL_URI, "AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE": "/var/run/token"},
    {"AWS_CONTAINER_CREDENTIALS_RELATIVE_URI": "/v2/credentials/7f0c"},  # ECS: http://169.254.170.2/...
    {"AWS_CONTAINER_CREDENTIALS_RELATIVE_URI": "/v2/credentials/7f0c", "AWS_CONTAINER_CREDENTIALS_FULL_URI": FULL_URI},
    {"AWS_CONTAINER_CREDENTIALS_FULL_URI": "http://169.254.170.23/v1/credentials"},  # EKS Pod Identity
    {"AWS_CONTAINER_CREDENTIALS_FULL_URI": "http://[fd00:ec2::23]/v1/credentials"},
    {"AWS_CONTAINER_CREDENTIALS_FULL_URI": "http://localhost:8080/creds?role=x"},
    {"AWS_CONTAINER_CREDENTIALS_FULL_URI": "http://127.0.0.2:8080/creds"},
    {"AWS_CONTAINER_CREDENTIALS_FULL_URI": "http://[::1]:8080/creds"},
    {"AWS_CONTAINER_CREDENTIALS_FULL_URI": "https://credentials.example.com/creds"},
    {"AWS_CONTAINER_CREDENTIALS_FULL_URI": FULL_URI, "AWS_DEFAULT_REGION": "us-east-1", "AWS_ENDPOINT_URL_SQS": "http://sqs:1"},
    {"AWS_CONTAINER_CREDENTIALS_FULL_URI": FULL_URI, "NO_PROXY": "127.0.0.1", "HTTP_PROXY": "http://proxy:3128"},
])
def test_a_container_endpoint_alone_is_fetched_where_botocore_would_fetch_it(
        monkeypatch: pytest.MonkeyPatch, no_proxy: None, variables: dict[str, str]) -> None:
    """botocore's chain gets to its ContainerProvider, and the daemon would ask the same URL itself; the rest of
    the answer is the child's (tests/integration/test_container_credentials.py fetches and compares it all)."""
    from workerless_gevent.aws.container import ContainerEndpoint
    from workerless_gevent.aws.renewal import FetchedResolution

    for name, value in {"AWS_REGION": "eu-west-1", **variables}.items():
        monkeypatch.setenv(name, value)
    url = botocores_container_url()
    assert url is not None
    answer = resolve_from_environment(AwsConfig(), dict(os.environ), "conf/test.toml", ("sqs", "lambda"))
    assert isinstance(answer, FetchedResolution)
    endpoint = answer.fetch.__self__  # type: ignore[attr-defined]
    assert isinstance(endpoint, ContainerEndpoint) and endpoint.url == url
    session, region, where = open_session(AwsConfig(), os.environ, "conf/test.toml")
    endpoints = {service: service_endpoint(session, service, region, None) for service in ("sqs", "lambda")}
    assert answer.locate() == Resolved(region=region, where=where, endpoints=endpoints,
                                       ca_bundle=trusted_ca_bundle(None, session), credentials=None, expires_at=None)


@pytest.mark.parametrize(("variables", "reason"), [
    ({"AWS_CONTAINER_CREDENTIALS_FULL_URI": "http://credentials.example.com/creds"}, "botocore refuses the host"),
    ({"AWS_CONTAINER_CREDENTIALS_FULL_URI": "http://169.254.169.254/creds"}, "botocore refuses the host"),
    ({"AWS_CONTAINER_CREDENTIALS_FULL_URI": ""}, "an empty URI"),
    ({"AWS_CONTAINER_CREDENTIALS_RELATIVE_URI": ""}, "an empty URI"),
    ({"AWS_CONTAINER_CREDENTIALS_RELATIVE_URI": "v2/credentials"}, "not a path"),
    ({"AWS_CONTAINER_CREDENTIALS_FULL_URI": "http://user:pass@127.0.0.1:9/"}, "user info in the URL"),
    ({"AWS_CONTAINER_CREDENTIALS_FULL_URI": "ftp://127.0.0.1:9/"}, "not HTTP"),
    ({"AWS_CONTAINER_CREDENTIALS_FULL_URI": FULL_URI, "AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE": ""}, "empty file name"),
    ({"AWS_CONTAINER_CREDENTIALS_FULL_URI": FULL_URI, "AWS_PROFILE": "prod"}, "a profile"),
    ({"AWS_CONTAINER_CREDENTIALS_FULL_URI": FULL_URI, "AWS_DEFAULT_PROFILE": "prod"}, "a profile"),
    ({"AWS_CONTAINER_CREDENTIALS_FULL_URI": FULL_URI, "AWS_ROLE_ARN": "arn:aws:iam::123456789012:role/r"}, "web identity"),
    ({"AWS_CONTAINER_CREDENTIALS_FULL_URI": FULL_URI, "AWS_WEB_IDENTITY_TOKEN_FILE": "/var/token"}, "web identity"),
    ({"AWS_CONTAINER_CREDENTIALS_FULL_URI": FULL_URI, "AWS_SESSION_TOKEN": "t"}, "a key variable"),
    ({"AWS_CONTAINER_CREDENTIALS_FULL_URI": FULL_URI, "AWS_ACCESS_KEY_ID": "AKID"}, "half the keys"),
    ({"AWS_CONTAINER_CREDENTIALS_FULL_URI": FULL_URI, "AWS_CREDENTIAL_FILE": "/etc/ec2-creds"}, "the EC2 tools' file"),
    ({"AWS_CONTAINER_CREDENTIALS_FULL_URI": FULL_URI, "BOTO_CONFIG": "/etc/boto"}, "boto2's config"),
    ({"AWS_CONTAINER_CREDENTIALS_FULL_URI": FULL_URI, "AWS_CREDENTIAL_EXPIRATION": "2030-01-01T00:00:00Z"}, "expiry"),
    ({"AWS_CONTAINER_CREDENTIALS_FULL_URI": FULL_URI, "AWS_USE_FIPS_ENDPOINT": "true"}, "FIPS"),
    ({"AWS_CONTAINER_CREDENTIALS_FULL_URI": FULL_URI, "HTTP_PROXY": "http://proxy:3128"}, "through a proxy"),
    ({"AWS_CONTAINER_CREDENTIALS_FULL_URI": FULL_URI, "AWS_REGION": ""}, "no region: ECS task metadata is next"),
])
def test_a_container_endpoint_goes_to_the_child_when_anything_else_could_answer(
        monkeypatch: pytest.MonkeyPatch, no_proxy: None, variables: dict[str, str], reason: str) -> None:
    for name, value in {"AWS_REGION": "eu-west-1", **variables}.items():
        monkeypatch.setenv(name, value)
    assert resolve_from_environment(AwsConfig(), dict(os.environ), "conf/test.toml", ("sqs",)) is None, reason


def test_web_identity_comes_before_a_container_endpoint(monkeypatch: pytest.MonkeyPatch, no_proxy: None) -> None:
    """test_web_identity_resolution.py holds the rest of that path to botocore's."""
    from workerless_gevent.aws.renewal import FetchedResolution
    from workerless_gevent.aws.web_identity import WebIdentity

    for name, value in {"AWS_REGION": "eu-west-1", "AWS_CONTAINER_CREDENTIALS_FULL_URI": FULL_URI,
                        "AWS_WEB_IDENTITY_TOKEN_FILE": "/var/token", "AWS_ROLE_ARN": "arn:aws:iam::1:role/r"}.items():
        monkeypatch.setenv(name, value)
    assert botocores_container_url() is None
    answer = resolve_from_environment(AwsConfig(), dict(os.environ), "conf/test.toml", ("sqs",))
    assert isinstance(answer, FetchedResolution)
    assert isinstance(answer.fetch.__self__, WebIdentity)  # type: ignore[attr-defined]


@pytest.mark.parametrize("aws", [AwsConfig(profile="prod"), AwsConfig(region=None)])
def test_a_container_endpoint_with_a_profile_or_no_region_goes_to_the_child(
        monkeypatch: pytest.MonkeyPatch, no_proxy: None, aws: AwsConfig) -> None:
    monkeypatch.setenv("AWS_CONTAINER_CREDENTIALS_FULL_URI", FULL_URI)
    if aws.profile is not None:
        monkeypatch.setenv("AWS_REGION", "eu-west-1")
    assert resolve_from_environment(aws, dict(os.environ), "conf/test.toml", ("sqs",)) is None


@pytest.mark.parametrize("path", ["config", "credentials", "boto"])
def test_a_container_endpoint_beside_any_credentials_file_goes_to_the_child(
        monkeypatch: pytest.MonkeyPatch, no_proxy: None, tmp_path: Path, path: str) -> None:
    """Even empty: the AWS files may hold a role, a credential_process, SSO or keys, ~/.boto keys (BotoProvider)."""
    monkeypatch.setenv("AWS_CONTAINER_CREDENTIALS_FULL_URI", FULL_URI)
    monkeypatch.setenv("AWS_REGION", "eu-west-1")
    (tmp_path / {"config": "config", "credentials": "credentials", "boto": ".boto"}[path]).write_text("")
    assert resolve_from_environment(AwsConfig(), dict(os.environ), "conf/test.toml", ("sqs",)) is None
