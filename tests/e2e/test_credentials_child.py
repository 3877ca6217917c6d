"""Region and credentials come from botocore's chain run in a child process (workerless_gevent/aws/child.py):
temporary credentials are renewed before they expire, by a new child, and the wire signs with the new ones."""

from __future__ import annotations

import datetime
import json
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from gevent import pywsgi

from tests.support import CountingProxy, Daemon, HttpApp, Queue, count_messages, wait_until
from tests.support.moto import free_port

RENEW_BEFORE_SECONDS = 15 * 60  # aws.child renews this long before the expiry


class CredentialsEndpoint:
    """The ECS container credentials endpoint: each fetch hands out new keys and a new token that
    expire `lifetime` seconds later."""

    def __init__(self, lifetime: float) -> None:
        self.lifetime = lifetime
        self.tokens: list[str] = []
        self.server = pywsgi.WSGIServer(("127.0.0.1", free_port()), self.app, log=None)

    def app(self, environ: dict[str, Any], start_response: Any) -> list[bytes]:
        token = f"token-{len(self.tokens) + 1}"
        self.tokens.append(token)
        expires = datetime.datetime.now(datetime.timezone.utc) + datetime.timedelta(seconds=self.lifetime)
        body = json.dumps({"AccessKeyId": f"ASIA{len(self.tokens):016d}", "SecretAccessKey": "secret",
                           "Token": token, "Expiration": expires.strftime("%Y-%m-%dT%H:%M:%SZ")}).encode()
        start_response("200 OK", [("Content-Type", "application/json"), ("Content-Length", str(len(body)))])
        return [body]

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_port}/v2/credentials"


@pytest.fixture
def credentials_endpoint() -> Iterator[CredentialsEndpoint]:
    endpoint = CredentialsEndpoint(lifetime=RENEW_BEFORE_SECONDS + 4)  # renewal due 4 s after each fetch
    endpoint.server.start()
    yield endpoint
    endpoint.server.stop()


def start_on_container_credentials(daemon: Callable[..., Daemon], proxied_env: dict[str, str],
                                   endpoint: CredentialsEndpoint, queue: Queue, app: HttpApp) -> Daemon:
    """The daemon with no keys in its environment: botocore's chain finds the container endpoint."""
    env = {key: value for key, value in proxied_env.items() if key not in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY")}
    env["AWS_CONTAINER_CREDENTIALS_FULL_URI"] = endpoint.url
    proc = daemon([f"--queues={queue.name}", f"--http={app.url}/work", "--concurrency=2", "--poll-for=1"], env=env)
    proc.wait_for_output("workerless started", timeout=60)
    return proc


def test_temporary_credentials_are_renewed_before_they_expire_and_signed_with(
    daemon: Callable[..., Daemon], proxied_env: dict[str, str], counting_proxy: CountingProxy,
    credentials_endpoint: CredentialsEndpoint, http_app: HttpApp, sqs: Any, make_queue: Callable[..., Queue],
) -> None:
    queue = make_queue()
    proc = start_on_container_credentials(daemon, proxied_env, credentials_endpoint, queue, http_app)

    def tokens_signed_with() -> set[str | None]:
        return {request.security_token for request in counting_proxy.requests if request.action == "ReceiveMessage"}

    wait_until(lambda: len(tokens_signed_with() - {None}) >= 3, 60,
               message=lambda: f"tokens fetched {credentials_endpoint.tokens}, signed with {tokens_signed_with()}")
    assert None not in tokens_signed_with()
    assert tokens_signed_with() <= set(credentials_endpoint.tokens)
    sqs.send_message(QueueUrl=queue.url, MessageBody="after renewals")
    assert http_app.wait_for_requests(1, timeout=30)[0].body == b"after renewals"
    wait_until(lambda: count_messages(sqs, queue.url) == 0, 30, message="not deleted with renewed credentials")
    assert proc.stop(timeout=30) == 0
    assert proc.output().count("AWS credentials renewed") >= 2


def test_a_failing_renewal_keeps_the_current_credentials_and_tries_again(
    daemon: Callable[..., Daemon], proxied_env: dict[str, str], counting_proxy: CountingProxy,
    credentials_endpoint: CredentialsEndpoint, http_app: HttpApp, sqs: Any, make_queue: Callable[..., Queue],
) -> None:
    queue = make_queue()
    proc = start_on_container_credentials(daemon, proxied_env, credentials_endpoint, queue, http_app)
    credentials_endpoint.server.stop()  # renewals fail from now on
    proc.wait_for_output("AWS credentials not renewed", timeout=60)
    sqs.send_message(QueueUrl=queue.url, MessageBody="still signed")
    assert http_app.wait_for_requests(1, timeout=30)[0].body == b"still signed"
    wait_until(lambda: count_messages(sqs, queue.url) == 0, 30, message="not deleted after a failed renewal")
    tokens = {request.security_token for request in counting_proxy.requests}
    assert tokens == {"token-1"}, tokens
    assert proc.stop(timeout=30) == 0
