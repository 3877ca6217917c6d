"""Invoke a Lambda function with exactly the SQS event Lambda's own event source mapping sends."""

from __future__ import annotations

import base64
import json
import logging
import math
import random
from typing import Any

import botocore.exceptions

from ..config.model import LambdaTargetConfig
from ..errors import describe_error, error_code
from ..message import Message
from ..rules import LAMBDA_THROTTLE_CODES, backoff_seconds
from . import SUCCESS, Outcome, Pause, QueueInfo, Result

logger = logging.getLogger(__name__)

MAX_PAYLOAD_BYTES = 6 * 1024 * 1024 - 1024  # Lambda's synchronous limit, less room for the envelope
RECORD_ATTRIBUTES = ("ApproximateReceiveCount", "SentTimestamp", "SenderId", "ApproximateFirstReceiveTimestamp",
                     "SequenceNumber", "MessageGroupId", "MessageDeduplicationId", "AWSTraceHeader")
RECORD_OVERHEAD_BYTES = 2048  # a record's fields besides its body, attributes included, generously
MAX_THROTTLE_PAUSE_SECONDS = 60.0  # a throttled function's pause: half to all of 2, 4, 8 ... seconds, up to this


class LambdaTarget:
    def __init__(self, config: LambdaTargetConfig, client: Any, rng: random.Random) -> None:
        self.name = config.name
        self.config = config
        self.client = client
        self.rng = rng
        self.messages_per_delivery = config.batch_size
        self.hard_deadline_seconds = float(config.timeout + 10)
        self.pause = Pause()
        self.throttles_in_a_row = 0

    def deliver(self, queue: QueueInfo, messages: list[Message]) -> list[Outcome]:
        records = [build_record(queue, message) for message in messages]
        outcomes: list[Outcome] = []
        for chunk in split_by_size(records):
            outcomes.extend(self.invoke(queue, chunk))
        return outcomes

    def deadline_seconds(self, messages: list[Message]) -> float:
        """One Invoke's timeout per invocation the batch may need: a batch over 6 MB goes in several, one
        after the other. An estimate on the generous side (halving can make up to twice as many as the
        size alone); a lease that is too long costs nothing, as it ends when the batch is settled."""
        size = sum(len(message.body.encode("utf-8")) + RECORD_OVERHEAD_BYTES for message in messages)
        return self.hard_deadline_seconds * max(1, math.ceil(2 * size / MAX_PAYLOAD_BYTES))

    def invoke(self, queue: QueueInfo, records: list[dict[str, Any]]) -> list[Outcome]:
        payload = json.dumps({"Records": records}).encode("utf-8")
        extra = {"Qualifier": self.config.qualifier} if self.config.qualifier else {}
        try:
            response = self.client.invoke(FunctionName=self.config.function, InvocationType="RequestResponse",
                                          Payload=payload, **extra)
            body = response["Payload"].read()
        except (botocore.exceptions.BotoCoreError, botocore.exceptions.ClientError) as error:
            return [self.judge_error(error)] * len(records)
        self.throttles_in_a_row = 0
        status = int(response.get("StatusCode", 200))
        if response.get("FunctionError"):
            detail = summarize_error(body)
            return [Outcome.failure(f"FunctionError:{response['FunctionError']}", detail)] * len(records)
        if not 200 <= status < 300:
            return [Outcome.failure(f"HTTP {status}", f"Invoke answered status {status}")] * len(records)
        return judge_response(body, records, queue.is_fifo)

    def judge_error(self, error: BaseException) -> Outcome:
        code = error_code(error)
        if code.endswith(LAMBDA_THROTTLE_CODES):
            self.throttles_in_a_row += 1
            seconds = backoff_seconds(self.throttles_in_a_row + 1, self.rng, MAX_THROTTLE_PAUSE_SECONDS, floor=0.5)
            self.pause.extend(seconds)
            if self.config.overload == "backpressure":
                return Outcome.overloaded("Throttled", describe_error(error))
            return Outcome(Result.RETRY, "Throttled", describe_error(error), seconds)
        return Outcome.failure(code, describe_error(error))


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


def split_by_size(records: list[dict[str, Any]]) -> list[list[dict[str, Any]]]:
    """Keep each invocation under Lambda's 6 MB request limit, halving batches that are over it."""
    size = len(json.dumps({"Records": records}).encode("utf-8"))
    if size <= MAX_PAYLOAD_BYTES or len(records) == 1:
        return [records]
    middle = len(records) // 2
    return split_by_size(records[:middle]) + split_by_size(records[middle:])


def judge_response(body: bytes, records: list[dict[str, Any]], is_fifo: bool) -> list[Outcome]:
    """Apply Lambda's ReportBatchItemFailures rules to a function's response."""
    if not body.strip():
        return [SUCCESS] * len(records)
    try:
        response = json.loads(body)
    except ValueError:
        return [Outcome.failure("InvalidResponse", "the function's response is not valid JSON")] * len(records)
    failures = response.get("batchItemFailures") if isinstance(response, dict) else None
    if not failures:
        return [SUCCESS] * len(records)
    ids = [record["messageId"] for record in records]
    positions = {message_id: index for index, message_id in reversed(list(enumerate(ids)))}  # first of each id
    failed = set()
    for item in failures if isinstance(failures, list) else [failures]:
        identifier = item.get("itemIdentifier") if isinstance(item, dict) else None
        if not isinstance(identifier, str) or identifier not in positions:
            problem = f"batchItemFailures names an unknown or empty itemIdentifier ({identifier!r})"
            return [Outcome.failure("InvalidResponse", problem)] * len(records)
        failed.add(identifier)
    if is_fifo:  # Lambda's FIFO rule: everything after the first failure fails too, to keep order
        first = min(positions[identifier] for identifier in failed)
        failed.update(ids[first:])
    reported = Outcome.failure("BatchItemFailure", "the function reported this record as failed")
    return [reported if message_id in failed else SUCCESS for message_id in ids]


def summarize_error(body: bytes) -> str:
    try:
        detail = json.loads(body)
    except ValueError:
        return body[:200].decode("utf-8", "replace")
    if isinstance(detail, dict):
        return f"{detail.get('errorType', 'Error')}: {detail.get('errorMessage', '')}"[:300]
    return str(detail)[:300]
