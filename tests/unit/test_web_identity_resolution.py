"""`aws.environment` for web identity (EKS IRSA): taken exactly where botocore's own chain gets to its
AssumeRoleWithWebIdentityProvider with every provider before it answering nothing, with the role, session name,
token file, STS endpoint, CA bundle, timeouts and retries of the client that provider would call through; None
(the child) for everything else. No request is sent: botocore's provider defers its call until asked, and STS is
never asked here (tests/integration/test_web_identity.py calls a fake STS both ways and compares)."""

from __future__ import annotations

import os
import re
import time
from pathlib import Path
from typing import Any, NamedTuple

import pytest

from tests.support.aws_environment import bare_aws_environment
from workerless_gevent.aws.child import Resolved
from workerless_gevent.aws.environment import resolve_from_environment, sts_url
from workerless_gevent.aws.renewal import FetchedResolution
from workerless_gevent.aws.session import open_session, service_endpoint, trusted_ca_bundle
from workerless_gevent.aws.web_identity import LEGACY_GLOBAL_REGIONS, TIMEOUT_SECONDS, WebIdentity
from workerless_gevent.config.model import AwsConfig
from workerless_gevent.wire.retries import MAX_ATTEMPTS

ROLE = "arn:aws:iam::123456789012:role/app"
WEB_IDENTITY = {"AWS_WEB_IDENTITY_TOKEN_FILE": "/var/run/secrets/eks.amazonaws.com/serviceaccount/token",
                "AWS_ROLE_ARN": ROLE}


class Call(NamedTuple):
    url: str
    role_arn: str
    session_name: str
    token_file: str
    ca_bundle: str
    timeouts: tuple[float, float]
    proxies: dict[str, str]


