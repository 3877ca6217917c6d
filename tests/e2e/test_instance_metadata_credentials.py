"""An EC2 instance profile: with no keys, no container variable and no AWS file, the daemon fetches its credentials
(and, with no region set, its region) from the instance metadata service itself
(workerless_gevent/aws/instance_metadata.py), at start and at each renewal, and its process tree stays one
process: no credentials child, ever. The fake IMDS (tests/support/instance_metadata.py) is pointed at with
AWS_EC2_METADATA_SERVICE_ENDPOINT, as botocore would be.

"No child" is checked two ways, as in test_container_credentials.py: IMDS notes the daemon's children as each
request comes in, and a sampler reads them every 5 ms for the whole run."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest

from tests.support import CountingProxy, Daemon, HttpApp, Queue, count_messages, wait_until
from tests.support.credentials_endpoint import (ChildSampler, assert_delivers_after_renewals, assert_never_a_child,
                                               assert_still_delivers_signed_with, signed_with)
from tests.support.instance_metadata import ROLE_PATH, ZONE_PATH, InstanceMetadataService
from tests.support.moto import REGION
from workerless_gevent.aws.renewal import RENEW_BEFORE_SECONDS

DROPPED = ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_SECURITY_TOKEN",
           "AWS_EC2_METADATA_DISABLED")


@pytest.fixture
def imds() -> Iterator[InstanceMetadataService]:
    """Keys due for renewal 4 s after each fetch: their expiry written +00:00, which botocore does not extend."""
    service = InstanceMetadataService(lifetime=RENEW_BEFORE_SECONDS + 4, zone=f"{REGION}c")
    service.offset_expiration = True
    service.start()
    yield service
    service.stop()


def start_on_imds(daemon: Callable[..., Daemon], proxied_env: dict[str, str], imds: InstanceMetadataService,
                  queue: Queue, app: HttpApp, sampler: ChildSampler, dropped: tuple[str, ...] = DROPPED) -> Daemon:
    env = {key: value for key, value in proxied_env.items() if key not in dropped}
    env["AWS_EC2_METADATA_SERVICE_ENDPOINT"] = imds.url
    proc = daemon([f"--queues={queue.name}", f"--http={app.url}/work", "--concurrency=4", "--poll-for=1"], env=env)
    imds.watched_pid = sampler.pid = proc.pid
    return proc


def test_a_daemon_on_an_instance_profile_delivers_with_no_child_region_from_imds(
    daemon: Callable[..., Daemon], proxied_env: dict[str, str], counting_proxy: CountingProxy, http_app: HttpApp,
    sqs: Any, make_queue: Callable[..., Queue], child_sampler: ChildSampler, imds: InstanceMetadataService,
) -> None:
    imds.lifetime = 6 * 3600  # the next renewal is hours away
    queue = make_queue()
    proc = start_on_imds(daemon, proxied_env, imds, queue, http_app, child_sampler,
                         (*DROPPED, "AWS_REGION", "AWS_DEFAULT_REGION"))
    proc.wait_for_output("workerless started", timeout=60)
    assert f"region: {REGION} (from EC2 instance metadata)" in proc.output(), proc.output()
    for index in range(20):
        sqs.send_message(QueueUrl=queue.url, MessageBody=f"message {index}")
    http_app.wait_for_requests(20, timeout=60)
    wait_until(lambda: count_messages(sqs, queue.url) == 0, 30, message="not deleted")
    assert proc.stop(timeout=30) == 0
    assert [(request.method, request.path, request.token) for request in imds.requests] == [
        ("PUT", "/latest/api/token", None), ("GET", ZONE_PATH, "imds-token-1"),
        ("PUT", "/latest/api/token", None), ("GET", ROLE_PATH, "imds-token-2"),
        ("GET", ROLE_PATH + "app-role", "imds-token-2")]
    assert {request.security_token for request in counting_proxy.requests} == {"session-1"}
    assert_never_a_child(imds, child_sampler)


def test_expiring_instance_profile_keys_are_renewed_from_imds_with_no_child(
    daemon: Callable[..., Daemon], proxied_env: dict[str, str], counting_proxy: CountingProxy, http_app: HttpApp,
    sqs: Any, make_queue: Callable[..., Queue], child_sampler: ChildSampler, imds: InstanceMetadataService,
) -> None:
    queue = make_queue()
    proc = start_on_imds(daemon, proxied_env, imds, queue, http_app, child_sampler)
    wait_until(lambda: len(signed_with(counting_proxy) - {None}) >= 3, 60,
               message=lambda: f"keys fetched {imds.keys}, signed with {signed_with(counting_proxy)}")
    assert_delivers_after_renewals(proc, sqs, queue, http_app, counting_proxy, imds.keys)
    # each fetch with a token of its own (IMDSv2), never IMDSv1
    assert all(request.token in imds.issued for request in imds.requests if request.method == "GET")
    assert len(imds.fetches()) >= 3 and len(imds.issued) >= len(imds.fetches())  # a fetch may be cut by the stop
    assert_never_a_child(imds, child_sampler)


def test_imds_failing_at_renewal_keeps_the_current_credentials(
    daemon: Callable[..., Daemon], proxied_env: dict[str, str], counting_proxy: CountingProxy, http_app: HttpApp,
    sqs: Any, make_queue: Callable[..., Queue], child_sampler: ChildSampler, imds: InstanceMetadataService,
) -> None:
    queue = make_queue()
    imds.failing, imds.fail_after = True, 1  # the start's fetch only: every renewal fails, whenever it comes
    proc = start_on_imds(daemon, proxied_env, imds, queue, http_app, child_sampler)
    log = proc.wait_for_output("AWS credentials not renewed", timeout=60)
    assert "no AWS credentials from the EC2 instance metadata service" in log and "trying again in 30 s" in log, log
    assert_still_delivers_signed_with(proc, sqs, queue, http_app, counting_proxy, "session-1")
    assert_never_a_child(imds, child_sampler)


def test_imds_failing_at_start_stops_the_daemon_with_one_line(
    daemon: Callable[..., Daemon], proxied_env: dict[str, str], http_app: HttpApp, make_queue: Callable[..., Queue],
    child_sampler: ChildSampler, imds: InstanceMetadataService,
) -> None:
    imds.failing = True
    proc = start_on_imds(daemon, proxied_env, imds, make_queue(), http_app, child_sampler)
    assert proc.wait_exit(timeout=60) == 1
    lines = proc.output().strip().splitlines()
    assert lines[-1] == ("workerless: cannot start: no AWS credentials from the EC2 instance metadata service "
                         f"{imds.url} (1 attempt): latest/meta-data/iam/security-credentials/: status 500: "
                         "'failing on purpose'"), lines
    assert "Traceback" not in proc.output()
    assert [(request.method, request.path) for request in imds.requests] == [("PUT", "/latest/api/token"),
                                                                              ("GET", ROLE_PATH)]
    assert_never_a_child(imds, child_sampler)
