"""envelopes.py: SNS envelopes unwrapped byte-exact, the extended clients' S3 pointer read and written."""

from __future__ import annotations

import hashlib
import json

import pytest

from tests.unit.sqs_messages import make_message, string_attribute
from workerless_gevent.envelopes import (
    InvalidPointer,
    PayloadPointer,
    message_bytes,
    payload_pointer,
    pointer_body,
    unwrap_sns,
    with_payload,
)

ORIGINAL = '  {"order": 42, "note": "h\u00e9llo \u2713 \U0001f680"}\r\n\ttrailing \\u0041 "quoted" '


def envelope(message: str = ORIGINAL, attributes: dict[str, object] | None = None, **extra: object) -> str:
    """An SNS notification as SNS writes it into an SQS queue subscribed without raw delivery."""
    document: dict[str, object] = {
        "Type": "Notification", "MessageId": "22b80b92-fdea-4c2c-8f9d-bdfb0c7bf324",
        "TopicArn": "arn:aws:sns:us-east-1:123456789012:orders", "Subject": "s", "Message": message,
        "Timestamp": "2026-01-01T00:00:00.000Z", "SignatureVersion": "1", "Signature": "EXAMPLE",
        "SigningCertURL": "https://sns.us-east-1.amazonaws.com/cert.pem", "UnsubscribeURL": "https://example",
    }
    if attributes is not None:
        document["MessageAttributes"] = attributes
    document.update(extra)
    return json.dumps(document, indent=2)


def test_the_envelope_message_is_the_body_byte_for_byte() -> None:
    wrapped = make_message(body=envelope(), attributes={"AWSTraceHeader": "Root=1-a-b"})
    inner = unwrap_sns(wrapped)
    assert inner is not None
    assert inner.body == ORIGINAL
    assert inner.md5_of_body == hashlib.md5(ORIGINAL.encode("utf-8")).hexdigest()
    assert inner.message_attributes == {}
    # the SQS side stays: id, receipt handle, system attributes; and the original is untouched
    assert (inner.message_id, inner.receipt_handle, inner.attributes) == (
        wrapped.message_id, wrapped.receipt_handle, wrapped.attributes)
    assert wrapped.body == envelope()


def test_sns_attributes_become_message_attributes() -> None:
    attributes = {"color": {"Type": "String", "Value": "blue"}, "price": {"Type": "Number", "Value": "12.5"},
                  "blob": {"Type": "Binary", "Value": "AP8="}, "tags": {"Type": "String.Array", "Value": '["a",1]'}}
    inner = unwrap_sns(make_message(body=envelope(attributes=attributes)))
    assert inner is not None
    assert inner.message_attributes == {
        "color": {"DataType": "String", "StringValue": "blue"},
        "price": {"DataType": "Number", "StringValue": "12.5"},
        "blob": {"DataType": "Binary", "BinaryValue": b"\x00\xff"},
        "tags": {"DataType": "String.Array", "StringValue": '["a",1]'},
    }
    assert inner.string_attribute("tags") == '["a",1]'


@pytest.mark.parametrize(
    "body",
    [
        pytest.param("plain text", id="text"),
        pytest.param('{"order": 42}', id="other-json"),
        pytest.param("[1, 2]", id="json-list"),
        pytest.param("{not json", id="broken-json"),
        pytest.param(envelope(Type="SubscriptionConfirmation"), id="subscription-confirmation"),
        pytest.param(envelope(Message={"nested": True}), id="message-not-a-string"),
        pytest.param(envelope(TopicArn=None), id="no-topic"),
        pytest.param(envelope(attributes={"a": {"Type": "String"}}), id="attribute-without-value"),
        pytest.param(envelope(attributes={"a": {"Type": "Binary", "Value": "not base64!"}}), id="bad-base64"),
        pytest.param(envelope(attributes=["a"]), id="attributes-not-a-map"),
    ],
)
def test_a_body_that_is_not_an_sns_envelope_is_left_alone(body: str) -> None:
    assert unwrap_sns(make_message(body=body)) is None


SIZE = {"ExtendedPayloadSize": string_attribute("1048576", "Number")}


def test_a_pointer_with_the_size_attribute_is_read() -> None:
    body = '["software.amazon.payloadoffloading.PayloadS3Pointer",{"s3BucketName":"big","s3Key":"k/1"}]'
    assert payload_pointer(make_message(body=body, message_attributes=SIZE)) == PayloadPointer("big", "k/1")


def test_the_legacy_java_pointer_and_attribute_are_read() -> None:
    body = '["com.amazon.sqs.javamessaging.MessageS3Pointer", {"s3BucketName": "big", "s3Key": "k"}]'
    legacy = {"SQSLargePayloadSize": string_attribute("300000", "Number")}
    assert payload_pointer(make_message(body=body, message_attributes=legacy)) == PayloadPointer("big", "k")


def test_without_the_size_attribute_a_pointer_is_an_ordinary_body() -> None:
    body = pointer_body(PayloadPointer("big", "k"))
    assert payload_pointer(make_message(body=body)) is None


@pytest.mark.parametrize("body", ["plain", "[]", '["x.Other", {"s3BucketName": "b", "s3Key": "k"}]',
                                  '["software.amazon.payloadoffloading.PayloadS3Pointer", {"s3BucketName": "b"}]',
                                  '["software.amazon.payloadoffloading.PayloadS3Pointer", {"s3BucketName": "", '
                                  '"s3Key": "k"}]'])
def test_the_size_attribute_with_a_body_that_is_no_pointer_is_an_error(body: str) -> None:
    with pytest.raises(InvalidPointer):
        payload_pointer(make_message(body=body, message_attributes=SIZE))


def test_the_fetched_payload_replaces_the_pointer_without_the_size_attribute() -> None:
    message = make_message(body=pointer_body(PayloadPointer("big", "k")),
                           message_attributes={**SIZE, "color": string_attribute("blue")})
    resolved = with_payload(message, "the payload")
    assert (resolved.body, resolved.message_attributes) == ("the payload", {"color": string_attribute("blue")})
    assert resolved.md5_of_body == hashlib.md5(b"the payload").hexdigest()
    assert "ExtendedPayloadSize" in message.message_attributes


def test_pointer_body_is_what_the_extended_clients_write() -> None:
    assert json.loads(pointer_body(PayloadPointer("big", "0b7c"))) == [
        "software.amazon.payloadoffloading.PayloadS3Pointer", {"s3BucketName": "big", "s3Key": "0b7c"}]


def test_message_bytes_counts_body_and_attributes_as_sqs_does() -> None:
    attributes = {"n\u00e9": {"DataType": "String", "StringValue": "\u2713"}, "b": {"DataType": "Binary",
                                                                                    "BinaryValue": b"123"}}
    assert message_bytes("\u00e9t\u00e9", attributes) == 5 + (3 + 6 + 3) + (1 + 6 + 3)


def test_a_body_nested_past_the_parser_s_depth_is_neither_an_envelope_nor_a_pointer() -> None:
    deep = "[" * 100_000 + "]" * 100_000  # json.loads raises RecursionError, not ValueError
    assert unwrap_sns(make_message(body="{" + '"a":' * 100_000 + "1" + "}" * 100_000)) is None
    with pytest.raises(InvalidPointer):
        payload_pointer(make_message(body=deep, message_attributes={"ExtendedPayloadSize": string_attribute("9")}))
