"""The daemon's SQS calls without botocore's client: AWS JSON 1.0 over `wire.http` (`json_wire.JsonWire`).

ReceiveMessage, DeleteMessageBatch and ChangeMessageVisibilityBatch are nearly all of the daemon's
SQS traffic. The start-up calls (GetQueueUrl, GetQueueAttributes) and the rare SendMessage (dead letters,
periodic tasks) go the same way, so that the daemon never builds a botocore SQS client: one costs about
10 MB and 100 ms, mostly botocore's endpoint data. It stands in for the boto3 client on those methods only,
with the same keyword arguments and the same result shapes: binary message attributes come back as bytes,
as botocore decodes them.
"""

from __future__ import annotations

import base64
import urllib.parse
import urllib.request
from typing import Any

from .json_wire import JsonWire

# Only members of botocore's model are kept, and nulls are dropped, as botocore's parser does.
MESSAGE_KEYS = ("MessageId", "ReceiptHandle", "MD5OfBody", "Body", "Attributes", "MD5OfMessageAttributes",
                "MessageAttributes")
ATTRIBUTE_VALUE_KEYS = ("StringValue", "BinaryValue", "StringListValues", "BinaryListValues", "DataType")
MESSAGE_KEY_SET = frozenset(MESSAGE_KEYS)
TEXT_VALUE_KEY_SET = frozenset(("StringValue", "StringListValues", "DataType"))  # no binary value to decode


class SqsWire(JsonWire):
    """SQS's calls, as the boto3 client takes and answers them."""

    service = "SQS"
    target_prefix = "AmazonSQS."
    signing_name = "sqs"

    # ---------------------------------------------------------------- the boto3-shaped calls

    def receive_message(self, *, QueueUrl: str, MaxNumberOfMessages: int | None = None,
                        WaitTimeSeconds: int | None = None, VisibilityTimeout: int | None = None,
                        MessageSystemAttributeNames: list[str] | None = None,
                        MessageAttributeNames: list[str] | None = None,
                        ReceiveRequestAttemptId: str | None = None) -> dict[str, Any]:
        params: dict[str, Any] = {"QueueUrl": QueueUrl}
        for key, value in (("MaxNumberOfMessages", MaxNumberOfMessages), ("WaitTimeSeconds", WaitTimeSeconds),
                           ("VisibilityTimeout", VisibilityTimeout),
                           ("MessageSystemAttributeNames", MessageSystemAttributeNames),
                           ("MessageAttributeNames", MessageAttributeNames),
                           ("ReceiveRequestAttemptId", ReceiveRequestAttemptId)):
            if value is not None:
                params[key] = value
        response = self.call("ReceiveMessage", params)
        messages = response.get("Messages")
        if isinstance(messages, list):
            response["Messages"] = [parse_or_mark(raw) for raw in messages]
        return response

    def send_message(self, *, QueueUrl: str, MessageBody: str, **optional: Any) -> dict[str, Any]:
        """Optional members as botocore names them (MessageAttributes, DelaySeconds, MessageGroupId, ...)."""
        params: dict[str, Any] = {"QueueUrl": QueueUrl, "MessageBody": MessageBody}
        for key, value in optional.items():
            if value is not None:
                params[key] = encode_attributes(value) if key == "MessageAttributes" else value
        return self.call("SendMessage", params)

    def send_message_batch(self, *, QueueUrl: str, Entries: list[dict[str, Any]]) -> dict[str, Any]:
        """Entries as botocore takes them (binary attribute values as bytes); redrive's copies."""
        entries = [{**entry, "MessageAttributes": encode_attributes(entry["MessageAttributes"])}
                   if entry.get("MessageAttributes") else entry for entry in Entries]
        return self.call("SendMessageBatch", {"QueueUrl": QueueUrl, "Entries": entries})

    def get_queue_url(self, *, QueueName: str, QueueOwnerAWSAccountId: str | None = None) -> dict[str, Any]:
        params = {"QueueName": QueueName}
        if QueueOwnerAWSAccountId is not None:
            params["QueueOwnerAWSAccountId"] = QueueOwnerAWSAccountId
        return self.call("GetQueueUrl", params)

    def get_queue_attributes(self, *, QueueUrl: str, AttributeNames: list[str]) -> dict[str, Any]:
        return self.call("GetQueueAttributes", {"QueueUrl": QueueUrl, "AttributeNames": AttributeNames})

    def delete_message_batch(self, *, QueueUrl: str, Entries: list[dict[str, Any]],
                             deadline: float | None = None) -> dict[str, Any]:
        return self.call("DeleteMessageBatch", {"QueueUrl": QueueUrl, "Entries": Entries}, deadline)

    def change_message_visibility_batch(self, *, QueueUrl: str, Entries: list[dict[str, Any]],
                                        deadline: float | None = None) -> dict[str, Any]:
        return self.call("ChangeMessageVisibilityBatch", {"QueueUrl": QueueUrl, "Entries": Entries}, deadline)


