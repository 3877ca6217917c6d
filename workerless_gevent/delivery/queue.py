"""SQS calls for one queue: receive, and deletes and visibility changes coalesced into batches."""

from __future__ import annotations

import logging
import random
import time
from collections.abc import Callable
from typing import Any, Protocol

import botocore.exceptions
import gevent

from ..config.model import QueueConfig
from ..errors import error_code
from ..logs import fields
from ..message import Message
from ..rules import THROTTLE_CODES
from .batch_failures import BatchEntry
from .batching import Batcher

logger = logging.getLogger(__name__)

DELETES_IN_FLIGHT = 32  # enough for 3,200 deletes a second per queue at a 100 ms round trip


class SqsCalls(Protocol):
    """The SQS calls a queue makes, as `wire.sqs.SqsWire` and `aws.clients.BotocoreSqs` take them: a batch
    call is not retried past its `deadline` (time.monotonic())."""

    def receive_message(self, *, QueueUrl: str, MaxNumberOfMessages: int, WaitTimeSeconds: int,
                        VisibilityTimeout: int, MessageSystemAttributeNames: list[str],
                        MessageAttributeNames: list[str]) -> dict[str, Any]: ...

    def delete_message_batch(self, *, QueueUrl: str, Entries: list[dict[str, Any]],
                             deadline: float | None = None) -> dict[str, Any]: ...

    def change_message_visibility_batch(self, *, QueueUrl: str, Entries: list[dict[str, Any]],
                                        deadline: float | None = None) -> dict[str, Any]: ...

    def send_message(self, *, QueueUrl: str, MessageBody: str, MessageAttributes: dict[str, Any],
                     **optional: Any) -> dict[str, Any]: ...


class SqsQueue:
    """A resolved queue and its two coalescing batchers (deletes, visibility changes)."""

    def __init__(self, sqs: SqsCalls, config: QueueConfig, url: str, arn: str, count: Callable[[str, str], None],
                 rng: random.Random | None = None) -> None:
        # every call (receive, batches, send): `aws.clients.Clients.sqs`, the wire or botocore's client
        # behind the same calls (aws.clients.BotocoreSqs), as production builds it
        self.hot = sqs
        self.config = config
        self.name = config.name
        self.url = url
        self.arn = arn
        self.count = count
        self.has_redrive_policy = False
        rng = rng or random.Random()
        # Deletes go out several at once; visibility changes one call at a time, so that the changes of
        # one message land in the order they were made.
        self.batchers = {"delete": Batcher(self.name, "delete", self._delete_batch, count, rng,
                                           max_in_flight=DELETES_IN_FLIGHT),
                         "visibility": Batcher(self.name, "visibility", self._change_visibility_batch, count, rng)}

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
        raw_messages = response.get("Messages") or []
        if not isinstance(raw_messages, list):
            raise botocore.exceptions.HTTPClientError(error=f"ReceiveMessage answer: Messages is not a list: "
                                                            f"{raw_messages!r:.100}")
        messages = []
        for raw in raw_messages:
            try:
                messages.append(Message.from_sqs(self.name, raw, received_at, visible_until))
            except (KeyError, TypeError, ValueError, AttributeError) as error:
                # It stays invisible for the visibility timeout, then SQS hands it out again.
                logger.warning("queue=%s received a message we cannot read (%s: %s); skipped: %r",
                               self.name, type(error).__name__, error, raw if not isinstance(raw, dict)
                               else {key: raw[key] for key in raw if key != "ReceiptHandle"},
                               extra=fields(queue=self.name, outcome="unreadable"))
        return messages

    def delete(self, message: Message) -> None:
        self.batchers["delete"].add(BatchEntry(message, None, message.visible_until))

    def change_visibility(self, message: Message, seconds: int, is_heartbeat: bool = False) -> None:
        """Queue a visibility change; retried until the message's current visibility runs out. A heartbeat's
        is dropped once the message is settled (`outcomes.Settler` marks that)."""
        self.batchers["visibility"].add(BatchEntry(message, seconds, message.visible_until, is_heartbeat))

    def send(self, body: str, attributes: dict[str, Any], **extra: Any) -> None:
        self.count(self.name, "SqsRequests")
        self.hot.send_message(QueueUrl=self.url, MessageBody=body, MessageAttributes=attributes, **extra)

    def pending_count(self) -> int:
        return sum(batcher.left() for batcher in self.batchers.values())

    def drain(self) -> list[gevent.Greenlet]:
        """At stop: send everything pending without waiting for fuller batches; the flushers to wait for."""
        return [flusher for flusher in (batcher.drain() for batcher in self.batchers.values()) if flusher is not None]

    def flush(self, timeout_seconds: float) -> None:
        """At stop: send everything pending, and wait for it up to `timeout_seconds` (what remains of the stop's
        deadline); what SQS has not acknowledged then is named, message by message."""
        # Never killed mid-call: that would drop the batch it took.
        gevent.joinall(self.drain(), timeout=timeout_seconds)
        for kind, batcher in self.batchers.items():
            batcher.given_up.log(force=True)  # a flusher still waiting on an outage has not said them yet
            unanswered = batcher.on_their_way()
            if left := [*batcher.unsent(), *unanswered]:
                ids = ",".join(entry.message.message_id for entry in left)
                logger.error("queue=%s %d %s changes not acknowledged by SQS at stop (%d of them in calls still "
                             "unanswered); SQS delivers those messages again once their visibility timeout ends, "
                             "unless a call on its way lands: %s", self.name, len(left), kind, len(unanswered), ids,
                             extra=fields(queue=self.name, batch=kind))

    def _delete_batch(self, chunk: list[BatchEntry], retry_until: float) -> dict[str, Any]:
        # Entry ids are the positions "0".."9": duplicates would fail the whole call.
        handles = [{"Id": str(i), "ReceiptHandle": e.message.receipt_handle} for i, e in enumerate(chunk)]
        return dict(self.hot.delete_message_batch(QueueUrl=self.url, Entries=handles, deadline=retry_until))

    def _change_visibility_batch(self, chunk: list[BatchEntry], retry_until: float) -> dict[str, Any]:
        entries: list[dict[str, Any]] = [
            {"Id": str(i), "ReceiptHandle": e.message.receipt_handle, "VisibilityTimeout": e.visibility_timeout_seconds}
            for i, e in enumerate(chunk)
        ]
        return dict(self.hot.change_message_visibility_batch(QueueUrl=self.url, Entries=entries, deadline=retry_until))


def is_sender_fault(error: BaseException) -> bool:
    """A 4xx other than throttling: our request is wrong, and repeating it cannot help."""
    if not isinstance(error, botocore.exceptions.ClientError):
        return False
    status = int(error.response.get("ResponseMetadata", {}).get("HTTPStatusCode", 500))
    return 400 <= status < 500 and status != 429 and not error_code(error).endswith(THROTTLE_CODES)
