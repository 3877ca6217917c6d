"""message.py: the facts about a received message, and SQS timestamps as aws-sqsd spells them."""

from __future__ import annotations

import random
from datetime import datetime, timedelta, timezone

import pytest

from tests.unit.sqs_messages import SENT_MS, binary_attribute, make_message, raw_message, string_attribute
from workerless_gevent.message import Message, iso_utc

EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)


@pytest.mark.parametrize(
    ("epoch_ms", "expected"),
    [
        pytest.param("0", "1970-01-01T00:00:00.000Z", id="epoch"),
        pytest.param("999", "1970-01-01T00:00:00.999Z", id="last-millisecond"),
        pytest.param("1700000000123", "2023-11-14T22:13:20.123Z", id="milliseconds"),
        pytest.param("1700000000000", "2023-11-14T22:13:20.000Z", id="whole-second"),
        pytest.param("1709164799999", "2024-02-28T23:59:59.999Z", id="before-leap-day"),
        pytest.param("4102444800000", "2100-01-01T00:00:00.000Z", id="year-2100"),
    ],
)
def test_iso_utc(epoch_ms: str, expected: str) -> None:
    assert iso_utc(epoch_ms) == expected


@pytest.mark.parametrize("epoch_ms", [None, "", "abc", "-5", "1.5", " 17"])
def test_iso_utc_of_nothing_or_garbage_is_empty(epoch_ms: str | None) -> None:
    assert iso_utc(epoch_ms) == ""


def test_iso_utc_keeps_every_millisecond() -> None:
    rng = random.Random(20240601)
    for _ in range(5000):
        epoch_ms = rng.randrange(0, 4_102_444_800_000)
        moment = EPOCH + timedelta(milliseconds=epoch_ms)
        expected = moment.strftime("%Y-%m-%dT%H:%M:%S.") + f"{epoch_ms % 1000:03d}Z"
        assert iso_utc(str(epoch_ms)) == expected


def test_from_sqs_reads_boto3_shape() -> None:
    raw = raw_message(message_id="m-1", body="hello", receive_count=3,
                      message_attributes={"color": string_attribute("red")})
    message = Message.from_sqs("payments", raw, received_at=12.5, visible_until=99.0)
    assert (message.queue, message.message_id, message.receipt_handle) == ("payments", "m-1", "AQEBm-1handle==")
    assert (message.body, message.md5_of_body) == ("hello", "5d41402abc4b2a76b9719d911017c592")
    assert message.attributes["ApproximateReceiveCount"] == "3"
    assert message.message_attributes == {"color": {"StringValue": "red", "DataType": "String"}}
    assert (message.received_at, message.visible_until, message.settled) == (12.5, 99.0, False)
    raw["Attributes"]["ApproximateReceiveCount"] = "9"
    raw["MessageAttributes"]["size"] = string_attribute("1", "Number")
    assert message.receive_count == 3
    assert set(message.message_attributes) == {"color"}


def test_from_sqs_tolerates_missing_optional_fields() -> None:
    message = Message.from_sqs("payments", {"MessageId": "m", "ReceiptHandle": "h"}, 0.0, 0.0)
    assert (message.body, message.md5_of_body, message.attributes, message.message_attributes) == ("", "", {}, {})
    assert (message.receive_count, message.sent_at, message.group_id) == (1, None, None)


def test_messages_compare_by_identity() -> None:
    raw = raw_message()
    first = Message.from_sqs("payments", raw, 0.0, 0.0)
    second = Message.from_sqs("payments", raw, 0.0, 0.0)
    assert first != second
    assert first == first
    assert len({id(first), id(second)}) == 2


@pytest.mark.parametrize(("count", "expected"), [(1, 1), (2, 2), (17, 17)])
def test_receive_count(count: int, expected: int) -> None:
    assert make_message(receive_count=count).receive_count == expected


def test_sent_at_is_epoch_seconds() -> None:
    assert make_message().sent_at == pytest.approx(int(SENT_MS) / 1000.0)
    assert make_message().sent_at == 1700000000.123


@pytest.mark.parametrize("sent", ["", "soon", "-1", "1.5"])
def test_sent_at_of_garbage_is_none(sent: str) -> None:
    assert make_message(attributes={"SentTimestamp": sent}).sent_at is None


def test_group_id() -> None:
    assert make_message(attributes={"MessageGroupId": "customer-7"}).group_id == "customer-7"
    assert make_message().group_id is None


@pytest.mark.parametrize(
    ("attribute", "expected"),
    [
        pytest.param(string_attribute("red"), "red", id="string"),
        pytest.param(string_attribute("", "String"), "", id="empty-string"),
        pytest.param(string_attribute("3.5", "Number"), "3.5", id="number"),
        pytest.param(string_attribute("7", "Number.int"), "7", id="custom-number"),
        pytest.param(string_attribute("x", "String.json"), "x", id="custom-string"),
        pytest.param(binary_attribute(b"\x00\x01"), None, id="binary"),
        pytest.param(binary_attribute(b"\x00", "Binary.gz"), None, id="custom-binary"),
        pytest.param({"DataType": "String"}, None, id="no-value"),
        pytest.param({"StringValue": "red"}, None, id="no-data-type"),
        pytest.param({"StringValue": "red", "DataType": "Stringy"}, None, id="lookalike-type"),
    ],
)
def test_string_attribute(attribute: dict[str, object], expected: str | None) -> None:
    message = make_message(message_attributes={"attr": attribute})
    assert message.string_attribute("attr") == expected


def test_string_attribute_absent() -> None:
    assert make_message().string_attribute("attr") is None
    assert make_message(message_attributes={"other": string_attribute("x")}).string_attribute("attr") is None
