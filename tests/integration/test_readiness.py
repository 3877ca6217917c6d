"""AppReadiness (targets/readiness.py) against a real local app: when the gate opens and closes, and
how often it says so."""

from __future__ import annotations

import logging
import socket
import ssl
from pathlib import Path

import gevent
import gevent.event
import pytest

from tests.support import HttpApp, wait_until
from tests.support.tls import self_signed_certificate
from workerless_gevent.config.model import HttpTargetConfig
from workerless_gevent.targets.readiness import CHECK_SECONDS, WARN_EVERY_SECONDS, AppReadiness


def gate_for(url: str, opened: list[int]) -> AppReadiness:
    config = HttpTargetConfig(name="app", url=f"{url}/work", ready_path="/health?deep=1")
    return AppReadiness(config, on_ready=lambda: opened.append(1))


def test_a_check_is_a_get_of_the_ready_path_and_judges_its_status(http_app: HttpApp) -> None:
    gate = gate_for(http_app.url, [])
    http_app.set_status(204)
    assert gate.check() == ""
    http_app.set_status(503)
    assert gate.check() == "HTTP 503"
    request = http_app.requests[0]
    assert (request.method, request.path, request.query) == ("GET", "/health", "deep=1")
    assert request.headers["user-agent"].startswith("aws-sqsd/")


def test_a_check_of_an_app_not_listening_says_so() -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    assert gate_for(f"http://127.0.0.1:{port}", []).check().startswith("ConnectionRefusedError")


def test_a_slow_app_is_not_ready(http_app: HttpApp) -> None:
    http_app.delay = 5
    assert gate_for(http_app.url, []).check() == "no answer within 2s"


def test_the_gate_opens_at_the_first_2xx_and_closes_after_three_failures(caplog: pytest.LogCaptureFixture) -> None:
    opened: list[int] = []
    gate = gate_for("http://127.0.0.1:9", opened)
    caplog.set_level(logging.INFO, "workerless_gevent.targets.readiness")
    start = gate.waiting_since
    assert gate.remaining_seconds() == CHECK_SECONDS and gate.state == "waiting"
    gate.note("HTTP 503", start + 1)
    gate.note("HTTP 503", start + WARN_EVERY_SECONDS - 1)
    assert [record.levelname for record in caplog.records] == []
    gate.note("HTTP 503", start + WARN_EVERY_SECONDS + 1)  # a minute of waiting: one WARNING
    gate.note("HTTP 503", start + WARN_EVERY_SECONDS + 2)
    assert [record.levelname for record in caplog.records] == ["WARNING"]
    assert "app still not ready after 61s: GET http://127.0.0.1:9/health?deep=1: HTTP 503" in caplog.text
    gate.note("", start + 70)
    assert gate.remaining_seconds() == 0 and opened == [1] and gate.state == "ready"
    gate.note("HTTP 500", start + 71)
    gate.note("HTTP 500", start + 72)
    assert gate.is_ready  # one slow or failed answer under load does not stop the deliveries
    gate.note("", start + 73)
    for second in (74, 75, 76):
        gate.note("HTTP 500", start + second)
    assert not gate.is_ready and gate.remaining_seconds() == CHECK_SECONDS
    assert caplog.records[-1].levelname == "WARNING" and "app not ready" in caplog.records[-1].getMessage()
    gate.note("", start + 80)
    assert gate.is_ready and opened == [1, 1]


def test_the_loop_checks_every_second_until_stopped(http_app: HttpApp) -> None:
    opened: list[int] = []
    gate = gate_for(http_app.url, opened)
    http_app.set_status(503)
    stopped = gevent.event.Event()
    loop = gevent.spawn(gate.run, stopped)
    wait_until(lambda: len(http_app.requests) >= 2, 5)
    assert not opened and gate.last_error.endswith("HTTP 503") and gate.last_error_at > 0
    http_app.set_status(200)
    wait_until(lambda: opened == [1], 5)
    stopped.set()
    loop.join(timeout=5)
    assert loop.dead and loop.successful()
    intervals = [later.arrived - earlier.arrived for earlier, later in zip(http_app.requests, http_app.requests[1:])]
    assert all(interval >= CHECK_SECONDS * 0.9 for interval in intervals)


def test_an_https_app_is_checked_over_verified_tls_with_the_target_headers(tmp_path: Path) -> None:
    cert, key = self_signed_certificate(tmp_path)
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(cert, key)
    app = HttpApp(ssl_context=context)
    app.start()
    try:
        config = HttpTargetConfig(name="app", url=f"{app.url}/work", ready_path="/health",
                                  headers={"Authorization": "Bearer t0k"})
        assert config.url.startswith("https://")
        gate = AppReadiness(config, on_ready=lambda: None, ca_bundle=str(cert))
        assert gate.url == app.url + "/health"
        assert gate.check() == ""
        (request,) = app.requests
        assert (request.path, request.headers["authorization"]) == ("/health", "Bearer t0k")
        untrusting = AppReadiness(config, on_ready=lambda: None, ca_bundle=None)  # the system store lacks our CA
        assert "CERTIFICATE_VERIFY_FAILED" in untrusting.check()
    finally:
        app.stop()
