"""SQS calls for one queue: receive, and deletes and visibility changes coalesced into batches."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import botocore.exceptions
import gevent
import gevent.event

from .aws import AWS_ERRORS, describe_error, error_code
from .config import QueueConfig
from .message import Message
from .sqs_wire import SqsWire

logger = logging.getLogger(__name__)

KINDS = ("visibility", "delete")
FLUSH_DELAY_SECONDS = 0.05  # a delete that waits this long costs nothing: the message stays hidden
FLUSH_JOIN_SECONDS = 5.0  # at stop, how long a batch already on its way may take
STALE_HANDLE_CODES = ("ReceiptHandleIsInvalid", "InvalidParameterValue", "MessageNotInflight")


@dataclass(slots=True)
class BatchEntry:
    message: Message
    visibility_timeout_seconds: int | None  # None means delete
    is_heartbeat: bool = False


class SqsQueue:
    """A resolved queue and its two coalescing batchers (deletes, visibility changes)."""

    def __init__(self, sqs: Any, config: QueueConfig, url: str, arn: str, count: Callable[[str, str], None],
                 wire: SqsWire | None = None) -> None:
        self.sqs = sqs
        # receive, delete and visibility batches: an sqs_wire.SqsWire when given, else the boto3 client
        self.hot: Any = sqs if wire is None else wire
        self.config = config
        self.name = config.name
        self.url = url
        self.arn = arn
        self.count = count
        self.has_redrive_policy = False
        self._pending: dict[str, list[BatchEntry]] = {kind: [] for kind in KINDS}
        self._flushers: dict[str, gevent.Greenlet | None] = dict.fromkeys(KINDS)
        self._is_full = {kind: gevent.event.Event() for kind in KINDS}
        self._is_draining = False

    def receive(self, max_messages: int, wait_seconds: int) -> list[Message]:
        self.count(self.name, "SqsRequests")
        response = self.hot.receive_message(
            QueueUrl=self.url,
            MaxNumberOfMessages=max_messages,
            WaitTimeSeconds=wait_seconds,
            VisibilityTimeout=self.config.visibility_timeout,
            MessageSystemAttributeNames=["All"],
            MessageAttributeNames=["All"],
        )
        received_at = time.time()
        visible_until = time.monotonic() + self.config.visibility_timeout
        return [Message.from_sqs(self.name, raw, received_at, visible_until) for raw in response.get("Messages", [])]

    def delete(self, message: Message) -> None:
        message.settled = True
        self._add("delete", BatchEntry(message, None))

    def change_visibility(self, message: Message, seconds: int, is_heartbeat: bool = False) -> None:
        if not is_heartbeat:
            message.settled = True
        self._add("visibility", BatchEntry(message, seconds, is_heartbeat))

    def send(self, body: str, attributes: dict[str, Any], **extra: Any) -> None:
        self.count(self.name, "SqsRequests")
        self.sqs.send_message(QueueUrl=self.url, MessageBody=body, MessageAttributes=attributes, **extra)

    def pending_count(self) -> int:
        return sum(len(entries) for entries in self._pending.values())

    def flush(self) -> None:
        """At stop: send everything pending without waiting for fuller batches, and wait for it."""
        self._is_draining = True
        for kind in KINDS:
            if self._flushers[kind] is None and self._pending[kind]:
                self._flushers[kind] = gevent.spawn(self._flush_loop, kind)
            self._is_full[kind].set()
        # Never killed mid-call: that would drop the batch it took.
        gevent.joinall([flusher for flusher in self._flushers.values() if flusher is not None],
                       timeout=FLUSH_JOIN_SECONDS)

    def _add(self, kind: str, entry: BatchEntry) -> None:
        pending = self._pending[kind]
        pending.append(entry)
        if len(pending) >= 10:
            self._is_full[kind].set()
        if self._flushers[kind] is None:
            self._flushers[kind] = gevent.spawn(self._flush_loop, kind)

    def _flush_loop(self, kind: str) -> None:
        """Send full batches at once and a partial one after FLUSH_DELAY_SECONDS, so a busy queue
        pays one call per 10 messages and a quiet one waits only that long."""
        pending = self._pending[kind]
        while pending:
            if len(pending) < 10 and not self._is_draining:
                self._is_full[kind].clear()
                self._is_full[kind].wait(FLUSH_DELAY_SECONDS)
            chunk = [entry for entry in pending[:10] if not (entry.is_heartbeat and entry.message.settled)]
            del pending[:10]
            if chunk:
                # One call at a time per queue and kind: visibility changes of one message must land
                # in order, and moto loses deletes that race on one queue.
                self._send_chunk(kind, chunk)
        self._flushers[kind] = None

    def _send_chunk(self, kind: str, chunk: list[BatchEntry]) -> None:
        # Entry ids are the positions "0".."9": duplicates would fail the whole call.
        for attempt in range(3):
            try:
                response = self._call(kind, chunk)
            except AWS_ERRORS as error:
                text = describe_error(error)
                for entry in chunk:
                    text = text.replace(entry.message.receipt_handle, "<receipt handle>")
                logger.warning("queue=%s %s batch of %d failed (attempt %d): %s",
                               self.name, kind, len(chunk), attempt + 1, text)
                if is_sender_fault(error):
                    break  # the same request would fail the same way
                gevent.sleep(0.2 * 2**attempt)
                continue
            retry = self._report_failures(kind, chunk, response.get("Failed", []))
            if not retry:
                return
            chunk = retry
        logger.error("queue=%s gave up on %s of %d messages; SQS will make them visible again",
                     self.name, kind, len(chunk))

    def _call(self, kind: str, chunk: list[BatchEntry]) -> dict[str, Any]:
        self.count(self.name, "SqsRequests")
        if kind == "delete":
            handles = [{"Id": str(i), "ReceiptHandle": e.message.receipt_handle} for i, e in enumerate(chunk)]
            return dict(self.hot.delete_message_batch(QueueUrl=self.url, Entries=handles))
        entries: list[dict[str, Any]] = [
            {"Id": str(i), "ReceiptHandle": e.message.receipt_handle, "VisibilityTimeout": e.visibility_timeout_seconds}
            for i, e in enumerate(chunk)
        ]
        return dict(self.hot.change_message_visibility_batch(QueueUrl=self.url, Entries=entries))

    def _report_failures(self, kind: str, chunk: list[BatchEntry], failed: list[dict[str, Any]]) -> list[BatchEntry]:
        """Log and count partial failures; return the entries worth one more try."""
        retry: list[BatchEntry] = []
        for failure in failed:
            entry = chunk[int(failure["Id"])]
            code = str(failure.get("Code", ""))
            if code.endswith(STALE_HANDLE_CODES):
                self.count(self.name, "StaleReceipts")
                logger.info("queue=%s message=%s %s: stale receipt handle (%s)",
                            self.name, entry.message.message_id, kind, code)
            elif not failure.get("SenderFault", False):
                retry.append(entry)
            else:
                # SQS quotes the receipt handle in some of these messages; handles stay out of the log.
                text = str(failure.get("Message", "")).replace(entry.message.receipt_handle, "<receipt handle>")
                logger.warning("queue=%s message=%s %s failed: %s %s", self.name,
                               entry.message.message_id, kind, code, text)
        return retry


def is_sender_fault(error: BaseException) -> bool:
    """A 4xx other than throttling: our request is wrong, and repeating it cannot help."""
    if not isinstance(error, botocore.exceptions.ClientError):
        return False
    status = int(error.response.get("ResponseMetadata", {}).get("HTTPStatusCode", 500))
    return 400 <= status < 500 and status != 429 and "Throttl" not in error_code(error)
