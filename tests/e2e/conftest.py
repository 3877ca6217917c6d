"""Fixtures for end-to-end tests: the real `bin/workerless` against moto, counted by a proxy."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.support import CountingProxy
from tests.support.credentials_endpoint import ChildSampler, CredentialsEndpoint
from workerless_gevent.aws.renewal import RENEW_BEFORE_SECONDS


@pytest.fixture
def proxied_env(aws_env: dict[str, str], counting_proxy: CountingProxy) -> dict[str, str]:
    """`aws_env` with every AWS endpoint going through `counting_proxy` (see tests/conftest.py)."""
    return {**aws_env, "AWS_ENDPOINT_URL": counting_proxy.url}


@pytest.fixture
def credentials_endpoint() -> Iterator[CredentialsEndpoint]:
    """A container credentials endpoint whose keys are due for renewal 4 s after each fetch."""
    endpoint = CredentialsEndpoint(lifetime=RENEW_BEFORE_SECONDS + 4)
    endpoint.start()
    yield endpoint
    endpoint.stop()


@pytest.fixture
def child_sampler() -> Iterator[ChildSampler]:
    """Samples the children of the process whose pid the test sets (`child_sampler.pid`) every 5 ms."""
    sampler = ChildSampler()
    yield sampler
    sampler.greenlet.kill()
