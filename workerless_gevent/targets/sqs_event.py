"""The SQS event Lambda's own event source mapping sends, and its rules for the answer (`batchItemFailures`):
written once for both targets that speak it, a Lambda function and an HTTP app behind a batch target."""

from __future__ import annotations

import base64
import json
import math
from typing import Any

from ..message import Message
from . import SUCCESS, Outcome, QueueInfo, Result

MAX_PAYLOAD_BYTES = 6 * 1024 * 1024 - 1024  # Lambda's synchronous limit, less room for the envelope
RECORD_ATTRIBUTES = ("ApproximateReceiveCount", "SentTimestamp", "SenderId", "ApproximateFirstReceiveTimestamp",
                     "SequenceNumber", "MessageGroupId", "MessageDeduplicationId", "AWSTraceHeader")
RECORD_OVERHEAD_BYTES = 2048  # a record's fields besides its body, attributes included, generously


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


def event_payloads(records: list[dict[str, Any]]) -> list[tuple[list[dict[str, Any]], bytes]]:
    """The event as requests of at most 6 MB each (Lambda's request limit), halving batches that are over it:
    each part's records and its JSON. A single record over the limit goes alone."""
    payload = json.dumps({"Records": records}).encode("utf-8")
    if len(payload) <= MAX_PAYLOAD_BYTES or len(records) == 1:
        return [(records, payload)]
    middle = len(records) // 2
    return event_payloads(records[:middle]) + event_payloads(records[middle:])


def split_by_size(records: list[dict[str, Any]]) -> list[list[dict[str, Any]]]:
    """Keep each invocation under Lambda's 6 MB request limit, halving batches that are over it."""
    return [part for part, _ in event_payloads(records)]


def requests_needed(messages: list[Message]) -> int:
    """How many requests a batch of these may need at most: an estimate on the generous side (halving can make up
    to twice as many as the size alone). A lease that is too long costs nothing: it ends when the batch is settled."""
    size = sum(len(message.body.encode("utf-8")) + RECORD_OVERHEAD_BYTES for message in messages)
    return max(1, math.ceil(2 * size / MAX_PAYLOAD_BYTES))


def judge_response(body: bytes, records: list[dict[str, Any]], is_fifo: bool, *, success: Outcome = SUCCESS,
                   answerer: str = "the function") -> list[Outcome]:
    """Apply Lambda's ReportBatchItemFailures rules to an answer's body. `success` is a record's outcome when it
    succeeded; `answerer` names who answered, in the failures' text."""
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
    positions = {message_id: index for index, message_id in reversed(list(enumerate(ids)))}  # first of each id
    failed = set()
    for item in failures if isinstance(failures, list) else [failures]:
        identifier = item.get("itemIdentifier") if isinstance(item, dict) else None
        if not isinstance(identifier, str) or identifier not in positions:
            problem = f"batchItemFailures names an unknown or empty itemIdentifier ({identifier!r})"
            return [Outcome(Result.FAILURE, "InvalidResponse", problem, status=status)] * len(records)
        failed.add(identifier)
    if is_fifo:  # Lambda's FIFO rule: everything after the first failure fails too, to keep order
        first = min(positions[identifier] for identifier in failed)
        failed.update(ids[first:])
    reported = Outcome(Result.FAILURE, "BatchItemFailure", f"{answerer} reported this record as failed", status=status)
    return [reported if message_id in failed else success for message_id in ids]
