"""targets/event_parts.py and FIFO's one rule (targets.release_behind_failures): a batch's event in parts under
6 MB, each record measured as it is sent, the lease counting exactly the requests made, and what follows a failure
in its FIFO group released behind it."""

from __future__ import annotations

import json
import random
from typing import Any

import pytest

from tests.unit.sqs_messages import binary_attribute, make_message, string_attribute
from workerless_gevent.message import Message
from workerless_gevent.targets import RELEASED, SUCCESS, Outcome, QueueInfo, Result, release_behind_failures
from workerless_gevent.targets.event_parts import (MAX_PAYLOAD_BYTES, deliver_in_parts, encoded_parts, held_back,
                                                   json_string_bytes, record_bytes_at_most, requests_needed)
from workerless_gevent.targets.sqs_event import build_record

QUEUE = QueueInfo(name="orders", arn="arn:aws:sqs:eu-west-1:123456789012:orders", region="eu-west-1", is_fifo=False)
FIFO = QueueInfo(name="orders.fifo", arn=QUEUE.arn + ".fifo", region="eu-west-1", is_fifo=True)
FAILED = Outcome.failure("BatchItemFailure", "the app reported this record as failed")
MIB = 1024 * 1024


def messages(bodies: list[str], queue: QueueInfo = QUEUE, groups: list[str] | None = None) -> list[Message]:
    return [make_message(queue.name, message_id=f"m{i}", body=body,
                         attributes={"MessageGroupId": groups[i]} if groups else None,
                         message_attributes={"note": string_attribute("ü" * (i % 3))})
            for i, body in enumerate(bodies)]


def parts_of(queue: QueueInfo, batch: list[Message]) -> list[tuple[list[dict[str, Any]], bytes]]:
    return list(encoded_parts([build_record(queue, message) for message in batch]))


def random_text(rng: random.Random, length: int) -> str:
    """Every kind of character SQS accepts: ASCII with its escapes, two- and three-byte UTF-8, emoji."""
    ranges = [(0x20, 0x7F), (0x09, 0x0E), (0x80, 0x800), (0x800, 0xD800), (0xE000, 0xFFFE), (0x10000, 0x110000)]
    return "".join(chr(rng.randrange(*rng.choice(ranges))) for _ in range(length))


@pytest.mark.parametrize("seed", range(20))
def test_a_strings_length_in_json_is_counted_as_json_writes_it(seed: int) -> None:
    rng = random.Random(seed)
    for _ in range(50):
        text = random_text(rng, rng.randrange(0, 200))
        assert json_string_bytes(text) == len(json.dumps(text)), repr(text)
    for text in ("", "plain", '"\\\b\f\n\r\t\x00\x1f\x7f', "漢字" * 1000, "😀" * 1000, "é👩‍👩‍👧" * 99):
        assert json_string_bytes(text) == len(json.dumps(text)), repr(text)