def parse_or_mark(raw: object) -> object:
    """One message parsed; one we cannot parse is marked `Unreadable` (Message.from_sqs refuses it, so only
    it is skipped, not the whole answer), with its id and receipt handle if it had them."""
    if not isinstance(raw, dict):
        return raw
    try:
        return parse_message(raw)
    except (TypeError, ValueError, AttributeError) as error:  # binascii.Error is a ValueError
        kept = {key: raw[key] for key in ("MessageId", "ReceiptHandle") if isinstance(raw.get(key), str)}
        return {**kept, "Unreadable": f"{type(error).__name__}: {error}"}


def parse_message(raw: dict[str, Any]) -> dict[str, Any]:
    """One message as botocore returns it: model members only, binary attribute values as bytes. SQS's
    answer has nothing else, nearly always: then the decoded dict is that message (checked in C)."""
    if raw.keys() <= MESSAGE_KEY_SET and None not in raw.values():
        message = raw
    else:
        message = {key: raw[key] for key in MESSAGE_KEYS if raw.get(key) is not None}
    attributes = message.get("MessageAttributes")
    if attributes:
        message["MessageAttributes"] = {name: parse_attribute_value(value) for name, value in attributes.items()
                                        if isinstance(value, dict)}
    return message


def parse_attribute_value(raw: dict[str, Any]) -> dict[str, Any]:
    if raw.keys() <= TEXT_VALUE_KEY_SET and None not in raw.values():
        return raw  # a String or Number attribute as SQS wrote it: nothing to drop or decode
    value = {key: raw[key] for key in ATTRIBUTE_VALUE_KEYS if raw.get(key) is not None}
    if "BinaryValue" in value:
        value["BinaryValue"] = base64.b64decode(value["BinaryValue"])
    if "BinaryListValues" in value:
        value["BinaryListValues"] = [base64.b64decode(item) for item in value["BinaryListValues"]]
    return value


def encode_attributes(attributes: dict[str, Any]) -> dict[str, Any]:
    """Message attributes as the JSON protocol carries them: binary values in base64, as botocore sends them."""
    encoded = {}
    for name, value in attributes.items():
        value = dict(value)
        if isinstance(value.get("BinaryValue"), (bytes, bytearray)):
            value["BinaryValue"] = base64.b64encode(value["BinaryValue"]).decode("ascii")
        if "BinaryListValues" in value:
            value["BinaryListValues"] = [base64.b64encode(item).decode("ascii") if isinstance(item, (bytes, bytearray))
                                         else item for item in value["BinaryListValues"]]
        encoded[name] = value
    return encoded


def proxy_for(endpoint_url: str) -> str | None:
    """The proxy that botocore would use for this endpoint (HTTP(S)_PROXY unless NO_PROXY), if any."""
    parts = urllib.parse.urlsplit(endpoint_url)
    proxy = urllib.request.getproxies().get(parts.scheme)
    if not proxy or urllib.request.proxy_bypass(parts.hostname or ""):
        return None
    return proxy
