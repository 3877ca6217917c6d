"""SQS over HTTPS trusts what botocore trusts: [aws] ca_bundle, then AWS_CA_BUNDLE, then botocore's
bundle, for the start-up calls and for the wire alike (a test CA in front of the emulator)."""

from __future__ import annotations

import ssl
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support import Daemon, HttpApp, Queue, count_messages, wait_until
from tests.support.config_file import build_config_file
from tests.support.tcp_proxy import TcpProxy
from tests.support.tls import self_signed_certificate


@pytest.fixture
def tls_sqs(moto_endpoint: str, tmp_path: Path) -> Iterator[tuple[TcpProxy, Path]]:
    """A TLS endpoint with a certificate of its own CA in front of moto, and that CA's PEM file."""
    cert, key = self_signed_certificate(tmp_path)
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(cert, key)
    proxy = TcpProxy(moto_endpoint, ssl_context=context)
    proxy.start()
    yield proxy, cert
    proxy.close()


def config_for(tmp_path: Path, queue: Queue, app: HttpApp, **aws: str) -> Path:
    return build_config_file(tmp_path, concurrency=2, queues=[{"name": queue.name}],
                             targets={"default": {"type": "http", "url": f"{app.url}/work"}},
                             tables={"aws": aws} if aws else None)


@pytest.mark.parametrize("given_by", ["AWS_CA_BUNDLE", "[aws] ca_bundle"])
def test_the_daemon_receives_and_deletes_over_tls_with_the_ca_it_is_given(
    daemon: Callable[..., Daemon], aws_env: dict[str, str], http_app: HttpApp, sqs: Any,
    make_queue: Callable[..., Queue], tls_sqs: tuple[TcpProxy, Path], tmp_path: Path, given_by: str,
) -> None:
    proxy, ca = tls_sqs
    queue = make_queue()
    env = {**aws_env, "AWS_ENDPOINT_URL": proxy.url}
    if given_by == "AWS_CA_BUNDLE":
        env["AWS_CA_BUNDLE"] = str(ca)
        config = config_for(tmp_path, queue, http_app)
    else:
        config = config_for(tmp_path, queue, http_app, ca_bundle=ca.name)  # relative to the config file
    sqs.send_message(QueueUrl=queue.url, MessageBody="over tls")
    proc = daemon(["-c", str(config)], env=env)
    assert http_app.wait_for_requests(1, timeout=30)[0].body == b"over tls"
    wait_until(lambda: count_messages(sqs, queue.url) == 0, 15, message="not deleted over TLS")
    assert proc.stop(timeout=20) == 0
    assert proxy.connections >= 2  # start-up (boto3) and the wire's own connection
    assert "SSL" not in proc.output()


def test_without_the_ca_the_start_fails_with_one_line_naming_the_endpoint(
    daemon: Callable[..., Daemon], aws_env: dict[str, str], http_app: HttpApp,
    make_queue: Callable[..., Queue], tls_sqs: tuple[TcpProxy, Path], tmp_path: Path,
) -> None:
    proxy, _ = tls_sqs
    queue = make_queue()
    env = {**aws_env, "AWS_ENDPOINT_URL": proxy.url}
    env.pop("AWS_CA_BUNDLE", None)
    proc = daemon(["-c", str(config_for(tmp_path, queue, http_app))], env=env)
    assert proc.wait_exit(timeout=60) == 1
    lines = proc.output().strip().splitlines()
    assert len(lines) == 1, lines
    assert lines[0].startswith("workerless: cannot start: ") and proxy.url in lines[0]
    assert "CERTIFICATE_VERIFY_FAILED" in lines[0]


def test_a_missing_ca_bundle_file_is_a_config_error(
    daemon: Callable[..., Daemon], aws_env: dict[str, str], http_app: HttpApp,
    make_queue: Callable[..., Queue], tmp_path: Path,
) -> None:
    config = config_for(tmp_path, make_queue(), http_app, ca_bundle="missing.pem")
    proc = daemon(["check", "-c", str(config)], env=aws_env)
    assert proc.wait_exit(timeout=30) == 2
    assert proc.output().strip().splitlines() == [
        f'{config}: aws.ca_bundle: must be a PEM file of CA certificates that exists (got "{tmp_path}/missing.pem")']
