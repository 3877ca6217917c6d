"""`workerless send`: one message onto a queue as a producer would send it: String attributes, the X-Ray
trace header (the AWSTraceHeader system attribute), and, given a bucket, a body over 256 KiB put in S3
and sent as the pointer the AWS extended clients send, so they and `large_payloads` queues can read it."""

from __future__ import annotations

import re
import uuid
from typing import Any

from ..aws.clients import build_command_client
from ..config.model import AwsConfig
from ..envelopes import OFFLOAD_THRESHOLD_BYTES, SIZE_ATTRIBUTES, PayloadPointer, message_bytes, pointer_body
from ..rules import is_fifo_queue

GROUP_ID = re.compile(r"[!-~]{1,128}\Z")  # SQS's MessageGroupId: 1-128 letters, digits and punctuation


def is_group_id(text: str) -> bool:
    return GROUP_ID.match(text) is not None


def send_message(session: Any, aws: AwsConfig, region: str, queue: str, body: str, attributes: dict[str, Any],
                 trace_header: str | None = None, s3_bucket: str | None = None, group: str | None = None) -> str:
    """The new message's id; AWS errors go up to the caller. `group`: its MessageGroupId (on a standard queue,
    a fair queue's tenant)."""
    sqs = build_command_client(session, aws, region, "sqs")
    url = queue if "://" in queue else sqs.get_queue_url(QueueName=queue)["QueueUrl"]
    extra: dict[str, Any] = {}
    if is_fifo_queue(url):
        # A fresh deduplication id: two sends of the same body are two messages, content-based or not.
        extra.update(MessageGroupId=group or "workerless-send", MessageDeduplicationId=uuid.uuid4().hex)
    elif group:
        extra["MessageGroupId"] = group
    if trace_header:
        extra["MessageSystemAttributes"] = {"AWSTraceHeader": {"DataType": "String", "StringValue": trace_header}}
    if s3_bucket and message_bytes(body, attributes) > OFFLOAD_THRESHOLD_BYTES:
        body, attributes = offload(build_command_client(session, aws, region, "s3"), s3_bucket, body, attributes)
    response = sqs.send_message(QueueUrl=url, MessageBody=body, MessageAttributes=attributes, **extra)
    return str(response["MessageId"])


def offload(s3: Any, bucket: str, body: str, attributes: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    """The body into S3 under a fresh uuid4 key (as the extended clients name them); the pointer and the
    size attribute in its place."""
    data = body.encode("utf-8")
    pointer = PayloadPointer(bucket, str(uuid.uuid4()))
    s3.put_object(Bucket=bucket, Key=pointer.key, Body=data)
    size = {"DataType": "Number", "StringValue": str(len(data))}
    return pointer_body(pointer), {**attributes, SIZE_ATTRIBUTES[0]: size}
