"""The idempotency table as the keyed queues see it, in process, against moto through a fault proxy: a transaction
cancelled for one item's throttling still claims the others; a failed probe is one store error whatever the
number of keyed queues; a write that gets through while the table fails does not end the hold, but brings the
probe forward and wakes the held queues at once."""

from __future__ import annotations

import json
import random
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import boto3
import gevent.event
import pytest

from tests.support import MotoServer, build_config_file, wait_until
from tests.support.faults import FaultySqs, faulty_sqs_fixture  # noqa: F401 (fixture)
from tests.support.http_app import Reply
from tests.unit.sqs_messages import raw_message
from workerless_gevent.config.loading import load_config
from workerless_gevent.idempotency.guard import Idempotency
from workerless_gevent.idempotency.keys import item_key
from workerless_gevent.idempotency.store import Claim, IdempotencyStore, VerdictKind
from workerless_gevent.message import Message
from workerless_gevent.metrics import Registry
from workerless_gevent.wire.dynamodb import DynamoDbWire

DYNAMODB = "com.amazonaws.dynamodb.v20120810#"


def dynamodb_error(code: str, message: str, **members: Any) -> Reply:
    body = json.dumps({"__type": DYNAMODB + code, "message": message, **members}).encode()
    return 400, {"Content-Type": "application/x-amz-json-1.0"}, body


@pytest.fixture
def wire(faulty_sqs: FaultySqs) -> Iterator[DynamoDbWire]:
    made = DynamoDbWire(faulty_sqs.url, "us-east-1", boto3.session.Session().get_credentials(), concurrency=4,
                        read_timeout=5)
    yield made
    made.close()


def build_guard(tmp_path: Path, wire: DynamoDbWire, table: str, registry: Registry) -> Idempotency:
    """Two queues with a key on one table, the table made (as at start)."""
    path = build_config_file(tmp_path, queues=[{"name": name, "idempotency_key": "body:order.id"}
                                               for name in ("first", "second")],
                             targets={"default": {"type": "http", "url": "http://127.0.0.1:9/"}},
                             tables={"idempotency": {"table": table}})
    guard = Idempotency(load_config(str(path), {}, {}), IdempotencyStore(wire, table), registry.count,
                        random.Random(48))
    guard.make_table(gevent.event.Event())
    assert guard.health.is_table_ready
    return guard


def states(moto_server: MotoServer, table: str) -> dict[str, str]:
    items = moto_server.client("dynamodb").scan(TableName=table)["Items"]
    return {item["slot"]["S"]: item["state"]["S"] for item in items if "state" in item}


def test_a_transaction_cancelled_for_one_throttled_item_claims_the_others(
    tmp_path: Path, wire: DynamoDbWire, faulty_sqs: FaultySqs, moto_server: MotoServer, claims_table: str,
) -> None:
    guard = build_guard(tmp_path, wire, claims_table, Registry())
    cancelled: list[int] = []

    def first_cancelled(action: str, params: dict[str, Any]) -> Reply | None:
        if action != "TransactWriteItems" or cancelled:
            return None
        cancelled.append(len(params["TransactItems"]))
        reasons = [{"Code": "ThrottlingError", "Message": "Throughput exceeds the current capacity"},
                   {"Code": "None"}, {"Code": "None"}]
        return dynamodb_error("TransactionCanceledException", "Transaction cancelled [ThrottlingError, None, None]",
                              CancellationReasons=reasons)

    faulty_sqs.fault = first_cancelled
    slots = [item_key("first", f"K-{index}") for index in range(3)]
    deadline = int(time.time()) + 60
    verdicts = guard.store.claim_all([Claim(slot, f"token-{index}", deadline) for index, slot in enumerate(slots)])
    assert cancelled == [3]
    assert [verdict.kind for verdict in verdicts] == [VerdictKind.THROTTLED, VerdictKind.CLAIMED,
                                                      VerdictKind.CLAIMED]
    assert states(moto_server, claims_table) == {slots[1]: "in_progress", slots[2]: "in_progress"}


def test_a_failed_probe_is_one_store_error_whatever_the_queues_it_holds(
    tmp_path: Path, wire: DynamoDbWire, faulty_sqs: FaultySqs, claims_table: str,
) -> None:
    registry = Registry()
    guard = build_guard(tmp_path, wire, claims_table, registry)
    faulty_sqs.fail(dynamodb_error("InternalServerError", "Internal server error"), actions=("UpdateItem",))
    guard.health.failed("InternalServerError: a claim failed")  # the hold starts
    guard.health.retry_at = 0.0  # its back-off is over: the next look probes
    assert guard.hold.hold_seconds() > 0
    prober = guard.hold.prober
    assert prober is not None
    prober.join(timeout=30)
    assert faulty_sqs.faulted_count("UpdateItem") >= 1
    assert registry.total("IdempotencyStoreErrors") == 1
    assert guard.health.is_holding


def test_a_write_that_gets_through_wakes_the_held_queues_and_only_a_probe_ends_the_hold(
    tmp_path: Path, wire: DynamoDbWire, faulty_sqs: FaultySqs, moto_server: MotoServer, claims_table: str,
) -> None:
    guard = build_guard(tmp_path, wire, claims_table, Registry())
    woken = gevent.event.Event()
    guard.wake = woken.set
    for _ in range(6):  # a long outage: the next probe is up to 30 s away
        guard.health.failed("ThrottlingException: rate exceeded")
    assert guard.hold.hold_seconds() > 1.0
    message = Message.from_sqs("first", raw_message(body=json.dumps({"order": {"id": "W-1"}})),
                               received_at=time.time(), visible_until=time.monotonic() + 60)
    message.idempotency_key, message.claim = "W-1", "token-w"
    deleted = gevent.event.Event()
    guard.complete(message, deleted.set)  # a `completed` write the table takes
    assert deleted.wait(30)
    assert woken.wait(5), "the held queues were not woken by a write that got through"
    assert guard.health.is_holding  # not ended by that write: by a probe

    def probed() -> bool:
        guard.hold.hold_seconds()  # as the poller looks: a probe once it is due
        return not guard.health.is_holding
    wait_until(probed, 30, message="the probe brought forward did not end the hold")
    assert states(moto_server, claims_table)[item_key("first", "W-1")] == "completed"
