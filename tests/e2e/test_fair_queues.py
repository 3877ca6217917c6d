"""Fair queues through the real daemon on moto: a standard queue's MessageGroupId names a tenant, not a FIFO
group. A tenant's messages go in parallel, a failure holds back none of its group-mates, the per-group cap
(`max_concurrency_per_group`) keeps one tenant from holding every slot without spending a receive, and dead
letters, redrive and `send` keep the group."""

from __future__ import annotations

import json
import subprocess
import sys
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import gevent
import pytest

from tests.support import (REPO_ROOT, Daemon, HttpApp, Queue, RecordedRequest, build_config_file, count_messages,
                           receive_all, status_url, wait_until)
from tests.e2e.test_idempotency import config

from .helpers import http_get, workerless_send


def send_tenants(sqs: Any, queue: Queue, tenants: dict[str, int]) -> None:
    """`tenants[name]` messages of each tenant, in the order given, bodies "<tenant>-<index>"."""
    entries = [{"Id": f"{tenant}-{index}", "MessageBody": f"{tenant}-{index}", "MessageGroupId": tenant}
               for tenant, count in tenants.items() for index in range(count)]
    for start in range(0, len(entries), 10):
        assert not sqs.send_message_batch(QueueUrl=queue.url, Entries=entries[start:start + 10]).get("Failed")


def tenant_of(request: RecordedRequest) -> str:
    return request.body.decode().rsplit("-", 1)[0]


def fair_config(tmp_path: Path, app: HttpApp, queue: Queue, concurrency: int, **queue_keys: Any) -> Path:
    return build_config_file(tmp_path, concurrency=concurrency, polling={"poll_for": 2},
                             queues=[{"name": queue.name, "error_visibility_timeout": 1, **queue_keys}],
                             targets={"default": {"type": "http", "url": f"{app.url}/work"}},
                             tables={"status": {"listen": "127.0.0.1:0"}})


class TenantMeter:
    """The app's answer, which also counts each tenant's requests in the app at once (the cap's measure)."""

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds
        self.now: Counter[str] = Counter()
        self.most: Counter[str] = Counter()

    def __call__(self, request: RecordedRequest) -> tuple[int, dict[str, str], bytes]:
        tenant = tenant_of(request)
        self.now[tenant] += 1
        self.most[tenant] = max(self.most[tenant], self.now[tenant])
        try:
            gevent.sleep(self.seconds)
        finally:
            self.now[tenant] -= 1
        return 200, {}, b""


@pytest.fixture
def meter(http_app: HttpApp) -> TenantMeter:
    """The app answers after 0.5 s, counting each tenant's requests at once."""
    http_app.respond = meter = TenantMeter(0.5)
    return meter


def test_one_tenants_messages_go_in_parallel(
    daemon: Callable[..., Daemon], aws_env: dict[str, str], http_app: HttpApp, meter: TenantMeter,
    sqs: Any, make_queue: Callable[..., Queue], tmp_path: Path,
) -> None:
    queue = make_queue()
    send_tenants(sqs, queue, {"acme": 30})
    proc = daemon(["-c", str(fair_config(tmp_path, http_app, queue, concurrency=10))], env=aws_env)
    wait_until(lambda: count_messages(sqs, queue.url) == 0, 120,
               message=lambda: f"delivered {len(http_app.requests)} of 30")
    assert proc.stop(timeout=30) == 0
    assert sorted(request.body.decode() for request in http_app.requests) == sorted(f"acme-{i}" for i in range(30))
    # A FIFO rule would deliver them one at a time; a tenant on a standard queue takes the free slots.
    assert meter.most["acme"] >= 5, meter.most


def test_a_failure_holds_back_none_of_its_group_mates(
    daemon: Callable[..., Daemon], aws_env: dict[str, str], http_app: HttpApp,
    sqs: Any, make_queue: Callable[..., Queue], tmp_path: Path,
) -> None:
    queue = make_queue()
    failed: list[bytes] = []

    def fail_the_third_once(request: RecordedRequest) -> tuple[int, dict[str, str], bytes]:
        if request.body == b"acme-2" and not failed:
            failed.append(request.body)
            return 500, {}, b""
        return 200, {}, b""

    http_app.respond = fail_the_third_once
    send_tenants(sqs, queue, {"acme": 10})
    proc = daemon(["-c", str(fair_config(tmp_path, http_app, queue, concurrency=4))], env=aws_env)
    wait_until(lambda: count_messages(sqs, queue.url) == 0, 60,
               message=lambda: f"delivered: {[r.body for r in http_app.requests]}")
    assert proc.stop(timeout=30) == 0
    deliveries = Counter(request.body.decode() for request in http_app.requests)
    assert deliveries == Counter({**{f"acme-{i}": 1 for i in range(10)}, "acme-2": 2}), deliveries
    counts = {request.body.decode(): request.headers["x-aws-sqsd-receive-count"] for request in http_app.requests
              if request.body != b"acme-2"}
    assert set(counts.values()) == {"1"}, counts  # no group-mate was released and received again