@pytest.mark.parametrize(("bodies", "expected_parts"), [
    (["{}"] * 10, 1),
    (["x" * MIB] * 10, 2),  # five 1 MiB records fill a part
    (["漢" * (MIB // 3)] * 10, 5),  # 1 MiB of UTF-8, 2 MiB as sent (\u6f22): three are just over the limit
    (["漢" * (MIB // 4)] * 10, 4),  # 1.5 MiB as sent: three a part
    (["😀" * (MIB // 8)] * 10, 4),  # half a MiB of UTF-8, 1.5 MiB as sent (\ud83d\ude00): three a part
    (["é" * (MIB // 2)] * 4, 4),  # 3 MiB as sent and its attribute: one a part
    (["x" * 10, "x" * (7 * MIB), "x", "x"], 3),  # a record over the limit goes alone
])
def test_parts_are_filled_in_order_under_the_limit_and_the_lease_counts_them_exactly(
    bodies: list[str], expected_parts: int,
) -> None:
    batch = messages(bodies)
    parts = parts_of(QUEUE, batch)
    assert len(parts) == expected_parts == requests_needed(QUEUE, batch)
    assert [record["messageId"] for part, _ in parts for record in part] == [m.message_id for m in batch]
    for part, body in parts:
        assert body == json.dumps({"Records": part}).encode("ascii")  # byte for byte what json.dumps wrote
        assert len(body) <= MAX_PAYLOAD_BYTES or len(part) == 1


@pytest.mark.parametrize("seed", range(5))
def test_random_batches_count_exactly_the_parts_they_are_sent_in(seed: int) -> None:
    rng = random.Random(seed)
    batch = messages([random_text(rng, rng.randrange(1, 400)) * rng.randrange(1, 2000)
                      for _ in range(rng.randrange(1, 30))])
    parts = parts_of(QUEUE, batch)
    assert requests_needed(QUEUE, batch) == len(parts)
    assert all(len(body) <= MAX_PAYLOAD_BYTES for _, body in parts)


@pytest.mark.parametrize("seed", range(10))
def test_the_bound_that_spares_measuring_a_small_batch_is_never_under_a_records_size(seed: int) -> None:
    rng = random.Random(seed)
    for _ in range(40):
        attributes = {f"a{i}": string_attribute(random_text(rng, rng.randrange(0, 50))) for i in range(rng.randrange(4))}
        attributes.update({f"b{i}": binary_attribute(rng.randbytes(rng.randrange(1, 40))) for i in range(2)})
        message = make_message(FIFO.name, message_id=random_text(rng, 5), body=random_text(rng, rng.randrange(0, 300)),
                               attributes={"MessageGroupId": random_text(rng, 3)}, message_attributes=attributes)
        record = json.dumps(build_record(FIFO, message))
        assert record_bytes_at_most(message, len(FIFO.arn) + len(FIFO.region)) >= len(record) + 2  # and ", "


@pytest.mark.parametrize(("outcomes", "groups", "expected"), [
    ([SUCCESS, SUCCESS], ["g", "g"], [SUCCESS, SUCCESS]),
    ([SUCCESS, FAILED, FAILED, SUCCESS], ["g"] * 4, [SUCCESS, FAILED, RELEASED, RELEASED]),
    ([FAILED, SUCCESS, SUCCESS], ["g"] * 3, [FAILED, RELEASED, RELEASED]),
    ([SUCCESS, SUCCESS, FAILED], ["g"] * 3, [SUCCESS, SUCCESS, FAILED]),
    # a Lambda FIFO batch may hold several groups: a failure holds back its own group only
    ([FAILED, SUCCESS, FAILED, SUCCESS, SUCCESS], ["g", "h", "g", "h", "g"], [FAILED, SUCCESS, RELEASED, SUCCESS,
                                                                              RELEASED]),
])
def test_fifo_keeps_the_first_failure_of_a_group_and_releases_the_rest_of_the_group_behind_it(
    outcomes: list[Outcome], groups: list[str], expected: list[Outcome],
) -> None:
    assert release_behind_failures(outcomes, groups) == expected
    assert RELEASED.result is Result.RELEASED


def test_a_part_that_was_overloaded_holds_the_rest_back_and_on_fifo_so_does_one_that_did_not_succeed() -> None:
    retry = Outcome(Result.RETRY, "HTTP 429", "HTTP 429, Retry-After 2s", 2.0, 429)
    overloaded = Outcome.overloaded("HTTP 503", "the app answered HTTP 503 without Retry-After")
    assert held_back([retry, retry], False) is retry and held_back([overloaded], True) is overloaded
    assert held_back([SUCCESS, FAILED], False) is None and held_back([SUCCESS, SUCCESS], True) is None
    assert held_back([SUCCESS, FAILED], True) is RELEASED


def test_a_fifo_batch_in_parts_stops_at_the_first_part_that_did_not_succeed() -> None:
    batch = messages(["x" * MIB] * 10, FIFO, groups=["g"] * 10)
    sent: list[list[str]] = []

    def fail_the_second_record(queue: QueueInfo, records: list[dict[str, Any]], body: bytes) -> list[Outcome]:
        sent.append([record["messageId"] for record in records])
        return [FAILED if record["messageId"] == "m1" else SUCCESS for record in records]

    outcomes = deliver_in_parts(FIFO, batch, fail_the_second_record)
    assert sent == [["m0", "m1", "m2", "m3", "m4"]]  # the second part is never sent
    assert outcomes == [SUCCESS, FAILED] + [RELEASED] * 8
    sent.clear()
    # a standard queue's parts go on, and its MessageGroupId (a fair queue's tenant) holds nothing back
    fair = messages(["x" * MIB] * 10, QUEUE, groups=["g"] * 10)
    assert deliver_in_parts(QUEUE, fair, fail_the_second_record) == [SUCCESS, FAILED] + [SUCCESS] * 8
    assert len(sent) == 2
