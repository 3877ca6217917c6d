"""Idempotent delivery through real processes on moto's SQS and DynamoDB: a key remembered in DynamoDB turns
every later copy of a delivered message into a delete without a POST."""

from __future__ import annotations

import json
import signal
import urllib.request
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import botocore.exceptions
import pytest

from tests.e2e.helpers import send_batch
from tests.support import (CountingProxy, Daemon, HttpApp, MotoServer, Queue, build_config_file, count_messages,
                           status_url, wait_until)
from tests.support.faults import FaultySqs, aws_error, faulty_sqs_fixture, metric_total, sqs_env_fixture  # noqa: F401

KEY_HEADER = "x-workerless-idempotency-key"
STORE_DOWN = aws_error(500, "InternalServerError", "DynamoDB is having a bad day")
DYNAMODB_WRITES = ("TransactWriteItems", "BatchWriteItem", "DeleteItem", "UpdateItem")


def config(tmp_path: Path, app: HttpApp, queue: Queue, table: str, key: str = "body:order.id",
           name: str = "workerless.toml", **queue_keys: Any) -> Path:
    return build_config_file(tmp_path, name=name, concurrency=4, shutdown_timeout=10,
                             queues=[{"name": queue.name, "idempotency_key": key, **queue_keys}],
                             targets={"default": {"type": "http", "url": f"{app.url}/work"}},
                             tables={"idempotency": {"table": table, "expires_after": 600}})


def items(moto_server: MotoServer, table: str) -> dict[str, dict[str, Any]]:
    try:
        found = moto_server.client("dynamodb").scan(TableName=table, ConsistentRead=True)["Items"]
    except botocore.exceptions.ClientError:
        return {}
    return {item["slot"]["S"]: item for item in found}


def states(moto_server: MotoServer, table: str) -> list[str]:
    return sorted(item["state"]["S"] for item in items(moto_server, table).values())


def order(order_id: str, note: str = "") -> str:
    return json.dumps({"order": {"id": order_id}, "note": note})


def readyz(port: int) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/readyz", timeout=5) as response:
            return response.status, response.read().decode()
    except urllib.error.HTTPError as error:
        return error.code, error.read().decode()
    except OSError as error:
        return 0, str(error)


def test_the_same_key_sent_twice_reaches_the_app_once(
    daemon: Callable[..., Daemon], aws_env: dict[str, str], http_app: HttpApp, sqs: Any,
    make_queue: Callable[..., Queue], moto_server: MotoServer, claims_table: str, tmp_path: Path,
) -> None:
    queue = make_queue()
    proc = daemon(["-c", str(config(tmp_path, http_app, queue, claims_table)), "--status=127.0.0.1:0"],
                  env=aws_env)
    send_batch(sqs, queue.url, [order("A-1", "first"), order("B-2")])
    http_app.wait_for_requests(2, timeout=60)
    wait_until(lambda: states(moto_server, claims_table) == ["completed", "completed"], 30,
               message=lambda: f"items: {items(moto_server, claims_table)}")
    send_batch(sqs, queue.url, [order("A-1", "a copy"), order("C-3")])
    wait_until(lambda: count_messages(sqs, queue.url) == 0 and len(http_app.requests) >= 3, 60,
               message=lambda: f"{count_messages(sqs, queue.url)} left, {len(http_app.requests)} POSTs")
    wait_until(lambda: "deleted as a duplicate" in proc.output(), 10, message=proc.output)
    assert proc.stop(timeout=30) == 0
    keys = Counter(request.headers.get(KEY_HEADER) for request in http_app.requests)
    assert keys == Counter({"A-1": 1, "B-2": 1, "C-3": 1}), keys
    assert [json.loads(r.body)["note"] for r in http_app.requests if r.headers.get(KEY_HEADER) == "A-1"] == ["first"]
    assert "key=A-1 already delivered: deleted as a duplicate" in proc.output()


