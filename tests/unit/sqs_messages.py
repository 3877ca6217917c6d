"""Received messages shaped exactly as boto3's receive_message returns them, for pure tests."""

from __future__ import annotations

import hashlib
from typing import Any

from workerless_gevent.message import Message

SENT_MS = "1700000000123"  # 2023-11-14T22:13:20.123Z
FIRST_RECEIVED_MS = "1700000001456"  # 2023-11-14T22:13:21.456Z
SENDER_ID = "AIDAIENQZJOLO23YVJ4VO"


def raw_message(
    message_id: str = "059f36b4-87a3-44ab-83d2-661975830a7d",
    body: str = '{"order": 42}',
    receive_count: int = 1,
    attributes: dict[str, str] | None = None,
    message_attributes: dict[str, dict[str, Any]] | None = None,
) -> dict[str, Any]:
    raw: dict[str, Any] = {
        "MessageId": message_id,
        "ReceiptHandle": f"AQEB{message_id}handle==",
        "MD5OfBody": hashlib.md5(body.encode("utf-8")).hexdigest(),
        "Body": body,
        "Attributes": {
            "SenderId": SENDER_ID,
            "ApproximateFirstReceiveTimestamp": FIRST_RECEIVED_MS,
            "ApproximateReceiveCount": str(receive_count),
            "SentTimestamp": SENT_MS,
            **(attributes or {}),
        },
    }
    if message_attributes:
        raw["MD5OfMessageAttributes"] = "d25a6aea97eb8f585bfa92d314504a92"
        raw["MessageAttributes"] = message_attributes
    return raw


def make_message(queue: str = "payments", **fields: Any) -> Message:
    return Message.from_sqs(queue, raw_message(**fields), received_at=1700000002.0, visible_until=1000.0)


def string_attribute(value: str, data_type: str = "String") -> dict[str, Any]:
    return {"StringValue": value, "DataType": data_type}


def binary_attribute(value: bytes, data_type: str = "Binary") -> dict[str, Any]:
    return {"BinaryValue": value, "DataType": data_type}