@pytest.fixture(autouse=True)
def bare_environment(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """No AWS, ECS or proxy variable, a home without ~/.aws or ~/.boto, the config files pointed at nothing."""
    bare_aws_environment(monkeypatch, tmp_path)


def botocores_call() -> Call | None:
    """The call botocore's own chain (as the child builds it: a fresh session, no client before) would make, if it
    gets to its web identity provider with no provider before it answering; None where it would not, or where
    that provider or its STS client would raise (the child then says what botocore makes of it)."""
    import botocore.credentials
    import botocore.exceptions
    import botocore.session
    from botocore import UNSIGNED
    from botocore.config import Config
    from botocore.httpsession import get_cert_path

    resolver = botocore.session.Session().get_component("credential_provider")
    for provider in resolver.providers:
        if provider.METHOD == "assume-role-with-web-identity":
            break
        if provider.load() is not None:
            return None
    else:
        return None
    try:
        credentials = provider.load()
        if credentials is None:
            return None
        fetcher = credentials._refresh_using.__self__
        client = fetcher._client_creator("sts", config=Config(signature_version=UNSIGNED))
    except (botocore.exceptions.BotoCoreError, ValueError):
        return None
    assert client.meta.config.retries == {"mode": "standard"}  # 3 attempts, as the daemon's
    http = client._endpoint.http_session
    return Call(client.meta.endpoint_url, fetcher._role_arn, fetcher._role_session_name,
                fetcher._web_identity_token_loader._web_identity_token_path, get_cert_path(http._verify),
                (http._timeout.connect_timeout, http._timeout.read_timeout), http._proxy_config._proxies)


def ours(services: tuple[str, ...] = ("sqs",)) -> tuple[FetchedResolution, WebIdentity]:
    answer = resolve_from_environment(AwsConfig(), dict(os.environ), "conf/test.toml", services)
    assert isinstance(answer, FetchedResolution)
    identity = answer.fetch.__self__  # type: ignore[attr-defined]
    assert isinstance(identity, WebIdentity)
    return answer, identity


def assert_same_session_name(ours: str, botocores: str) -> None:
    """A name given is used as it is; else each names the session botocore-session-<epoch seconds> once (ours
    was named after botocore's)."""
    if ours != botocores:
        numbers = [re.fullmatch(r"botocore-session-(\d+)", name) for name in (botocores, ours)]
        assert numbers[0] and numbers[1] and int(numbers[0][1]) <= int(numbers[1][1]) <= time.time(), (ours, botocores)


@pytest.mark.parametrize("variables", [
    {},  # no AWS_DEFAULT_REGION: the session's STS client is in aws-global, sts.amazonaws.com
    {"AWS_DEFAULT_REGION": "eu-west-1", "AWS_STS_REGIONAL_ENDPOINTS": "regional"},  # what EKS's webhook sets
    {"AWS_DEFAULT_REGION": "us-east-1"},
    {"AWS_DEFAULT_REGION": "eu-west-1", "AWS_STS_REGIONAL_ENDPOINTS": "legacy"},  # a legacy region: global
    {"AWS_DEFAULT_REGION": "ap-east-1", "AWS_STS_REGIONAL_ENDPOINTS": "legacy"},  # not one: regional
    {"AWS_DEFAULT_REGION": "eu-west-1", "AWS_STS_REGIONAL_ENDPOINTS": ""},
    {"AWS_DEFAULT_REGION": "cn-north-1"},
    {"AWS_DEFAULT_REGION": "us-gov-west-1"},
    {"AWS_REGION": "ap-south-1"},  # the daemon's region, not the session's: STS stays global
    {"AWS_ROLE_SESSION_NAME": "worker-7"},
    {"AWS_ROLE_SESSION_NAME": ""},  # no name: botocore's own
    {"AWS_ENDPOINT_URL_STS": "http://127.0.0.1:4566"},
    {"AWS_ENDPOINT_URL": "https://localstack.internal:4566/"},
    {"AWS_ENDPOINT_URL": "http://all:1", "AWS_ENDPOINT_URL_STS": "http://sts:2"},
    {"AWS_CA_BUNDLE": "/etc/ssl/corporate.pem"},
    {"REQUESTS_CA_BUNDLE": "/etc/ssl/requests.pem"},  # botocore's clients honour it too
    {"REQUESTS_CA_BUNDLE": None},  # certifi's (a None here: the variable unset)
    {"AWS_CONTAINER_CREDENTIALS_FULL_URI": "http://127.0.0.1:9/creds"},  # web identity comes first
    {"AWS_CREDENTIAL_FILE": "/etc/ec2-creds", "BOTO_CONFIG": "/etc/boto"},  # those come after it
    {"AWS_EC2_METADATA_DISABLED": "true"},
    {"HTTPS_PROXY": "http://proxy:3128", "NO_PROXY": "sts.amazonaws.com"},
    {"HTTP_PROXY": "http://proxy:3128"},  # for http:// only; STS is https
])
def test_web_identity_alone_is_assumed_where_and_as_botocore_would(monkeypatch: pytest.MonkeyPatch,
                                                                    variables: dict[str, str | None]) -> None:
    for name, value in {"AWS_REGION": "eu-west-1", **WEB_IDENTITY, **variables}.items():
        if value is None:
            monkeypatch.delenv(name, raising=False)
        else:
            monkeypatch.setenv(name, value)
    expected = botocores_call()
    assert expected is not None and (expected.proxies.get("https") is None or "NO_PROXY" in variables)
    answer, identity = ours(("sqs", "lambda"))
    assert (identity.url, identity.role_arn, identity.token_file, identity.ca_bundle) == (
        expected.url, expected.role_arn, expected.token_file, expected.ca_bundle)
    assert_same_session_name(identity.session_name, expected.session_name)
    assert expected.timeouts == (TIMEOUT_SECONDS, TIMEOUT_SECONDS) and MAX_ATTEMPTS == 3
    session, region, where = open_session(AwsConfig(), os.environ, "conf/test.toml")
    endpoints = {service: service_endpoint(session, service, region, None) for service in ("sqs", "lambda")}
    assert answer.locate() == Resolved(region=region, where=where, endpoints=endpoints,
                                       ca_bundle=trusted_ca_bundle(None, session), credentials=None, expires_at=None)


@pytest.mark.parametrize(("variables", "reason"), [
    ({"AWS_ACCESS_KEY_ID": "AKID"}, "half the keys: botocore's error"),
    ({"AWS_SESSION_TOKEN": "t"}, "a key variable"),
    ({"AWS_SECURITY_TOKEN": ""}, "a key variable, even empty"),
    ({"AWS_WEB_IDENTITY_TOKEN_FILE": ""}, "no token file: the chain goes on"),
    ({"AWS_ROLE_ARN": ""}, "no role: botocore raises"),
    ({"AWS_PROFILE": "prod"}, "a profile"),
    ({"AWS_DEFAULT_PROFILE": "prod"}, "a profile"),
    ({"AWS_CREDENTIAL_EXPIRATION": "2030-01-01T00:00:00Z"}, "expiry"),
    ({"AWS_USE_FIPS_ENDPOINT": "true"}, "FIPS"),
    ({"AWS_USE_DUALSTACK_ENDPOINT": "true"}, "dual-stack"),
    ({"AWS_IGNORE_CONFIGURED_ENDPOINT_URLS": "true", "AWS_ENDPOINT_URL_STS": "http://sts:1"}, "endpoints ignored"),
    ({"AWS_STS_REGIONAL_ENDPOINTS": "global"}, "botocore raises"),
    ({"AWS_STS_REGIONAL_ENDPOINTS": "Legacy"}, "botocore raises"),
    ({"AWS_DEFAULT_REGION": "eu west 1"}, "botocore raises"),
    ({"AWS_DEFAULT_REGION": ""}, "an empty region: botocore's reading of it"),
    ({"AWS_ENDPOINT_URL_STS": ""}, "an empty endpoint"),
    ({"AWS_ENDPOINT_URL_STS": "sts.internal:443"}, "no scheme"),
    ({"AWS_ENDPOINT_URL_STS": "http://127.0.0.1:port"}, "not a port"),
    ({"AWS_MAX_ATTEMPTS": "5"}, "the STS client's retries"),
    ({"AWS_RETRY_MODE": "adaptive"}, "the STS client's retries"),
    ({"AWS_DEFAULTS_MODE": "in-region"}, "the STS client's defaults"),
    ({"HTTPS_PROXY": "http://proxy:3128"}, "through a proxy"),
    ({"AWS_CA_BUNDLE": ""}, "botocore raises"),
    ({"REQUESTS_CA_BUNDLE": " "}, "botocore raises"),
    ({"AWS_REGION": ""}, "no region for SQS: ECS and EC2 metadata are next, the child's"),
])
def test_web_identity_goes_to_the_child_when_botocore_could_do_otherwise(
        monkeypatch: pytest.MonkeyPatch, variables: dict[str, str], reason: str) -> None:
    for name, value in {"AWS_REGION": "eu-west-1", **WEB_IDENTITY, **variables}.items():
        monkeypatch.setenv(name, value)
    assert resolve_from_environment(AwsConfig(), dict(os.environ), "conf/test.toml", ("sqs",)) is None, reason


def test_static_keys_come_first(monkeypatch: pytest.MonkeyPatch) -> None:
    for name, value in {"AWS_REGION": "eu-west-1", "AWS_ACCESS_KEY_ID": "AKID", "AWS_SECRET_ACCESS_KEY": "secret",
                        **WEB_IDENTITY}.items():
        monkeypatch.setenv(name, value)
    assert botocores_call() is None
    answer = resolve_from_environment(AwsConfig(), dict(os.environ), "conf/test.toml", ("sqs",))
    assert isinstance(answer, Resolved) and answer.credentials == ("AKID", "secret", None)


@pytest.mark.parametrize("path", ["config", "credentials"])
def test_web_identity_beside_an_aws_file_goes_to_the_child(monkeypatch: pytest.MonkeyPatch, tmp_path: Path,
                                                          path: str) -> None:
    """Even empty: the files may hold a role_arn for the default profile (AssumeRoleProvider, before web identity),
    a region, an endpoint or STS settings."""
    for name, value in {"AWS_REGION": "eu-west-1", **WEB_IDENTITY}.items():
        monkeypatch.setenv(name, value)
    (tmp_path / path).write_text("")
    assert resolve_from_environment(AwsConfig(), dict(os.environ), "conf/test.toml", ("sqs",)) is None
    assert resolve_from_environment(AwsConfig(profile="prod"), dict(os.environ), "conf/test.toml", ("sqs",)) is None


def test_web_identity_comes_before_a_boto_file(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    for name, value in {"AWS_REGION": "eu-west-1", **WEB_IDENTITY}.items():
        monkeypatch.setenv(name, value)
    (tmp_path / ".boto").write_text("[Credentials]\naws_access_key_id = AKID\naws_secret_access_key = s\n")
    expected = botocores_call()
    assert expected is not None and ours()[1].url == expected.url


def every_region(session: Any) -> list[str]:
    partitions = session.get_component("data_loader").load_data("partitions")["partitions"]
    known = {region for partition in partitions for region in partition["regions"]}
    return sorted(known | LEGACY_GLOBAL_REGIONS | {"xx-east-1", "mars-north-1", "cn-northwest-9", "us-gov-east-5",
                                                   "aws-cn-global", "eu-isoe-west-1"})


@pytest.mark.parametrize("mode", [None, "regional", "legacy"])
def test_the_sts_endpoint_is_botocores_in_every_region_it_knows(mode: str | None) -> None:
    """The provider's client in each region (the session's, as AWS_DEFAULT_REGION sets it; one session, its
    region and STS mode set as the variables would: the full chain reads them in the tests above)."""
    import botocore.credentials
    import botocore.session
    from botocore import UNSIGNED
    from botocore.config import Config

    session, differences = botocore.session.Session(), {}
    for region in every_region(session):
        session.set_config_variable("region", region)
        session.set_config_variable("sts_regional_endpoints", mode)
        client = botocore.credentials._get_client_creator(session, None)("sts", config=Config(signature_version=UNSIGNED))
        env = {"AWS_DEFAULT_REGION": region, **({} if mode is None else {"AWS_STS_REGIONAL_ENDPOINTS": mode})}
        if sts_url(env) != client.meta.endpoint_url:
            differences[region] = (sts_url(env), client.meta.endpoint_url)
    assert len(every_region(session)) > 40 and differences == {}


def test_the_legacy_global_regions_are_botocores() -> None:
    from botocore.args import LEGACY_GLOBAL_STS_REGIONS

    assert LEGACY_GLOBAL_REGIONS == frozenset(LEGACY_GLOBAL_STS_REGIONS)


def test_a_session_name_is_chosen_once_per_process(monkeypatch: pytest.MonkeyPatch) -> None:
    """As botocore's fetcher names its session once: every renewal of one daemon is one session name."""
    for name, value in {"AWS_REGION": "eu-west-1", **WEB_IDENTITY}.items():
        monkeypatch.setenv(name, value)
    began = int(time.time())
    _, identity = ours()
    assert re.fullmatch(r"botocore-session-\d+", identity.session_name)
    assert began <= int(identity.session_name.rsplit("-", 1)[1]) <= time.time()
