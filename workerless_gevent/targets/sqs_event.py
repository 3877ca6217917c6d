"""The SQS event Lambda's own event source mapping sends, and its rules for the answer (`batchItemFailures`):
written once for both targets that speak it, a Lambda function and an HTTP app behind a batch target."""

from __future__ import annotations

import base64
import json
from typing import Any

from ..message import Message
from . import SUCCESS, Outcome, QueueInfo, Result

RECORD_ATTRIBUTES = ("ApproximateReceiveCount", "SentTimestamp", "SenderId", "ApproximateFirstReceiveTimestamp",
                     "SequenceNumber", "MessageGroupId", "MessageDeduplicationId", "AWSTraceHeader")


def build_record(queue: QueueInfo, message: Message) -> dict[str, Any]:
    return {
        "messageId": message.message_id,
        "receiptHandle": message.receipt_handle,
        "body": message.body,
        "attributes": {key: message.attributes[key] for key in RECORD_ATTRIBUTES if key in message.attributes},
        "messageAttributes": {name: lambda_attribute(value) for name, value in message.message_attributes.items()},
        "md5OfBody": message.md5_of_body,
        "eventSource": "aws:sqs",
        "eventSourceARN": queue.arn,
        "awsRegion": queue.region,
    }


def lambda_attribute(value: dict[str, Any]) -> dict[str, Any]:
    """SQS API attribute (PascalCase, raw bytes) -> Lambda event attribute (camelCase, base64)."""
    converted: dict[str, Any] = {}
    if "StringValue" in value:
        converted["stringValue"] = value["StringValue"]
    if "BinaryValue" in value:
        raw = value["BinaryValue"]
        converted["binaryValue"] = base64.b64encode(raw if isinstance(raw, bytes) else str(raw).encode()).decode()
    converted["stringListValues"] = list(value.get("StringListValues", []))
    converted["binaryListValues"] = [base64.b64encode(item).decode() for item in value.get("BinaryListValues", [])]
    converted["dataType"] = value.get("DataType", "String")
    return converted


def judge_response(body: bytes, records: list[dict[str, Any]], *, success: Outcome = SUCCESS,
                   answerer: str = "the function") -> list[Outcome]:
    """Apply Lambda's ReportBatchItemFailures rules to an answer's body. `success` is a record's outcome when it
    succeeded; `answerer` names who answered, in the failures' text. On a FIFO queue what follows a failure in its
    group is the caller's (`event_parts.deliver_in_parts`): released behind it, for both targets."""
    if not body.strip():
        return [success] * len(records)
    status = success.status
    try:
        response = json.loads(body)
    except ValueError:
        invalid = Outcome(Result.FAILURE, "InvalidResponse", f"{answerer}'s response is not valid JSON", status=status)
        return [invalid] * len(records)
    failures = response.get("batchItemFailures") if isinstance(response, dict) else None
    if not failures:
        return [success] * len(records)
    ids = [record["messageId"] for record in records]
    known = set(ids)
    failed = set()
    for item in failures if isinstance(failures, list) else [failures]:
        identifier = item.get("itemIdentifier") if isinstance(item, dict) else None
        if not isinstance(identifier, str) or identifier not in known:
            problem = f"batchItemFailures names an unknown or empty itemIdentifier ({identifier!r})"
            return [Outcome(Result.FAILURE, "InvalidResponse", problem, status=status)] * len(records)
        failed.add(identifier)
    reported = Outcome(Result.FAILURE, "BatchItemFailure", f"{answerer} reported this record as failed", status=status)
    return [reported if message_id in failed else success for message_id in ids]