def test_a_body_without_the_path_is_delivered_and_counted(
    daemon: Callable[..., Daemon], aws_env: dict[str, str], http_app: HttpApp, sqs: Any,
    make_queue: Callable[..., Queue], claims_table: str, tmp_path: Path,
) -> None:
    queue = make_queue()
    proc = daemon(["-c", str(config(tmp_path, http_app, queue, claims_table)), "--status=127.0.0.1:0"],
                  env=aws_env)
    port = int(status_url(proc).rsplit(":", 1)[1])  # port 0: the daemon binds it, no race
    send_batch(sqs, queue.url, ["not json at all", json.dumps({"order": {}}), "not json at all"])
    http_app.wait_for_requests(3, timeout=60)
    wait_until(lambda: count_messages(sqs, queue.url) == 0, 30)
    assert all(KEY_HEADER not in request.headers for request in http_app.requests)
    missing = lambda: metric_total(f"http://127.0.0.1:{port}", "workerless_idempotency_key_missing_total")  # noqa: E731
    wait_until(lambda: missing() == 3, 10, message=lambda: f"IdempotencyKeyMissing: {missing()}")
    assert proc.stop(timeout=30) == 0


def test_a_failed_delivery_gives_its_claim_up_and_is_delivered_on_its_retry(
    daemon: Callable[..., Daemon], aws_env: dict[str, str], http_app: HttpApp, sqs: Any,
    make_queue: Callable[..., Queue], moto_server: MotoServer, claims_table: str, tmp_path: Path,
) -> None:
    """With a visibility timeout of 5 minutes, only a claim given up at the failure lets the retry (1 s later)
    be delivered at once."""
    queue = make_queue()
    answers = iter([500])
    http_app.respond = lambda request: (next(answers, 200), {}, b"")
    proc = daemon(["-c", str(config(tmp_path, http_app, queue, claims_table, visibility_timeout=300,
                                    error_visibility_timeout=1))], env=aws_env)
    send_batch(sqs, queue.url, [order("R-1")])
    http_app.wait_for_requests(2, timeout=60)
    wait_until(lambda: count_messages(sqs, queue.url) == 0, 30)
    assert [request.headers.get(KEY_HEADER) for request in http_app.requests] == ["R-1", "R-1"]
    assert states(moto_server, claims_table) == ["completed"]
    assert proc.stop(timeout=30) == 0


def test_a_copy_left_by_a_daemon_killed_before_its_delete_is_deleted_without_a_post(
    daemon: Callable[..., Daemon], aws_env: dict[str, str], proxied_env: dict[str, str],
    counting_proxy: CountingProxy, http_app: HttpApp, sqs: Any, make_queue: Callable[..., Queue],
    moto_server: MotoServer, claims_table: str, tmp_path: Path,
) -> None:
    queue = make_queue()
    counting_proxy.delays["DeleteMessageBatch"] = 60.0  # the delete never lands before the kill
    first = daemon(["-c", str(config(tmp_path, http_app, queue, claims_table, visibility_timeout=3))], env=proxied_env)
    send_batch(sqs, queue.url, [order("K-1")])
    http_app.wait_for_requests(1, timeout=60)
    wait_until(lambda: states(moto_server, claims_table) == ["completed"], 30,
               message=lambda: f"items: {items(moto_server, claims_table)}")
    wait_until(lambda: counting_proxy.pending("DeleteMessageBatch"), 10, message="no delete on its way")
    first.send_signal(signal.SIGKILL)
    first.wait_exit(timeout=10)
    assert count_messages(sqs, queue.url) == 1  # the app has it, SQS still has it: a copy will come back

    second = daemon(["-c", str(config(tmp_path, http_app, queue, claims_table, name="second.toml"))], env=aws_env)
    wait_until(lambda: count_messages(sqs, queue.url) == 0, 60,
               message=lambda: f"{count_messages(sqs, queue.url)} left: {second.output()[-2000:]}")
    assert second.stop(timeout=30) == 0
    assert len(http_app.requests) == 1
    assert "key=K-1 already delivered: deleted as a duplicate" in second.output()


