"""The region chain without any network: [aws] region, AWS_REGION, AWS_DEFAULT_REGION, the profile,
then (not reached here) ECS and EC2 metadata; never a silent us-east-1."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from workerless_gevent.aws.session import build_session
from workerless_gevent.config.model import AwsConfig
from workerless_gevent.errors import ConfigError
from workerless_gevent.aws.region import ec2_region, ecs_region, region_of_task, resolve_region

NO_METADATA = {"AWS_EC2_METADATA_DISABLED": "true"}  # and no ECS variable: nothing is asked over the network
PROFILES = """\
[default]
region = ap-south-1

[profile other]
region = sa-east-1

[profile bare]
output = json

[profile odd]
region = eu west 1
"""


@pytest.fixture(autouse=True)
def profiles(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """botocore reads the profile file named by os.environ, so point that at a temporary one."""
    path = tmp_path / "aws-config"
    path.write_text(PROFILES)
    for name in ("AWS_PROFILE", "AWS_DEFAULT_PROFILE", "AWS_REGION", "AWS_DEFAULT_REGION"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_CONFIG_FILE", str(path))
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "no-credentials"))
    return path


def resolve(aws: AwsConfig = AwsConfig(), **env: str) -> tuple[str, str]:
    return resolve_region(aws, {**NO_METADATA, **env}, build_session(aws.profile), "conf/prod.toml")


def test_botocore_alone_reads_aws_default_region_but_not_aws_region(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AWS_CONFIG_FILE", "/nonexistent")
    monkeypatch.setenv("AWS_REGION", "eu-west-1")
    assert build_session(None).get_config_variable("region") is None  # why the chain reads AWS_REGION itself
    monkeypatch.setenv("AWS_DEFAULT_REGION", "eu-west-2")
    assert build_session(None).get_config_variable("region") == "eu-west-2"


def test_the_config_file_comes_first() -> None:
    assert resolve(AwsConfig(region="eu-central-1", profile="other"), AWS_REGION="eu-west-1",
                   AWS_DEFAULT_REGION="us-west-2") == ("eu-central-1", "[aws] region in conf/prod.toml")


def test_aws_region_then_aws_default_region_then_the_profile() -> None:
    assert resolve(AWS_REGION="eu-west-1", AWS_DEFAULT_REGION="us-west-2") == ("eu-west-1", "AWS_REGION")
    assert resolve(AWS_REGION="", AWS_DEFAULT_REGION="us-west-2") == ("us-west-2", "AWS_DEFAULT_REGION")
    assert resolve() == ("ap-south-1", "profile default")


def test_the_profile_named_by_the_config_or_aws_profile(monkeypatch: pytest.MonkeyPatch) -> None:
    assert resolve(AwsConfig(profile="other")) == ("sa-east-1", "profile other")
    monkeypatch.setenv("AWS_PROFILE", "other")
    assert resolve() == ("sa-east-1", "profile other")


def test_the_env_mapping_is_read_not_os_environ(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AWS_REGION", "eu-west-1")
    assert resolve() == ("ap-south-1", "profile default")


def test_no_region_anywhere_is_one_line_and_no_default(profiles: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    expected = "workerless: no AWS region: set [aws] region, AWS_REGION or AWS_DEFAULT_REGION (or run on EC2/ECS)"
    with pytest.raises(ConfigError) as raised:
        resolve(AwsConfig(profile="bare"))
    assert raised.value.line() == expected
    monkeypatch.setenv("AWS_CONFIG_FILE", str(profiles.parent / "missing"))
    with pytest.raises(ConfigError) as raised:
        resolve()
    assert raised.value.line() == expected


@pytest.mark.parametrize(("aws", "env", "line"), [
    (AwsConfig(region="eu_west"), {}, 'conf/prod.toml: aws.region: must be an AWS region name such as eu-west-1 '
                                      '(got "eu_west")'),
    (AwsConfig(), {"AWS_REGION": "eu west 1"},
     'AWS_REGION: must be an AWS region name such as eu-west-1 (got "eu west 1")'),
    (AwsConfig(), {"AWS_DEFAULT_REGION": "-eu"},
     'AWS_DEFAULT_REGION: must be an AWS region name such as eu-west-1 (got "-eu")'),
    (AwsConfig(profile="odd"), {},
     'profile odd: region: must be an AWS region name such as eu-west-1 (got "eu west 1")'),
])
def test_a_malformed_region_names_where_it_was_set(aws: AwsConfig, env: dict[str, str], line: str) -> None:
    with pytest.raises(ConfigError) as raised:
        resolve(aws, **env)
    assert raised.value.line() == line


def test_metadata_lookups_are_skipped_when_off() -> None:
    assert ecs_region(NO_METADATA) is None  # no ECS_CONTAINER_METADATA_URI_V4: not in an ECS task
    assert ec2_region(NO_METADATA, build_session(None)) is None  # AWS_EC2_METADATA_DISABLED=true


@pytest.mark.parametrize(("task", "region"), [
    ({"TaskARN": "arn:aws:ecs:us-west-2:111122223333:task/default/abc", "AvailabilityZone": "us-west-2a"},
     "us-west-2"),
    ({"TaskARN": "arn:aws:ecs:eu-west-3:111122223333:task/default/abc", "AvailabilityZone": "x"}, "eu-west-3"),
    ({"AvailabilityZone": "ap-southeast-2b"}, "ap-southeast-2"),
    ({"TaskARN": "not-an-arn", "AvailabilityZone": "ca-central-1d"}, "ca-central-1"),
    ({"TaskARN": "not-an-arn"}, None),
    ({"AvailabilityZone": "us-east-1"}, None),  # no zone letter to drop: not trusted
    ({}, None),
    ([], None),
])
def test_the_region_of_an_ecs_task_document(task: Any, region: str | None) -> None:
    assert region_of_task(task) == region
