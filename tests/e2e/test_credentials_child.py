"""Region and credentials come from botocore's chain run in a child process (workerless_gevent/aws/child.py):
temporary credentials are renewed before they expire, by a new child, and the wire signs with the new ones.

The credentials are a container endpoint's, as in test_container_credentials.py, but an AWS config file
exists (empty: botocore's chain still ends at the container), so the daemon leaves the answer to the child.
The same for an EC2 instance profile (test_instance_metadata_credentials.py without the AWS file)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from tests.support import CountingProxy, Daemon, HttpApp, Queue, count_messages, wait_until
from tests.support.credentials_endpoint import CredentialsEndpoint
from tests.support.instance_metadata import InstanceMetadataService
from workerless_gevent.aws.renewal import RENEW_BEFORE_SECONDS


def start_on_container_credentials(daemon: Callable[..., Daemon], proxied_env: dict[str, str],
                                   endpoint: CredentialsEndpoint, queue: Queue, app: HttpApp,
                                   config_file: Path) -> Daemon:
    """The daemon with no keys in its environment and an AWS config file: botocore's chain, in a child, finds
    the container endpoint."""
    env = {key: value for key, value in proxied_env.items() if key not in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY")}
    config_file.write_text("")
    env["AWS_CONFIG_FILE"] = str(config_file)
    env["AWS_CONTAINER_CREDENTIALS_FULL_URI"] = endpoint.url
    proc = daemon([f"--queues={queue.name}", f"--http={app.url}/work", "--concurrency=2", "--poll-for=1"], env=env)
    endpoint.watched_pid = proc.pid
    proc.wait_for_output("workerless started", timeout=60)
    return proc


def test_temporary_credentials_are_renewed_before_they_expire_and_signed_with(
    daemon: Callable[..., Daemon], proxied_env: dict[str, str], counting_proxy: CountingProxy,
    credentials_endpoint: CredentialsEndpoint, http_app: HttpApp, sqs: Any, make_queue: Callable[..., Queue],
    tmp_path: Path,
) -> None:
    queue = make_queue()
    proc = start_on_container_credentials(daemon, proxied_env, credentials_endpoint, queue, http_app,
                                          tmp_path / "aws-config")

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
    # Each fetch came from a child of the daemon (what test_container_credentials.py checks never happens there).
    assert all(request.children for request in credentials_endpoint.requests), credentials_endpoint.requests


def test_a_failing_renewal_keeps_the_current_credentials_and_tries_again(
    daemon: Callable[..., Daemon], proxied_env: dict[str, str], counting_proxy: CountingProxy,
    credentials_endpoint: CredentialsEndpoint, http_app: HttpApp, sqs: Any, make_queue: Callable[..., Queue],
    tmp_path: Path,
) -> None:
    queue = make_queue()
    credentials_endpoint.failing, credentials_endpoint.fail_after = True, 1  # the start's fetch only: renewals fail
    proc = start_on_container_credentials(daemon, proxied_env, credentials_endpoint, queue, http_app,
                                          tmp_path / "aws-config")
    proc.wait_for_output("AWS credentials not renewed", timeout=60)
    sqs.send_message(QueueUrl=queue.url, MessageBody="still signed")
    assert http_app.wait_for_requests(1, timeout=30)[0].body == b"still signed"
    wait_until(lambda: count_messages(sqs, queue.url) == 0, 30, message="not deleted after a failed renewal")
    tokens = {request.security_token for request in counting_proxy.requests}
    assert tokens == {"token-1"}, tokens
    assert proc.stop(timeout=30) == 0


def test_an_instance_profile_beside_an_aws_config_file_is_resolved_and_renewed_by_a_child(
    daemon: Callable[..., Daemon], proxied_env: dict[str, str], counting_proxy: CountingProxy, http_app: HttpApp,
    sqs: Any, make_queue: Callable[..., Queue], tmp_path: Path,
) -> None:
    imds = InstanceMetadataService(lifetime=RENEW_BEFORE_SECONDS + 4)  # +00:00: botocore does not extend it
    imds.offset_expiration = True
    imds.start()
    try:
        queue = make_queue()
        config_file = tmp_path / "aws-config"
        config_file.write_text("")
        dropped = ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_EC2_METADATA_DISABLED")
        env = {key: value for key, value in proxied_env.items() if key not in dropped}
        env.update(AWS_CONFIG_FILE=str(config_file), AWS_EC2_METADATA_SERVICE_ENDPOINT=imds.url)
        proc = daemon([f"--queues={queue.name}", f"--http={http_app.url}/work", "--concurrency=2", "--poll-for=1"],
                      env=env)
        imds.watched_pid = proc.pid
        proc.wait_for_output("workerless started", timeout=60)
        wait_until(lambda: len(imds.fetches()) >= 3, 60, message=lambda: f"fetches: {imds.fetches()}")
        sqs.send_message(QueueUrl=queue.url, MessageBody="through the child")
        assert http_app.wait_for_requests(1, timeout=30)[0].body == b"through the child"
        assert proc.stop(timeout=30) == 0
    finally:
        imds.stop()
    assert proc.output().count("AWS credentials renewed") >= 2
    assert all(request.children for request in imds.requests), imds.requests  # each asked by a child of the daemon
