"""`aws.environment` against the child's answer (`aws.child.resolve`, botocore's chain run in this process) for
environments that say everything themselves, and None wherever only botocore's chain can tell."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from workerless_gevent.aws.child import Resolved, parse_answer, request_of, resolve
from workerless_gevent.aws.environment import resolve_from_environment
from workerless_gevent.config.model import AwsConfig

KEYS = {"AWS_ACCESS_KEY_ID": "AKIDEXAMPLE", "AWS_SECRET_ACCESS_KEY": "secret"}


@pytest.fixture(autouse=True)
def bare_environment(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """No AWS variable, a home without ~/.aws, the config files pointed at paths that do not exist."""
    for name in list(os.environ):
        if name.startswith("AWS_") or name.startswith("ECS_CONTAINER_METADATA"):
            monkeypatch.delenv(name)
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "config"))
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "credentials"))
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")


def childs_answer(aws: AwsConfig, services: tuple[str, ...]) -> Resolved:
    return parse_answer(json.dumps(resolve(request_of(aws, "conf/test.toml", services))), 0)


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
    expected = childs_answer(aws, services)
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
