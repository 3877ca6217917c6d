"""An ECS task role (or EKS Pod Identity): with only AWS_CONTAINER_CREDENTIALS_FULL_URI (no keys, no AWS file),
the daemon fetches its credentials from the container endpoint itself (workerless_gevent/aws/container.py), at
start and at each renewal, and its process tree stays one process: no credentials child, ever.

"No child" is checked two ways: the endpoint notes the daemon's children as each fetch comes in (the moment a
child would exist; test_credentials_child.py checks that it does there), and a sampler reads them every few
milliseconds for the whole run."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from tests.support import CountingProxy, Daemon, HttpApp, Queue, count_messages, wait_until
from tests.support.credentials_endpoint import (ChildSampler, CredentialsEndpoint, assert_delivers_after_renewals,
                                               assert_never_a_child, assert_still_delivers_signed_with, signed_with)

KEY_VARIABLES = ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_SECURITY_TOKEN")


def start_on_the_endpoint(daemon: Callable[..., Daemon], proxied_env: dict[str, str], endpoint: CredentialsEndpoint,
                          queue: Queue, app: HttpApp, sampler: ChildSampler, **variables: str) -> Daemon:
    env = {key: value for key, value in proxied_env.items() if key not in KEY_VARIABLES}
    env["AWS_CONTAINER_CREDENTIALS_FULL_URI"] = endpoint.url
    env.update(variables)
    proc = daemon([f"--queues={queue.name}", f"--http={app.url}/work", "--concurrency=4", "--poll-for=1"], env=env)
    endpoint.watched_pid = sampler.pid = proc.pid
    return proc


def test_a_daemon_on_container_credentials_delivers_with_no_child(
    daemon: Callable[..., Daemon], proxied_env: dict[str, str], counting_proxy: CountingProxy, http_app: HttpApp,
    sqs: Any, make_queue: Callable[..., Queue], child_sampler: ChildSampler,
) -> None:
    endpoint = CredentialsEndpoint(lifetime=3600)  # the next renewal is 45 min away
    endpoint.start()
    try:
        queue = make_queue()
        proc = start_on_the_endpoint(daemon, proxied_env, endpoint, queue, http_app, child_sampler,
                                     AWS_CONTAINER_AUTHORIZATION_TOKEN="task-token")
        proc.wait_for_output("workerless started", timeout=60)
        for index in range(20):
            sqs.send_message(QueueUrl=queue.url, MessageBody=f"message {index}")
        http_app.wait_for_requests(20, timeout=60)
        wait_until(lambda: count_messages(sqs, queue.url) == 0, 30, message="not deleted")
        assert proc.stop(timeout=30) == 0
    finally:
        endpoint.stop()
    assert [request.authorization for request in endpoint.requests] == ["task-token"]
    assert {request.security_token for request in counting_proxy.requests} == {"token-1"}
    assert_never_a_child(endpoint, child_sampler)


def test_expiring_container_credentials_are_renewed_from_the_endpoint_with_no_child(
    daemon: Callable[..., Daemon], proxied_env: dict[str, str], counting_proxy: CountingProxy,
    credentials_endpoint: CredentialsEndpoint, http_app: HttpApp, sqs: Any, make_queue: Callable[..., Queue],
    child_sampler: ChildSampler, tmp_path: Path,
) -> None:
    """Each fetch reads the token file again (EKS Pod Identity rotates it), and the wire signs with each renewal."""
    token_file = tmp_path / "token"
    token_file.write_text("first-token")
    queue = make_queue()
    proc = start_on_the_endpoint(daemon, proxied_env, credentials_endpoint, queue, http_app, child_sampler,
                                 AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE=str(token_file),
                                 AWS_CONTAINER_AUTHORIZATION_TOKEN="ignored-beside-the-file")
    wait_until(lambda: credentials_endpoint.requests, 60, message="no fetch at start")
    token_file.write_text("rotated-token")  # the renewal is due 4 s after that fetch

    wait_until(lambda: len(signed_with(counting_proxy) - {None}) >= 3, 60,
               message=lambda: f"tokens fetched {credentials_endpoint.tokens}, "
                               f"signed with {signed_with(counting_proxy)}")
    assert_delivers_after_renewals(proc, sqs, queue, http_app, counting_proxy, credentials_endpoint.tokens)
    authorizations = [request.authorization for request in credentials_endpoint.requests]
    assert authorizations[0] == "first-token" and set(authorizations[1:]) == {"rotated-token"}, authorizations
    assert_never_a_child(credentials_endpoint, child_sampler)


def test_a_container_endpoint_failing_at_renewal_keeps_the_current_credentials(
    daemon: Callable[..., Daemon], proxied_env: dict[str, str], counting_proxy: CountingProxy,
    credentials_endpoint: CredentialsEndpoint, http_app: HttpApp, sqs: Any, make_queue: Callable[..., Queue],
    child_sampler: ChildSampler,
) -> None:
    queue = make_queue()
    credentials_endpoint.failing, credentials_endpoint.fail_after = True, 1  # the start's fetch only: renewals fail
    proc = start_on_the_endpoint(daemon, proxied_env, credentials_endpoint, queue, http_app, child_sampler)
    proc.wait_for_output("workerless started", timeout=60)
    log = proc.wait_for_output("AWS credentials not renewed", timeout=60)
    assert "no AWS credentials from the container endpoint" in log and "trying again in 30 s" in log, log
    assert len(credentials_endpoint.requests) >= 4  # the start's fetch, then a renewal's 3 attempts
    assert_still_delivers_signed_with(proc, sqs, queue, http_app, counting_proxy, "token-1")
    assert_never_a_child(credentials_endpoint, child_sampler)


def test_a_container_endpoint_failing_at_start_stops_the_daemon_with_one_line(
    daemon: Callable[..., Daemon], proxied_env: dict[str, str], credentials_endpoint: CredentialsEndpoint,
    http_app: HttpApp, make_queue: Callable[..., Queue], child_sampler: ChildSampler,
) -> None:
    credentials_endpoint.failing = True
    proc = start_on_the_endpoint(daemon, proxied_env, credentials_endpoint, make_queue(), http_app, child_sampler)
    assert proc.wait_exit(timeout=60) == 1
    lines = proc.output().strip().splitlines()
    assert lines[-1].startswith("workerless: cannot start: no AWS credentials from the container endpoint "
                                f"{credentials_endpoint.url} (3 attempts): status 500"), lines
    assert "Traceback" not in proc.output()
    assert len(credentials_endpoint.requests) == 3
    assert_never_a_child(credentials_endpoint, child_sampler)
