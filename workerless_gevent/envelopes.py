"""Messages that arrive wrapped: an SNS notification's JSON envelope, and the S3 pointer that the AWS
extended clients (Java, Python) send in place of a body over 256 KiB. Pure functions on `Message`: what
the target sees is a copy, so the original (pointer or envelope) is what a dead-letter queue gets."""

from __future__ import annotations

import base64
import binascii
import dataclasses
import hashlib
import json
from dataclasses import dataclass
from typing import Any

from .message import Message

POINTER_CLASSES = ("software.amazon.payloadoffloading.PayloadS3Pointer",  # the current clients
                   "com.amazon.sqs.javamessaging.MessageS3Pointer")  # the Java client before 2.0
SIZE_ATTRIBUTES = ("ExtendedPayloadSize", "SQSLargePayloadSize")  # the current name, then the legacy one
OFFLOAD_THRESHOLD_BYTES = 262144  # body and attributes over this go to S3, as the extended clients do


class InvalidPointer(ValueError):
    """The message says its body is in S3 (the size attribute) but the body is not a pointer."""


@dataclass(frozen=True, slots=True)
class PayloadPointer:
    bucket: str
    key: str


def unwrap_sns(message: Message) -> Message | None:
    """The notification inside an SNS envelope (a topic's delivery without raw message delivery):
    its Message as the body, byte for byte, and its MessageAttributes as the message attributes.
    None when the body is not such an envelope."""
    if not message.body.lstrip()[:1] == "{":
        return None
    try:
        envelope = json.loads(message.body)
    except (ValueError, RecursionError):  # a deeply nested body is no envelope either
        return None
    if not (isinstance(envelope, dict) and envelope.get("Type") == "Notification"
            and isinstance(envelope.get("Message"), str) and isinstance(envelope.get("TopicArn"), str)):
        return None
    attributes = sns_attributes(envelope.get("MessageAttributes") or {})
    if attributes is None:
        return None
    return with_body(message, envelope["Message"], attributes)


def sns_attributes(values: object) -> dict[str, dict[str, Any]] | None:
    """SNS's {"Type", "Value"} (Binary values base64) -> SQS's {"DataType", "StringValue" | "BinaryValue"}."""
    if not isinstance(values, dict):
        return None
    attributes: dict[str, dict[str, Any]] = {}
    for name, value in values.items():
        if not (isinstance(value, dict) and isinstance(value.get("Type"), str) and isinstance(value.get("Value"), str)):
            return None
        data_type, text = value["Type"], value["Value"]
        if data_type.split(".")[0] == "Binary":
            try:
                attributes[name] = {"DataType": data_type, "BinaryValue": base64.b64decode(text, validate=True)}
            except binascii.Error:
                return None
        else:  # String, Number, String.Array and custom labels of them
            attributes[name] = {"DataType": data_type, "StringValue": text}
    return attributes


def payload_pointer(message: Message) -> PayloadPointer | None:
    """Where the body is, for a message sent by an extended client; None for an ordinary message.
    Like the extended clients, only a message with the size attribute is read as a pointer."""
    if not any(name in message.message_attributes for name in SIZE_ATTRIBUTES):
        return None
    try:
        parsed = json.loads(message.body)
    except (ValueError, RecursionError):
        parsed = None
    if isinstance(parsed, list) and len(parsed) == 2 and parsed[0] in POINTER_CLASSES and isinstance(parsed[1], dict):
        bucket, key = parsed[1].get("s3BucketName"), parsed[1].get("s3Key")
        if isinstance(bucket, str) and bucket and isinstance(key, str) and key:
            return PayloadPointer(bucket, key)
    raise InvalidPointer("the message has the extended clients' size attribute but its body is not an S3 pointer")


def with_payload(message: Message, body: str) -> Message:
    """The message as its sender wrote it: the fetched body, without the size attribute (the extended
    clients remove it on receive too)."""
    attributes = {name: value for name, value in message.message_attributes.items() if name not in SIZE_ATTRIBUTES}
    return with_body(message, body, attributes)


def with_body(message: Message, body: str, attributes: dict[str, dict[str, Any]]) -> Message:
    """A copy for the target; md5OfBody follows the body, as Lambda's event would have it."""
    md5 = hashlib.md5(body.encode("utf-8", "surrogatepass")).hexdigest()
    return dataclasses.replace(message, body=body, md5_of_body=md5, message_attributes=attributes)


def pointer_body(pointer: PayloadPointer) -> str:
    """The body the extended clients send in place of the payload."""
    return json.dumps([POINTER_CLASSES[0], {"s3BucketName": pointer.bucket, "s3Key": pointer.key}])


def message_bytes(body: str, attributes: dict[str, dict[str, Any]]) -> int:
    """What SQS counts against its size limit: the body, and each attribute's name, type and value."""
    size = len(body.encode("utf-8"))
    for name, value in attributes.items():
        size += len(name.encode("utf-8")) + len(str(value.get("DataType", "")).encode("utf-8"))
        if "BinaryValue" in value:
            size += len(value["BinaryValue"])
        else:
            size += len(str(value.get("StringValue", "")).encode("utf-8"))
    return size
