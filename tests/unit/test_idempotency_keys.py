"""Where a message's idempotency key comes from, for each form of `idempotency_key`."""

from __future__ import annotations

import json

import pytest

from tests.unit.sqs_messages import make_message
from workerless_gevent.config.idempotency import KeySpec, parse_key
from workerless_gevent.idempotency.keys import MAX_KEY_BYTES, item_key, key_of


def spec(text: str) -> KeySpec:
    parsed = parse_key(text)
    assert parsed is not None
    return parsed


@pytest.mark.parametrize(("text", "parsed"), [
    ("message_id", KeySpec("message_id")),
    ("dedup_id", KeySpec("dedup_id")),
    ("attribute:order-id", KeySpec("attribute", ("order-id",))),
    ("body:order.id", KeySpec("body", ("order", "id"))),
    ("body:items.0.sku", KeySpec("body", ("items", "0", "sku"))),
    ("body:", None), ("body:a..b", None), ("attribute:", None), ("attribute:a b", None), ("messageid", None),
])
def test_parse_key(text: str, parsed: KeySpec | None) -> None:
    assert parse_key(text) == parsed


@pytest.mark.parametrize(("body", "path", "key"), [
    ({"order": {"id": "A-1"}}, "body:order.id", "A-1"),
    ({"order": {"id": 42}}, "body:order.id", "42"),
    ({"order": {"id": {"b": 1, "a": 2}}}, "body:order.id", '{"a":2,"b":1}'),  # sorted: the same object, one key
    ({"items": [{"sku": "x"}, {"sku": "y"}]}, "body:items.1.sku", "y"),
    ({"items": [{"sku": "x"}]}, "body:items.1.sku", None),
    ({"order": {}}, "body:order.id", None),
    ({"order": {"id": None}}, "body:order.id", None),
    ({"order": {"id": ""}}, "body:order.id", None),
    ("not an object", "body:order.id", None),
])
def test_body_paths(body: object, path: str, key: str | None) -> None:
    assert key_of(spec(path), make_message(body=json.dumps(body))) == key


def test_a_body_that_is_not_json_has_no_key() -> None:
    assert key_of(spec("body:order.id"), make_message(body="{not json")) is None


def test_message_id_prefers_the_id_redrive_carries() -> None:
    message = make_message(message_id="m-2")
    assert key_of(spec("message_id"), message) == "m-2"
    message.message_attributes["workerless.message_id"] = {"DataType": "String", "StringValue": "m-1"}
    assert key_of(spec("message_id"), message) == "m-1"


def test_dedup_id_and_attributes() -> None:
    message = make_message()
    assert key_of(spec("dedup_id"), message) is None
    message.attributes["MessageDeduplicationId"] = "d-7"
    assert key_of(spec("dedup_id"), message) == "d-7"
    assert key_of(spec("attribute:order"), message) is None
    message.message_attributes["order"] = {"DataType": "String", "StringValue": "o-9"}
    assert key_of(spec("attribute:order"), message) == "o-9"


def test_a_body_path_reads_inside_an_sns_envelope_when_unwrapping() -> None:
    envelope = {"Type": "Notification", "TopicArn": "arn:aws:sns:us-east-1:1:t", "Message": '{"order": {"id": "S-1"}}'}
    message = make_message(body=json.dumps(envelope))
    assert key_of(spec("body:order.id"), message) is None
    assert key_of(spec("body:order.id"), message, unwrap=True) == "S-1"


def test_item_keys_are_scoped_by_queue_and_long_keys_hashed() -> None:
    assert item_key("payments", "A-1") == "idempotency/payments/A-1"
    assert item_key("payments", "A-1") != item_key("refunds", "A-1")
    long = item_key("payments", "x" * (MAX_KEY_BYTES + 1))
    assert long.startswith("idempotency/payments/sha256:") and len(long) < 100