def test_the_group_cap_keeps_a_backlog_from_holding_every_slot(
    daemon: Callable[..., Daemon], aws_env: dict[str, str], http_app: HttpApp, meter: TenantMeter,
    sqs: Any, make_queue: Callable[..., Queue], tmp_path: Path,
) -> None:
    queue = make_queue()
    send_tenants(sqs, queue, {"big": 30})  # moto hands them out in order: the daemon must look past them itself
    send_tenants(sqs, queue, {"quiet": 3})
    config = fair_config(tmp_path, http_app, queue, concurrency=8, max_concurrency_per_group=2)
    proc = daemon(["-c", str(config)], env=aws_env)
    url = status_url(proc)

    def big_waits() -> bool:
        documents = json.loads(http_get(f"{url}/status")[2])["queues"]
        rows = {group["group"]: group for group in documents[0]["groups"]}
        return rows.get("big", {}).get("waiting", 0) > 0 and rows["big"]["in_flight"] <= 2

    wait_until(big_waits, 60, message=lambda: http_get(f"{url}/status")[2])
    wait_until(lambda: count_messages(sqs, queue.url) == 0, 120,
               message=lambda: f"delivered {len(http_app.requests)} of 33")
    metrics = http_get(f"{url}/metrics")[2]
    assert proc.stop(timeout=30) == 0

    assert meter.most["big"] == 2, meter.most  # the cap, and reached: the backlog still used what it allows
    order = [tenant_of(request) for request in http_app.requests]
    assert Counter(order) == {"big": 30, "quiet": 3}
    # The quiet tenant went as soon as its messages were received, not after the backlog.
    assert max(index for index, tenant in enumerate(order) if tenant == "quiet") < 10, order
    # Nothing waited by being released: every message was received once.
    assert {request.headers["x-aws-sqsd-receive-count"] for request in http_app.requests} == {"1"}
    waits = [line for line in metrics.splitlines() if line.startswith("workerless_group_waits_total{")]
    assert waits and float(waits[0].rsplit(" ", 1)[1]) >= 20, waits


def test_dead_letters_and_redrive_keep_the_tenant(
    daemon: Callable[..., Daemon], aws_env: dict[str, str], http_app: HttpApp,
    sqs: Any, make_queue: Callable[..., Queue], tmp_path: Path,
) -> None:
    queue, dlq = make_queue(), make_queue()
    http_app.set_status(500)
    sent = workerless_send([queue.name, "poison", "--group=tenant-7"], aws_env, tmp_path)
    assert sent.returncode == 0, sent.stderr
    config = build_config_file(tmp_path, concurrency=2, polling={"poll_for": 1},
                               queues=[{"name": queue.name, "error_visibility_timeout": 0, "max_retries": 1,
                                        "dead_letter_queue": dlq.name}],
                               targets={"default": {"type": "http", "url": f"{http_app.url}/work"}})
    proc = daemon(["-c", str(config)], env=aws_env)
    wait_until(lambda: count_messages(sqs, dlq.url) == 1, 60, message=lambda: proc.output())
    assert proc.stop(timeout=30) == 0

    dead = sqs.receive_message(QueueUrl=dlq.url, MessageSystemAttributeNames=["All"], VisibilityTimeout=0)
    assert [message["Attributes"].get("MessageGroupId") for message in dead["Messages"]] == ["tenant-7"]
    redrive = subprocess.run([sys.executable, str(REPO_ROOT / "bin" / "workerless"), "redrive", dlq.name],
                             env=aws_env, cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert redrive.returncode == 0, redrive.stderr
    back = receive_all(sqs, queue.url, MessageSystemAttributeNames=["All"])
    assert [(message["Body"], message["Attributes"].get("MessageGroupId")) for message in back] == \
        [("poison", "tenant-7")]


def test_send_refuses_a_group_sqs_would_refuse(aws_env: dict[str, str], make_queue: Callable[..., Queue],
                                               tmp_path: Path) -> None:
    queue = make_queue()
    sent = workerless_send([queue.name, "hello", "--group=two words"], aws_env, tmp_path)
    assert sent.returncode == 2
    assert sent.stderr.strip() == ('--group: must be 1-128 letters, digits or punctuation (no spaces) '
                                   '(got "two words")')


def test_a_deferred_keyed_message_holds_back_none_of_its_tenant(
    daemon: Callable[..., Daemon], aws_env: dict[str, str], http_app: HttpApp, sqs: Any,
    make_queue: Callable[..., Queue], claims_table: str, tmp_path: Path,
) -> None:
    """Idempotency's FIFO rule (what follows a hidden message in its group goes back) is FIFO's only: on a
    standard queue, messages 6 and 7 of a tenant are delivered at once although 5 waits for the claim of 2."""
    queue = make_queue()
    bodies = [json.dumps({"order": {"id": "twice" if index in (2, 5) else f"F-{index}"}, "note": str(index)})
              for index in range(8)]
    assert not sqs.send_message_batch(QueueUrl=queue.url, Entries=[
        {"Id": str(index), "MessageBody": body, "MessageGroupId": "acme"} for index, body in enumerate(bodies)
    ]).get("Failed")
    path = config(tmp_path, http_app, queue, claims_table, visibility_timeout=30)
    proc = daemon(["-c", str(path)], env=aws_env)
    # 7 posts: the copy of "twice" is hidden until the first one's claim ends, then deleted as a duplicate.
    wait_until(lambda: {json.loads(request.body)["note"] for request in http_app.requests} >= {"6", "7"}, 60,
               message=proc.output)
    counts = {json.loads(request.body)["note"]: request.headers["x-aws-sqsd-receive-count"]
              for request in http_app.requests}
    assert proc.stop(timeout=30) == 0
    assert counts["6"] == counts["7"] == "1", counts  # delivered from their first receive, not released
    assert "5" not in counts, counts
