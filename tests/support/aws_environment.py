"""A process environment in which botocore's credential chain finds nothing of the machine's: no AWS, ECS or
BOTO variable, no proxy variable, a home without ~/.aws or ~/.boto, and the config files pointed at paths
that do not exist. Each resolution test then sets what its case needs."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

PREFIXES = ("AWS_", "ECS_CONTAINER_METADATA", "BOTO_")


def bare_aws_environment(monkeypatch: pytest.MonkeyPatch, home: Path) -> None:
    for name in list(os.environ):
        if name.startswith(PREFIXES) or name.lower().endswith("_proxy"):
            monkeypatch.delenv(name)
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("AWS_CONFIG_FILE", str(home / "config"))
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(home / "credentials"))
