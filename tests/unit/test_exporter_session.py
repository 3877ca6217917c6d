"""tracing/export.py's SettledSession: the OTLP exporter's requests session, which reads the proxy variables and
REQUESTS_CA_BUNDLE at its first export and keeps them, settles each request as requests' own Session does."""

from __future__ import annotations

import copy
from typing import Any

import pytest

pytest.importorskip("opentelemetry.sdk")

import requests  # noqa: E402

from workerless_gevent.tracing.export import CREDENTIAL_PROVIDERS, SettledSession, exporter_session  # noqa: E402

VARIABLES = ("HTTP_PROXY", "HTTPS_PROXY", "NO_PROXY", "ALL_PROXY", "http_proxy", "https_proxy", "no_proxy",
             "all_proxy", "REQUESTS_CA_BUNDLE", "CURL_CA_BUNDLE", *CREDENTIAL_PROVIDERS)
ENVIRONMENTS = {
    "none": {},
    "https proxy": {"HTTPS_PROXY": "http://proxy.internal:3128"},
    "http proxy, the collector not in no_proxy": {"HTTP_PROXY": "http://proxy.internal:3128", "NO_PROXY": "other"},
    "http proxy, the collector in no_proxy": {"http_proxy": "http://proxy.internal:3128",
                                              "no_proxy": "localhost,127.0.0.1"},
    "a CA bundle": {"REQUESTS_CA_BUNDLE": "/etc/ssl/corporate.pem"},
}
REQUESTS = [("http://127.0.0.1:4318/v1/traces", None, True, None),
            ("https://collector.example:4318/v1/traces", None, None, ("/c.pem", "/k.pem")),
            ("https://collector.example:4318/v1/traces", False, "/etc/ssl/mine.pem", None)]


@pytest.fixture
def environment(monkeypatch: pytest.MonkeyPatch) -> pytest.MonkeyPatch:
    for name in VARIABLES:
        monkeypatch.delenv(name, raising=False)
    return monkeypatch


def settle(session: requests.Session, url: str, stream: Any, verify: Any, cert: Any,
           proxies: dict[str, str] | None = None) -> dict[str, Any]:
    return session.merge_environment_settings(url, dict(proxies or {}), stream, verify, cert)


@pytest.mark.parametrize("variables", ENVIRONMENTS.values(), ids=ENVIRONMENTS.keys())
def test_each_request_is_settled_as_requests_settles_it(environment: pytest.MonkeyPatch,
                                                       variables: dict[str, str]) -> None:
    for name, value in variables.items():
        environment.setenv(name, value)
    settled, plain = SettledSession(), requests.Session()
    for request in REQUESTS * 2:  # the second time from what was kept
        assert settle(settled, *request) == settle(plain, *request), request
    own = {"https": "http://own.proxy:8080"}
    assert settle(settled, *REQUESTS[1], proxies=own) == settle(plain, *REQUESTS[1], proxies=own)


def test_the_environment_is_read_at_the_first_export_only(environment: pytest.MonkeyPatch) -> None:
    settled, url = SettledSession(), REQUESTS[1][0]
    first = copy.deepcopy(settle(settled, *REQUESTS[1]))
    environment.setenv("HTTPS_PROXY", "http://proxy.internal:3128")
    assert settle(requests.Session(), *REQUESTS[1])["proxies"] == {"https": "http://proxy.internal:3128"}
    assert settle(settled, *REQUESTS[1]) == first and first["proxies"] == {}
    settle(settled, *REQUESTS[1])["proxies"]["https"] = "changed by a caller"
    assert settle(settled, *REQUESTS[1]) == first, f"{url}: what was kept is handed out as a copy"


def test_a_credential_provider_leaves_the_exporter_to_make_its_own_session(environment: pytest.MonkeyPatch) -> None:
    assert isinstance(exporter_session(), SettledSession)
    for name in CREDENTIAL_PROVIDERS:
        environment.setenv(name, "sigv4")
        assert exporter_session() is None
        environment.delenv(name)