def test_two_daemons_handed_the_same_message_post_it_once(
    daemon: Callable[..., Daemon], aws_env: dict[str, str], proxied_env: dict[str, str],
    counting_proxy: CountingProxy, http_app: HttpApp, sqs: Any, make_queue: Callable[..., Queue],
    moto_server: MotoServer, claims_table: str, tmp_path: Path,
) -> None:
    """The first daemon's heartbeat cannot keep the message hidden (its visibility changes are held by the
    proxy), so SQS hands the message to the second daemon while the app still works on it."""
    queue = make_queue()
    counting_proxy.delays["ChangeMessageVisibilityBatch"] = 30.0
    http_app.delay = 8.0
    first = daemon(["-c", str(config(tmp_path, http_app, queue, claims_table, visibility_timeout=2))], env=proxied_env)
    send_batch(sqs, queue.url, [order("T-1")])
    http_app.wait_for_requests(1, timeout=60)
    second = daemon(["-c", str(config(tmp_path, http_app, queue, claims_table, name="second.toml",
                                      visibility_timeout=2))], env=aws_env)
    # SQS hands the copy to whichever daemon asks first (the first one's own slots too): it finds the key held
    wait_until(lambda: "key=T-1 is claimed elsewhere" in first.output() + second.output(), 60,
               message=lambda: first.output() + second.output())
    wait_until(lambda: count_messages(sqs, queue.url) == 0, 90,
               message=lambda: f"{count_messages(sqs, queue.url)} left: {second.output()[-2000:]}")
    counting_proxy.delays.clear()
    assert len(http_app.requests) == 1, [request.headers.get(KEY_HEADER) for request in http_app.requests]
    assert first.stop(timeout=60) == 0
    assert second.stop(timeout=30) == 0


@pytest.mark.parametrize("key", ["body:order.id", "message_id"])
def test_dynamodb_refusing_holds_the_messages_and_deliveries_resume_when_it_answers(
    key: str, daemon: Callable[..., Daemon], sqs_env: dict[str, str], faulty_sqs: FaultySqs, http_app: HttpApp,
    sqs: Any, make_queue: Callable[..., Queue], moto_server: MotoServer, claims_table: str, tmp_path: Path,
) -> None:
    queue = make_queue()
    faulty_sqs.fail(STORE_DOWN, DYNAMODB_WRITES)
    proc = daemon(["-c", str(config(tmp_path, http_app, queue, claims_table, key=key)), "--status=127.0.0.1:0"],
                  env=sqs_env)
    port = int(status_url(proc).rsplit(":", 1)[1])  # port 0: the daemon binds it, no race
    bodies = [order(f"H-{index}") for index in range(5)]
    send_batch(sqs, queue.url, bodies)
    wait_until(lambda: faulted(faulty_sqs) >= 3, 60, message=lambda: f"{faulty_sqs.actions()}")
    code, text = readyz(port)
    assert code == 503 and f"idempotency table {claims_table} failing" in text, (code, text)
    assert http_app.requests == []
    assert count_messages(sqs, queue.url) == 5  # held, not lost
    faulty_sqs.heal()
    http_app.wait_for_requests(5, timeout=90)
    wait_until(lambda: count_messages(sqs, queue.url) == 0, 60)
    wait_until(lambda: readyz(port)[0] == 200, 30, message=lambda: f"{readyz(port)}")
    assert proc.stop(timeout=30) == 0
    assert sorted(request.body.decode() for request in http_app.requests) == sorted(bodies)
    assert "answers again" in proc.output()


def faulted(proxy: FaultySqs) -> int:
    return sum(proxy.faulted_count(action) for action in DYNAMODB_WRITES)


