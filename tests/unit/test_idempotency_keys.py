"""Where a message's idempotency key comes from, for each form of `idempotency_key`."""

from __future__ import annotations

import hashlib
import json

import pytest

from tests.unit.sqs_messages import make_message
from workerless_gevent.config.idempotency import KeySpec, parse_key
from workerless_gevent.idempotency.keys import MAX_KEY_BYTES, item_key, key_of, payload_digest, shown_key
from workerless_gevent.idempotency.store import Claim, Verdict, VerdictKind, against_payload
from workerless_gevent.rules import short_key


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


def digest(key: str) -> str:
    return "sha256:" + hashlib.sha256(key.encode("utf-8")).hexdigest()


@pytest.mark.parametrize(("key", "shown"), [
    ("A-1", "A-1"),
    ("x" * 256, "x" * 256),  # 256 bytes of printable ASCII: as it is
    ("x" * 257, digest("x" * 257)),
    ("a b ~!%", "a b ~!%"),  # spaces inside, and every printable character, are kept
    ("tab\there", digest("tab\there")),  # a control character
    ("del\x7f", digest("del\x7f")),
    ("line\nbreak", digest("line\nbreak")),
    ("café", digest("café")),  # not ASCII (5 bytes of UTF-8, still hashed)
    ("Ω" * 100, digest("Ω" * 100)),
    (" padded", digest(" padded")),  # a space at either end: HTTP parsers strip it
    ("padded ", digest("padded ")),
    ("y" * 20_000, digest("y" * 20_000)),
])
def test_the_short_form_of_a_key(key: str, shown: str) -> None:
    assert short_key(key) == shown
    assert len(short_key(key)) <= 256 and short_key(key).isascii() and short_key(key).isprintable()


def test_a_lone_surrogate_from_a_json_body_is_hashed_as_the_table_hashes_it() -> None:
    key = key_of(spec("body:id"), make_message(body='{"id": "\\ud800x"}'))
    assert key == "\ud800x"
    assert short_key(key) == "sha256:" + hashlib.sha256(key.encode("utf-8", "surrogatepass")).hexdigest()


def test_a_key_too_long_for_the_table_shows_the_digest_the_table_keeps() -> None:
    key = "k" * (MAX_KEY_BYTES + 1)
    assert item_key("payments", key) == "idempotency/payments/" + short_key(key)


def test_a_log_line_shows_the_short_form() -> None:
    message = make_message()
    assert shown_key(message) == "-"
    message.idempotency_key = "z" * 300
    assert shown_key(message) == digest("z" * 300)


def test_the_payload_digest_is_of_the_body_or_of_the_notification_inside() -> None:
    body = json.dumps({"order": {"id": "P-1"}})
    assert payload_digest(make_message(body=body)) == hashlib.sha256(body.encode()).hexdigest()
    envelope = {"Type": "Notification", "TopicArn": "arn:aws:sns:us-east-1:1:t", "Message": body,
                "MessageId": "sns-1", "Timestamp": "2024-01-01T00:00:00.000Z"}
    again = dict(envelope, MessageId="sns-2", Timestamp="2024-01-01T00:00:01.000Z")  # published twice
    first, second = make_message(body=json.dumps(envelope)), make_message(body=json.dumps(again))
    assert payload_digest(first, unwrap=True) == payload_digest(second, unwrap=True) == payload_digest(
        make_message(body=body))
    assert payload_digest(first) != payload_digest(second)  # without unwrapping: the envelopes differ


def test_an_s3_pointer_the_daemon_fetches_has_no_digest() -> None:
    pointer = json.dumps(["software.amazon.payloadoffloading.PayloadS3Pointer", {"s3BucketName": "b", "s3Key": "k"}])
    size = {"ExtendedPayloadSize": {"DataType": "Number", "StringValue": "300000"}}
    message = make_message(body=pointer, message_attributes=size)
    assert payload_digest(message, large_payloads=True) is None
    assert payload_digest(message) == hashlib.sha256(pointer.encode()).hexdigest()  # delivered as it is


@pytest.mark.parametrize(("ours", "kept", "kind"), [
    ("aa", "aa", VerdictKind.COMPLETED),
    ("aa", "bb", VerdictKind.REUSED),
    ("aa", "", VerdictKind.COMPLETED),  # written without validate_payload: nothing to compare
    (None, "bb", VerdictKind.COMPLETED),  # this copy is not validated
])
def test_a_completed_key_with_another_payload_is_reused(ours: str | None, kept: str, kind: VerdictKind) -> None:
    verdict = against_payload(Claim("s", "t", 0, ours), Verdict(VerdictKind.COMPLETED, payload_hash=kept))
    assert verdict.kind is kind
    assert against_payload(Claim("s", "t", 0, "aa"), Verdict(VerdictKind.BUSY, 3.0)) == Verdict(VerdictKind.BUSY, 3.0)
