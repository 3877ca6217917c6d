"""Fixtures for end-to-end tests: the real `bin/workerless` against moto, counted by a proxy."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.support import CountingProxy


@pytest.fixture
def counting_proxy(moto_endpoint: str) -> Iterator[CountingProxy]:
    """A reverse proxy in front of moto that records every AWS request; aim AWS_ENDPOINT_URL here."""
    proxy = CountingProxy(moto_endpoint)
    proxy.start()
    yield proxy
    proxy.stop()


@pytest.fixture
def proxied_env(aws_env: dict[str, str], counting_proxy: CountingProxy) -> dict[str, str]:
    """`aws_env` with every AWS endpoint going through `counting_proxy`."""
    return {**aws_env, "AWS_ENDPOINT_URL": counting_proxy.url}
