"""Receives made at once share their claims' transactions, in process, against moto through a fault proxy that
holds the first transaction on its way: the receives made meanwhile go together in the next; a key two of them
carry is claimed once (a transaction may not write an item twice) and the later copy waits for that claim; a
shared transaction that fails is one failed call, and each receive's claims are kept to be claimed again; a claim an
earlier try wrote is found ours and moved to this try's deadline."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import gevent
import pytest

from tests.integration.test_idempotency_health import build_guard, dynamodb_error, wire  # noqa: F401 (fixture)
from tests.support import MotoServer, wait_until
from tests.support.faults import FaultySqs, faulty_sqs_fixture  # noqa: F401 (fixture)
from tests.unit.sqs_messages import raw_message
from workerless_gevent.idempotency.admission import Admission
from workerless_gevent.idempotency.guard import Idempotency
from workerless_gevent.idempotency.keys import item_key
from workerless_gevent.idempotency.store import Claim
from workerless_gevent.message import Message
from workerless_gevent.metrics import Registry
from workerless_gevent.wire.dynamodb import DynamoDbWire


def received(*keys: str) -> list[Message]:
    return [Message.from_sqs("first", raw_message(message_id=f"id-{key}-{index}",
                                                  body=json.dumps({"order": {"id": key}})),
                             received_at=time.time(), visible_until=time.monotonic() + 60)
            for index, key in enumerate(keys)]


@pytest.fixture
def held_first(faulty_sqs: FaultySqs) -> Iterator[gevent.event.Event]:
    """The first TransactWriteItems is held at the proxy until the event is set; the others pass."""
    seen: list[int] = []

    def first(action: str, params: dict[str, Any]) -> bool:
        if action != "TransactWriteItems" or seen:
            return False
        seen.append(len(params["TransactItems"]))
        return True

    released = faulty_sqs.hold(first)
    yield released
    released.set()


def claim_at_once(guard: Idempotency, receives: list[list[Message]], held: gevent.event.Event,
                  faulty_sqs: FaultySqs, fault: Any = None) -> list[Admission]:
    """The first receive's claims on their way (held), then the others (and `fault` from then on); all answered
    once the first is let go. (The others would go out beside a transaction held this long: not in this test.)"""
    guard.transactions.behind_seconds = 60.0
    claims = [gevent.spawn(guard.claim, "first", receives[0])]
    wait_until(lambda: len(faulty_sqs.pending("TransactWriteItems")) == 1, 10)
    claims += [gevent.spawn(guard.claim, "first", messages) for messages in receives[1:]]
    wait_until(lambda: len(guard.transactions.gathered) == len(receives) - 1, 10)
    faulty_sqs.fault = fault
    held.set()
    gevent.joinall(claims, timeout=30, raise_error=True)
    return [claim.value for claim in claims]


def transactions(faulty_sqs: FaultySqs) -> list[list[str]]:
    return [[item["Put"]["Item"]["slot"]["S"].rpartition("/")[2] for item in request.params["TransactItems"]]
            for request in faulty_sqs.requests if request.action == "TransactWriteItems"]


def test_receives_made_while_a_transaction_is_on_its_way_share_the_next(
    tmp_path: Path, wire: DynamoDbWire, faulty_sqs: FaultySqs, claims_table: str, held_first: gevent.event.Event,
) -> None:
    guard = build_guard(tmp_path, wire, claims_table, Registry())
    receives = [received(*(f"K-{index}-{n}" for n in range(10))) for index in range(4)]
    admissions = claim_at_once(guard, receives, held_first, faulty_sqs)
    assert [len(keys) for keys in transactions(faulty_sqs)] == [10, 30]
    assert [admission.deliver for admission in admissions] == receives
    assert all(message.claim for messages in receives for message in messages)


def test_a_key_two_receives_made_at_once_carry_is_claimed_once_and_the_later_copy_waits(
    tmp_path: Path, wire: DynamoDbWire, faulty_sqs: FaultySqs, claims_table: str, held_first: gevent.event.Event,
) -> None:
    guard = build_guard(tmp_path, wire, claims_table, Registry())
    receives = [received("A-1", "A-2"), received("B-1", "SAME"), received("SAME", "C-1"), received("D-1")]
    admissions = claim_at_once(guard, receives, held_first, faulty_sqs)
    # the third receive waits for the next transaction, the fourth goes with the second's; the key held by then,
    # the third's transaction is cancelled for it and sent again without it
    assert transactions(faulty_sqs) == [["A-1", "A-2"], ["B-1", "SAME", "D-1"], ["SAME", "C-1"], ["C-1"]]
    assert admissions[1].deliver == receives[1] and admissions[3].deliver == receives[3]
    assert admissions[2].deliver == [receives[2][1]]
    assert [message for message, _ in admissions[2].later] == [receives[2][0]]  # held by the second's claim


def test_a_shared_transaction_that_fails_is_one_failed_call_and_keeps_every_receives_claims(
    tmp_path: Path, wire: DynamoDbWire, faulty_sqs: FaultySqs, claims_table: str, held_first: gevent.event.Event,
) -> None:
    registry = Registry()
    guard = build_guard(tmp_path, wire, claims_table, registry)
    receives = [received(f"F-{index}") for index in range(4)]

    def failing(action: str, params: dict[str, Any]) -> Any:
        return dynamodb_error("InternalServerError", "Internal server error") \
            if action == "TransactWriteItems" else None
    admissions = claim_at_once(guard, receives, held_first, faulty_sqs, failing)
    assert admissions[0].deliver == receives[0]  # the first transaction got through
    assert faulty_sqs.faulted_count("TransactWriteItems") == 1  # the one the other three shared
    assert registry.total("IdempotencyStoreErrors") == 1
    assert [[message for message, _ in admission.pending] for admission in admissions[1:]] == receives[1:]
    assert not any(admission.deliver for admission in admissions[1:])
    assert guard.health.is_holding


def test_a_slow_transaction_holds_back_the_receives_behind_it_only_half_a_second(
    tmp_path: Path, wire: DynamoDbWire, faulty_sqs: FaultySqs, claims_table: str, held_first: gevent.event.Event,
) -> None:
    guard = build_guard(tmp_path, wire, claims_table, Registry())
    first = gevent.spawn(guard.claim, "first", received("S-1"))
    wait_until(lambda: len(faulty_sqs.pending("TransactWriteItems")) == 1, 10)
    behind = gevent.spawn(guard.claim, "first", received("S-2"))
    assert behind.get(timeout=30).deliver  # claimed while the first is still held
    assert not first.ready() and len(faulty_sqs.pending("TransactWriteItems")) == 1
    sent = [request.started for request in faulty_sqs.requests if request.action == "TransactWriteItems"]
    assert len(sent) == 2 and sent[1] - sent[0] >= 0.45  # it waited for the first, until that one was slow
    held_first.set()
    assert first.get(timeout=30).deliver


def test_a_claim_an_earlier_try_wrote_is_found_ours_and_moved_to_this_tries_deadline(
    tmp_path: Path, wire: DynamoDbWire, faulty_sqs: FaultySqs, moto_server: MotoServer, claims_table: str,
) -> None:
    """A try whose answer was lost (a timeout, a reset) wrote the claim: the next finds it ours, with the first try's
    deadline, which the heartbeat does not move while a claim is retried in place. It is moved at once."""
    guard = build_guard(tmp_path, wire, claims_table, Registry())
    [message] = received("LOST-1")
    slot = item_key("first", "LOST-1")
    early = int(time.time()) + 3
    moto_server.client("dynamodb").put_item(TableName=claims_table, Item={
        "slot": {"S": slot}, "state": {"S": "in_progress"}, "owner": {"S": "token-lost"}, "expires_at": {"N": str(early)}})
    admission = Admission()
    message.idempotency_key = "LOST-1"
    guard.claim_keys("first", [(message, Claim(slot, "token-lost", 0))], admission, {})
    assert admission.deliver == [] and message.claim == "token-lost"  # claimed: `sort` makes it a delivery

    def deadline() -> int:
        item = moto_server.client("dynamodb").get_item(TableName=claims_table, Key={"slot": {"S": slot}})["Item"]
        return int(item["expires_at"]["N"])
    wait_until(lambda: deadline() >= int(time.time()) + 50, 10, message=lambda: f"still {deadline()}")
