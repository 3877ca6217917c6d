"""Idempotent delivery's keys outside the table and payload validation, through the real daemon on moto's SQS
and DynamoDB: a key too long for a header line reaches the app in its short form, and with `validate_payload`
a copy of a completed key with another payload fails as IdempotencyKeyReused instead of being deleted."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from tests.e2e.helpers import send_batch
from tests.e2e.test_idempotency import KEY_HEADER, config, items, order, states
from tests.support import (Daemon, HttpApp, MotoServer, Queue, build_config_file, count_messages, status_url,
                           wait_until)
from tests.support.faults import metric_total
from tests.support.sqs import receive_all


def test_a_key_too_long_for_a_header_reaches_the_app_as_its_digest_and_the_logs_show_the_same(
    daemon: Callable[..., Daemon], aws_env: dict[str, str], http_app: HttpApp, sqs: Any,
    make_queue: Callable[..., Queue], moto_server: MotoServer, claims_table: str, tmp_path: Path,
) -> None:
    """A `body:` path naming a 20,000-character value: the header carries `sha256:<hex>` (71 characters),
    the delivery succeeds, and the duplicate's log line names the key as the header did."""
    queue = make_queue()
    long_id = "L" * 20_000
    shown = "sha256:" + hashlib.sha256(long_id.encode()).hexdigest()
    proc = daemon(["-c", str(config(tmp_path, http_app, queue, claims_table))], env=aws_env)
    send_batch(sqs, queue.url, [order(long_id, "first")])
    http_app.wait_for_requests(1, timeout=60)
    wait_until(lambda: count_messages(sqs, queue.url) == 0 and states(moto_server, claims_table) == ["completed"],
               30, message=lambda: f"{count_messages(sqs, queue.url)} left: {proc.output()[-2000:]}")
    assert [request.headers.get(KEY_HEADER) for request in http_app.requests] == [shown]
    assert list(items(moto_server, claims_table)) == [f"idempotency/{queue.name}/{shown}"]  # the table's own form
    send_batch(sqs, queue.url, [order(long_id, "a copy")])
    wait_until(lambda: "deleted as a duplicate" in proc.output(), 60, message=proc.output)
    assert proc.stop(timeout=30) == 0
    assert len(http_app.requests) == 1
    assert f"key={shown} already delivered: deleted as a duplicate" in proc.output()
    assert long_id not in proc.output()


def test_validate_payload_deletes_a_copy_of_the_same_payload_and_fails_another_one_to_the_dead_letter_queue(
    daemon: Callable[..., Daemon], aws_env: dict[str, str], http_app: HttpApp, sqs: Any,
    make_queue: Callable[..., Queue], moto_server: MotoServer, claims_table: str, tmp_path: Path,
) -> None:
    queue, dead_letters = make_queue(), make_queue()
    path = build_config_file(tmp_path, concurrency=4, shutdown_timeout=10,
                             queues=[{"name": queue.name, "idempotency_key": "body:order.id", "max_retries": 2,
                                      "error_visibility_timeout": 1, "dead_letter_queue": dead_letters.name}],
                             targets={"default": {"type": "http", "url": f"{http_app.url}/work"}},
                             tables={"idempotency": {"table": claims_table, "validate_payload": True}})
    proc = daemon(["-c", str(path), "--status=127.0.0.1:0"], env=aws_env)
    url = status_url(proc)
    first = order("V-1", "first")
    send_batch(sqs, queue.url, [first])
    http_app.wait_for_requests(1, timeout=60)
    wait_until(lambda: states(moto_server, claims_table) == ["completed"], 30,
               message=lambda: f"items: {items(moto_server, claims_table)}")
    (item,) = items(moto_server, claims_table).values()
    assert item["payload_sha256"]["S"] == hashlib.sha256(first.encode()).hexdigest()

    send_batch(sqs, queue.url, [first])  # the same payload again: a duplicate
    wait_until(lambda: "key=V-1 already delivered: deleted as a duplicate" in proc.output(), 60, message=proc.output)
    wait_until(lambda: count_messages(sqs, queue.url) == 0, 30)

    send_batch(sqs, queue.url, [order("V-1", "another payload")])
    wait_until(lambda: count_messages(sqs, dead_letters.url) == 1 and count_messages(sqs, queue.url) == 0, 60,
               message=lambda: proc.output()[-3000:])
    conflicts = lambda: metric_total(url, "workerless_idempotency_key_conflicts_total")  # noqa: E731
    wait_until(lambda: conflicts() == 2, 10, message=lambda: f"IdempotencyKeyConflicts: {conflicts()}")
    assert proc.stop(timeout=30) == 0

    assert [json.loads(request.body)["note"] for request in http_app.requests] == ["first"]  # never delivered
    (dead,) = receive_all(sqs, dead_letters.url)
    assert json.loads(dead["Body"])["note"] == "another payload"
    attributes = dead["MessageAttributes"]
    assert attributes["workerless.error"]["StringValue"].startswith("IdempotencyKeyReused: key V-1 ")
    assert attributes["workerless.receive_count"]["StringValue"] == "2"
    assert (items(moto_server, claims_table)[f"idempotency/{queue.name}/V-1"]["owner"], states(
        moto_server, claims_table)) == (item["owner"], ["completed"])  # its claim was never taken
    warnings = [line for line in proc.output().splitlines() if "type=IdempotencyKeyReused" in line]
    assert len(warnings) == 2 and all("key V-1 already succeeded with another payload" in line for line in warnings)
    assert "dead-lettered to" in proc.output()
