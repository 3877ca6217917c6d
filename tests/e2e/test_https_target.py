"""An app on HTTPS with its own CA, behind a bearer token from the environment: the daemon verifies the
certificate ([aws] ca_bundle), sends the header with every POST, and never shows the token."""

from __future__ import annotations

import ssl
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Callable

import pytest

from tests.support import Daemon, HttpApp, Queue, build_config_file, count_messages, wait_until
from tests.support.tls import self_signed_certificate

TOKEN = "tok-3f9a1c0e77d24b59"


@pytest.fixture
def https_app(tmp_path: Path) -> Iterator[tuple[HttpApp, Path]]:
    """The recording app on HTTPS, with a certificate for 127.0.0.1 that is its own CA, and that CA."""
    cert, key = self_signed_certificate(tmp_path)
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(cert, key)
    app = HttpApp(ssl_context=context)
    app.start()
    yield app, cert
    app.stop()


def https_config(tmp_path: Path, queue: Queue, app: HttpApp, ca: Path | None) -> Path:
    headers = '{ Authorization = "Bearer ${APP_TOKEN}", X-Tenant = "acme" }'
    path = build_config_file(tmp_path, queues=[{"name": queue.name}],
                             targets={"default": {"type": "http", "url": f"{app.url}/jobs"}},
                             tables={"aws": {"ca_bundle": str(ca)}} if ca else None)
    path.write_text(path.read_text().replace('url = "https', f'headers = {headers}\nurl = "https'))
    return path


def test_deliveries_go_over_verified_tls_with_the_token_from_the_environment(
    daemon: Callable[..., Daemon], aws_env: dict[str, str], https_app: tuple[HttpApp, Path], sqs: Any,
    make_queue: Callable[..., Queue], tmp_path: Path,
) -> None:
    app, ca = https_app
    queue = make_queue()
    for body in ("first", "second"):
        sqs.send_message(QueueUrl=queue.url, MessageBody=body)
    config = https_config(tmp_path, queue, app, ca)
    proc = daemon(["-c", str(config)], env={**aws_env, "APP_TOKEN": TOKEN})
    requests = app.wait_for_requests(2, timeout=60)
    wait_until(lambda: count_messages(sqs, queue.url) == 0, 30, message="not deleted")
    assert proc.stop(timeout=30) == 0
    assert sorted(request.body for request in requests) == [b"first", b"second"]
    for request in requests:
        assert request.path == "/jobs"
        assert request.headers["authorization"] == f"Bearer {TOKEN}"
        assert request.headers["x-tenant"] == "acme"
        assert request.headers["host"] == app.url.removeprefix("https://")
        assert request.headers["user-agent"].startswith("aws-sqsd/")
    assert TOKEN not in proc.output()


def test_without_the_apps_ca_every_delivery_fails_and_nothing_is_deleted(
    daemon: Callable[..., Daemon], aws_env: dict[str, str], https_app: tuple[HttpApp, Path], sqs: Any,
    make_queue: Callable[..., Queue], tmp_path: Path,
) -> None:
    app, _ = https_app
    queue = make_queue()
    sqs.send_message(QueueUrl=queue.url, MessageBody="unverified")
    proc = daemon(["-c", str(https_config(tmp_path, queue, app, None))], env={**aws_env, "APP_TOKEN": TOKEN})
    proc.wait_for_output("CERTIFICATE_VERIFY_FAILED", timeout=60)
    assert proc.stop(timeout=30) == 0
    assert app.requests == []
    assert count_messages(sqs, queue.url) == 1
    assert TOKEN not in proc.output()


def test_check_shows_header_names_only_and_a_missing_variable_is_exit_2(
    daemon: Callable[..., Daemon], aws_env: dict[str, str], https_app: tuple[HttpApp, Path],
    make_queue: Callable[..., Queue], tmp_path: Path,
) -> None:
    app, ca = https_app
    config = https_config(tmp_path, make_queue(), app, ca)
    checked = daemon(["check", "-c", str(config)], env={**aws_env, "APP_TOKEN": TOKEN})
    assert checked.wait_exit(timeout=30) == 0
    assert '"Authorization": "(set, hidden)"' in checked.output()
    assert TOKEN not in checked.output() and "acme" not in checked.output()
    missing = daemon(["-c", str(config)], env={key: value for key, value in aws_env.items() if key != "APP_TOKEN"})
    assert missing.wait_exit(timeout=30) == 2
    assert missing.output().strip().splitlines() == [
        f"{config}: targets.default.headers.Authorization: uses ${{APP_TOKEN}}, which is not set or empty in the "
        "environment"]


@pytest.mark.parametrize("headers", ["", 'headers = { Authorization = "Bearer ${APP_TOKEN}" }\n'])
def test_an_app_off_loopback_gets_a_start_warning_unless_deliveries_carry_an_authorization(
    daemon: Callable[..., Daemon], aws_env: dict[str, str], make_queue: Callable[..., Queue], tmp_path: Path,
    headers: str,
) -> None:
    queue = make_queue()  # empty: nothing is delivered to the address below, which nothing answers
    path = build_config_file(tmp_path, queues=[{"name": queue.name}],
                             targets={"default": {"type": "http", "url": "https://10.255.255.1:8443/jobs"}})
    path.write_text(path.read_text().replace('url = "https', f'{headers}url = "https'))
    proc = daemon(["-c", str(path)], env={**aws_env, "APP_TOKEN": TOKEN})
    proc.wait_for_output("workerless started", timeout=30)
    assert proc.stop(timeout=20) == 0
    warned = "which is not on loopback, without signing or an Authorization header" in proc.output()
    assert warned is (not headers)
    assert TOKEN not in proc.output()
