"""targets/http_headers.py and the HTTP target's own headers: trace context, https, configured headers."""

from __future__ import annotations

import pytest

from tests.unit.sqs_messages import make_message, string_attribute
from workerless_gevent.config.model import HttpTargetConfig
from workerless_gevent.targets.http import HttpTarget, build_headers
from workerless_gevent.targets.http_headers import trace_headers, traceparent_from_xray

ROOT = "Root=1-5759e988-bd862e3fe1be46a994272793"
TRACE_ID = "5759e988bd862e3fe1be46a994272793"


@pytest.mark.parametrize(
    ("header", "traceparent"),
    [
        pytest.param(f"{ROOT};Parent=53995c3f42cd8ad8;Sampled=1", f"00-{TRACE_ID}-53995c3f42cd8ad8-01", id="sampled"),
        pytest.param(f"{ROOT};Parent=53995c3f42cd8ad8;Sampled=0", f"00-{TRACE_ID}-53995c3f42cd8ad8-00", id="not-sampled"),
        pytest.param(f"{ROOT};Parent=53995c3f42cd8ad8;Sampled=?", f"00-{TRACE_ID}-53995c3f42cd8ad8-00", id="deferred"),
        pytest.param(f"{ROOT};Parent=53995c3f42cd8ad8", f"00-{TRACE_ID}-53995c3f42cd8ad8-00", id="no-sampled"),
        pytest.param(f"Sampled=1; Parent=53995c3f42cd8ad8; {ROOT};Lineage=a87bd80c:1",
                     f"00-{TRACE_ID}-53995c3f42cd8ad8-01", id="any-order-spaces-lineage"),
        pytest.param(f"{ROOT};Sampled=1", None, id="no-parent-no-invented-one"),
        pytest.param(f"{ROOT};Parent=0000000000000000;Sampled=1", None, id="all-zero-parent"),
        pytest.param(f"{ROOT};Parent=53995C3F42CD8AD8", None, id="upper-case-parent"),
        pytest.param("Root=1-00000000-000000000000000000000000;Parent=53995c3f42cd8ad8", None, id="all-zero-root"),
        pytest.param("Root=2-5759e988-bd862e3fe1be46a994272793;Parent=53995c3f42cd8ad8", None, id="root-version"),
        pytest.param("Parent=53995c3f42cd8ad8;Sampled=1", None, id="no-root"),
        pytest.param("garbage", None, id="garbage"),
    ],
)
def test_traceparent_from_the_xray_header(header: str, traceparent: str | None) -> None:
    assert traceparent_from_xray(header) == traceparent


def test_trace_headers_from_aws_trace_header() -> None:
    header = f"{ROOT};Parent=53995c3f42cd8ad8;Sampled=1"
    message = make_message(attributes={"AWSTraceHeader": header})
    assert trace_headers(message) == {"X-Amzn-Trace-Id": header, "traceparent": f"00-{TRACE_ID}-53995c3f42cd8ad8-01"}
    assert build_headers("q", message, "application/json")["traceparent"] == f"00-{TRACE_ID}-53995c3f42cd8ad8-01"


def test_a_traceparent_attribute_wins_and_brings_its_tracestate() -> None:
    own = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
    message = make_message(attributes={"AWSTraceHeader": f"{ROOT};Parent=53995c3f42cd8ad8;Sampled=1"},
                           message_attributes={"traceparent": string_attribute(own),
                                               "tracestate": string_attribute("rojo=00f067aa0ba902b7")})
    headers = trace_headers(message)
    assert headers["traceparent"] == own
    assert headers["tracestate"] == "rojo=00f067aa0ba902b7"
    assert headers["X-Amzn-Trace-Id"].startswith(ROOT)


@pytest.mark.parametrize("bad", ["00-0af7651916cd43dd8448eb211c80319c-0000000000000000-01",
                                 "00-00000000000000000000000000000000-b7ad6b7169203331-01",
                                 "ff-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01",
                                 "00-0AF7651916CD43DD8448EB211C80319C-b7ad6b7169203331-01",
                                 "not a traceparent"])
def test_an_invalid_traceparent_attribute_gives_way_to_the_derived_one(bad: str) -> None:
    message = make_message(attributes={"AWSTraceHeader": f"{ROOT};Parent=53995c3f42cd8ad8;Sampled=1"},
                           message_attributes={"traceparent": string_attribute(bad),
                                               "tracestate": string_attribute("x=1")})
    assert trace_headers(message)["traceparent"] == f"00-{TRACE_ID}-53995c3f42cd8ad8-01"
    assert "tracestate" not in trace_headers(message)


def test_a_future_traceparent_version_passes_with_its_extra_fields() -> None:
    future = "01-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01-what-comes-next"
    message = make_message(message_attributes={"traceparent": string_attribute(future)})
    assert trace_headers(message) == {"traceparent": future}


def test_an_aws_trace_header_a_header_line_cannot_carry_is_left_out() -> None:
    message = make_message(attributes={"AWSTraceHeader": f"{ROOT};Parent=53995c3f42cd8ad8\r\nX-Injected: 1"})
    assert trace_headers(message) == {}


def test_no_trace_headers_without_trace_context() -> None:
    headers = build_headers("q", make_message(), "application/json")
    assert not {"X-Amzn-Trace-Id", "traceparent", "tracestate"} & set(headers)


def test_configured_headers_go_with_every_request() -> None:
    config = HttpTargetConfig(name="default", url="http://127.0.0.1:9/x",
                              headers={"Authorization": "Bearer s3cret", "X-Tenant": "a b"})
    target = HttpTarget(config)
    try:
        assert target.fixed_headers.endswith("Authorization: Bearer s3cret\r\nX-Tenant: a b\r\n")
        assert "s3cret" not in repr(config)
    finally:
        target.close()


@pytest.mark.parametrize(("url", "host"), [("https://127.0.0.1/jobs", "127.0.0.1"),
                                           ("https://127.0.0.1:8443/jobs", "127.0.0.1:8443"),
                                           ("http://127.0.0.1/jobs", "127.0.0.1")])
def test_https_urls_verify_tls_on_port_443_by_default(url: str, host: str) -> None:
    target = HttpTarget(HttpTargetConfig(name="default", url=url))
    try:
        assert target.fixed_headers.startswith(f"Host: {host}\r\n")
        assert (target.connections.tls is not None) == url.startswith("https")
        expected_port = 8443 if ":8443" in url else 443 if url.startswith("https") else 80
        assert target.connections.address == ("127.0.0.1", expected_port)
        if target.connections.tls is not None:
            assert target.connections.tls.check_hostname and target.connections.tls.verify_mode.name == "CERT_REQUIRED"
    finally:
        target.close()
