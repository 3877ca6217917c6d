"""Web identity (EKS IRSA): with only AWS_WEB_IDENTITY_TOKEN_FILE and AWS_ROLE_ARN (no keys, no AWS file), the
daemon calls STS AssumeRoleWithWebIdentity itself (workerless_gevent/aws/web_identity.py), at start and at each
renewal, reading the token file each time, and its process tree stays one process: no credentials child, ever.
The fake STS (tests/support/sts.py) is pointed at with AWS_ENDPOINT_URL_STS, as botocore would be.

"No child" is checked two ways, as in test_container_credentials.py: STS notes the daemon's children as each
request comes in, and a sampler reads them every 5 ms for the whole run."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support import CountingProxy, Daemon, HttpApp, Queue, count_messages, wait_until
from tests.support.credentials_endpoint import (ChildSampler, assert_delivers_after_renewals, assert_never_a_child,
                                               assert_still_delivers_signed_with, signed_with)
from tests.support.sts import FakeSts
from workerless_gevent.aws.renewal import RENEW_BEFORE_SECONDS

ROLE = "arn:aws:iam::123456789012:role/app"
KEY_VARIABLES = ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_SECURITY_TOKEN")


@pytest.fixture
def sts() -> Iterator[FakeSts]:
    """Keys due for renewal 4 s after each call."""
    service = FakeSts(lifetime=RENEW_BEFORE_SECONDS + 4)
    service.start()
    yield service
    service.stop()


def start_on_web_identity(daemon: Callable[..., Daemon], proxied_env: dict[str, str], sts: FakeSts, queue: Queue,
                          app: HttpApp, sampler: ChildSampler, token_file: Path, **variables: str) -> Daemon:
    env = {key: value for key, value in proxied_env.items() if key not in KEY_VARIABLES}
    env.update(AWS_WEB_IDENTITY_TOKEN_FILE=str(token_file), AWS_ROLE_ARN=ROLE, AWS_ENDPOINT_URL_STS=sts.url,
               **variables)
    proc = daemon([f"--queues={queue.name}", f"--http={app.url}/work", "--concurrency=4", "--poll-for=1"], env=env)
    sts.watched_pid = sampler.pid = proc.pid
    return proc


def test_a_daemon_on_web_identity_delivers_with_no_child(
    daemon: Callable[..., Daemon], proxied_env: dict[str, str], counting_proxy: CountingProxy, http_app: HttpApp,
    sqs: Any, make_queue: Callable[..., Queue], child_sampler: ChildSampler, sts: FakeSts, tmp_path: Path,
) -> None:
    sts.lifetime = 3600  # the next renewal is 45 min away
    (tmp_path / "token").write_text("pod-token")
    queue = make_queue()
    proc = start_on_web_identity(daemon, proxied_env, sts, queue, http_app, child_sampler, tmp_path / "token",
                                 AWS_ROLE_SESSION_NAME="worker-7")
    proc.wait_for_output("workerless started", timeout=60)
    for index in range(20):
        sqs.send_message(QueueUrl=queue.url, MessageBody=f"message {index}")
    http_app.wait_for_requests(20, timeout=60)
    wait_until(lambda: count_messages(sqs, queue.url) == 0, 30, message="not deleted")
    assert proc.stop(timeout=30) == 0
    assert [request.form for request in sts.requests] == [{
        "Action": "AssumeRoleWithWebIdentity", "Version": "2011-06-15", "RoleArn": ROLE,
        "RoleSessionName": "worker-7", "WebIdentityToken": "pod-token"}]
    assert not sts.requests[0].signed
    assert {request.security_token for request in counting_proxy.requests} == {"sts-session-1"}
    assert_never_a_child(sts, child_sampler)


def test_web_identity_credentials_are_renewed_from_sts_with_no_child(
    daemon: Callable[..., Daemon], proxied_env: dict[str, str], counting_proxy: CountingProxy, http_app: HttpApp,
    sqs: Any, make_queue: Callable[..., Queue], child_sampler: ChildSampler, sts: FakeSts, tmp_path: Path,
) -> None:
    """Each call reads the token file again (the kubelet rotates it), under one session name (botocore's own)."""
    token_file = tmp_path / "token"
    token_file.write_text("first-token")
    queue = make_queue()
    proc = start_on_web_identity(daemon, proxied_env, sts, queue, http_app, child_sampler, token_file)
    wait_until(lambda: sts.requests, 60, message="no call at start")
    token_file.write_text("rotated-token")  # the renewal is due 4 s after that call
    wait_until(lambda: len(signed_with(counting_proxy) - {None}) >= 3, 60,
               message=lambda: f"tokens handed out {sts.tokens}, signed with {signed_with(counting_proxy)}")
    assert_delivers_after_renewals(proc, sqs, queue, http_app, counting_proxy, sts.tokens)
    tokens = [request.token for request in sts.requests]
    assert tokens[0] == "first-token" and set(tokens[1:]) == {"rotated-token"}, tokens
    names = {request.form["RoleSessionName"] for request in sts.requests}
    assert len(names) == 1 and re.fullmatch(r"botocore-session-\d+", names.pop())
    assert_never_a_child(sts, child_sampler)


def test_sts_failing_at_renewal_keeps_the_current_credentials(
    daemon: Callable[..., Daemon], proxied_env: dict[str, str], counting_proxy: CountingProxy, http_app: HttpApp,
    sqs: Any, make_queue: Callable[..., Queue], child_sampler: ChildSampler, sts: FakeSts, tmp_path: Path,
) -> None:
    (tmp_path / "token").write_text("pod-token")
    queue = make_queue()
    sts.error, sts.error_after = (400, "InvalidIdentityToken"), 1  # the start's call only: every renewal fails
    proc = start_on_web_identity(daemon, proxied_env, sts, queue, http_app, child_sampler, tmp_path / "token")
    proc.wait_for_output("workerless started", timeout=60)
    log = proc.wait_for_output("AWS credentials not renewed", timeout=60)
    assert (f"no AWS credentials from STS AssumeRoleWithWebIdentity at {sts.url} for {ROLE} (1 attempt): "
            "InvalidIdentityToken: failing on purpose" in log and "trying again in 30 s" in log), log
    assert_still_delivers_signed_with(proc, sqs, queue, http_app, counting_proxy, "sts-session-1")
    assert len(sts.requests) >= 2 and sts.tokens == ["sts-session-1"]
    assert_never_a_child(sts, child_sampler)


def test_sts_failing_at_start_stops_the_daemon_with_one_line(
    daemon: Callable[..., Daemon], proxied_env: dict[str, str], http_app: HttpApp, make_queue: Callable[..., Queue],
    child_sampler: ChildSampler, sts: FakeSts, tmp_path: Path,
) -> None:
    (tmp_path / "token").write_text("expired-token")
    sts.error = (400, "InvalidIdentityToken")
    proc = start_on_web_identity(daemon, proxied_env, sts, make_queue(), http_app, child_sampler, tmp_path / "token")
    assert proc.wait_exit(timeout=60) == 1
    lines = proc.output().strip().splitlines()
    assert lines[-1] == ("workerless: cannot start: no AWS credentials from STS AssumeRoleWithWebIdentity at "
                         f"{sts.url} for {ROLE} (1 attempt): InvalidIdentityToken: failing on purpose"), lines
    assert "Traceback" not in proc.output()
    assert [request.token for request in sts.requests] == ["expired-token"]
    assert_never_a_child(sts, child_sampler)
