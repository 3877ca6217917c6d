"""A process environment in which botocore's credential chain finds nothing of the machine's: no AWS, ECS or
BOTO variable, no proxy variable, a home without ~/.aws or ~/.boto, and the config files pointed at paths
that do not exist. Each resolution test then sets what its case needs, and compares the two ways of
resolving it: the credentials child's (botocore's chain) and the daemon's own."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from workerless_gevent.aws.child import Resolved, parse_answer, request_of
from workerless_gevent.aws.child_answer import resolve
from workerless_gevent.aws.environment import resolve_from_environment
from workerless_gevent.aws.renewal import FetchedResolution
from workerless_gevent.config.model import AwsConfig

PREFIXES = ("AWS_", "ECS_CONTAINER_METADATA", "BOTO_")


def bare_aws_environment(monkeypatch: pytest.MonkeyPatch, home: Path) -> None:
    for name in list(os.environ):
        if name.startswith(PREFIXES) or name.lower().endswith("_proxy"):
            monkeypatch.delenv(name)
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("AWS_CONFIG_FILE", str(home / "config"))
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(home / "credentials"))


def childs_answer(services: tuple[str, ...], aws: AwsConfig | None = None) -> Resolved:
    """What the credentials child answers for this environment, as the daemon would read it."""
    return parse_answer(json.dumps(resolve(request_of(aws or AwsConfig(), "conf/test.toml", services))), 0)


def ours(services: tuple[str, ...]) -> FetchedResolution:
    """The daemon's own resolution of this environment, which must be one it fetches itself (no child)."""
    answer = resolve_from_environment(AwsConfig(), dict(os.environ), "conf/test.toml", services)
    assert isinstance(answer, FetchedResolution)
    return answer

