"""Fixtures for end-to-end tests: the real `bin/workerless` against moto, counted by a proxy."""

from __future__ import annotations

import pytest

from tests.support import CountingProxy


@pytest.fixture
def proxied_env(aws_env: dict[str, str], counting_proxy: CountingProxy) -> dict[str, str]:
    """`aws_env` with every AWS endpoint going through `counting_proxy` (see tests/conftest.py)."""
    return {**aws_env, "AWS_ENDPOINT_URL": counting_proxy.url}