def test_deliver_mode_falls_back_to_at_least_once_with_a_warning(
    daemon: Callable[..., Daemon], sqs_env: dict[str, str], faulty_sqs: FaultySqs, http_app: HttpApp,
    sqs: Any, make_queue: Callable[..., Queue], claims_table: str, tmp_path: Path,
) -> None:
    queue = make_queue()
    faulty_sqs.fail(STORE_DOWN, DYNAMODB_WRITES)
    path = build_config_file(tmp_path, concurrency=4, queues=[{"name": queue.name, "idempotency_key": "message_id"}],
                             targets={"default": {"type": "http", "url": f"{http_app.url}/work"}},
                             tables={"idempotency": {"table": claims_table, "on_store_failure": "deliver"}})
    proc = daemon(["-c", str(path)], env=sqs_env)
    send_batch(sqs, queue.url, [order("D-1"), order("D-2")])
    http_app.wait_for_requests(2, timeout=60)
    wait_until(lambda: count_messages(sqs, queue.url) == 0, 30)
    assert proc.stop(timeout=30) == 0
    assert "delivering without claims, at least once" in proc.output()


def test_idle_time_makes_no_dynamodb_request_per_message_on_queues_without_a_key(
    daemon: Callable[..., Daemon], proxied_env: dict[str, str], counting_proxy: CountingProxy, http_app: HttpApp,
    sqs: Any, make_queue: Callable[..., Queue], claims_table: str, tmp_path: Path,
) -> None:
    """Two queues, one with a key: DynamoDB is asked for the keyed queue's messages only, and at most two
    requests per delivered message (a claim per receive, a completion write per batch of successes)."""
    keyed, plain = make_queue(), make_queue()
    path = build_config_file(tmp_path, concurrency=4,
                             queues=[{"name": keyed.name, "idempotency_key": "message_id"}, {"name": plain.name}],
                             targets={"default": {"type": "http", "url": f"{http_app.url}/work"}},
                             tables={"idempotency": {"table": claims_table}})
    proc = daemon(["-c", str(path)], env=proxied_env)
    send_batch(sqs, plain.url, [f"plain {index}" for index in range(30)])
    http_app.wait_for_requests(30, timeout=60)
    wait_until(lambda: count_messages(sqs, plain.url) == 0, 30)
    writes = sum(counting_proxy.count(action) for action in DYNAMODB_WRITES)
    assert writes == 0, counting_proxy.actions()
    send_batch(sqs, keyed.url, [f"keyed {index}" for index in range(30)])
    http_app.wait_for_requests(60, timeout=60)
    wait_until(lambda: count_messages(sqs, keyed.url) == 0, 30)
    assert proc.stop(timeout=30) == 0
    writes = sum(counting_proxy.count(action) for action in DYNAMODB_WRITES)
    assert 0 < writes <= 2 * 30, counting_proxy.actions()
    print(f"DynamoDB writes for 30 keyed messages: {writes} ({counting_proxy.actions()})")


def test_a_lambda_batch_leaves_out_the_copies_of_completed_keys(
    daemon: Callable[..., Daemon], aws_env: dict[str, str], moto_server: MotoServer, moto_lambda_function: str,
    sqs: Any, make_queue: Callable[..., Queue], claims_table: str, tmp_path: Path,
) -> None:
    queue = make_queue()
    path = build_config_file(tmp_path, concurrency=2, queues=[{"name": queue.name, "idempotency_key": "body:order.id"}],
                             targets={"default": {"type": "lambda", "function": moto_lambda_function}},
                             tables={"idempotency": {"table": claims_table}})
    proc = daemon(["-c", str(path)], env=aws_env)
    send_batch(sqs, queue.url, [order("L-1"), order("L-2"), order("L-3")])
    wait_until(lambda: count_messages(sqs, queue.url) == 0, 60)
    wait_until(lambda: states(moto_server, claims_table) == ["completed"] * 3, 30,
               message=lambda: f"items: {items(moto_server, claims_table)}")
    first = len(moto_server.lambda_invocations(moto_lambda_function))
    send_batch(sqs, queue.url, [order("L-1", "copy"), order("L-2", "copy"), order("L-4")])
    wait_until(lambda: count_messages(sqs, queue.url) == 0, 60)
    assert proc.stop(timeout=30) == 0
    later = moto_server.lambda_invocations(moto_lambda_function)[first:]
    bodies = [json.loads(record["body"]) for invocation in later for record in json.loads(invocation.raw)["Records"]]
    assert [body["order"]["id"] for body in bodies] == ["L-4"]
    assert proc.output().count("already delivered: deleted as a duplicate") == 2
