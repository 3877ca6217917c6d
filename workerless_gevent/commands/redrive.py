"""`workerless redrive`: a dead-letter queue's messages back where they came from, in batches of up to
10: receive, SendMessageBatch per destination, then DeleteMessageBatch of what was sent. A message is
deleted only once its copy is acknowledged, so a crash or Ctrl-C can duplicate the batch in hand (it
comes back after its visibility timeout and a later run sends it again) and never lose one."""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from ..errors import AWS_ERRORS, describe_error
from .entries import FIFO_SUFFIX, send_entry, source_of
from .progress import Progress
from .queues import queue_name, queue_url

# A received batch stays invisible this long: room for the send and the delete with every retry
# (5 attempts, backoff capped at 20 s, 30 s reads); renewed before a call if less than RENEW_BELOW is left.
VISIBILITY_SECONDS = 300
RENEW_BELOW_SECONDS = 150
WAIT_SECONDS = 1  # a long poll asks every SQS server: an empty answer means the queue is empty
ENTRY_ATTEMPTS = 3  # per-entry `Failed` results SQS does not blame on the sender are sent again
ENTRY_RETRY_SECONDS = 0.5
RECEIVE_OPTIONS = {"MessageAttributeNames": ["All"], "MessageSystemAttributeNames": ["All"]}


class MissingDestination(Exception):
    """A message without `workerless.source_queue` and no --to: a usage error (exit 2)."""


class RedriveFailed(Exception):
    """A send or delete that failed for good; the text names what was left where (exit 1)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class RedriveRequest:
    dead_letter_queue: str  # a name or URL, as given
    to: str | None = None  # every message goes here, whatever its source
    max_messages: int | None = None
    rate: float | None = None  # messages per second


@dataclass(slots=True)
class Batch:
    messages: list[dict[str, Any]]
    visible_at: float  # monotonic time when SQS hands them out again


@dataclass(slots=True)
class Tally:
    moved: Counter[str] = field(default_factory=Counter)  # destination -> messages moved

    @property
    def count(self) -> int:
        return sum(self.moved.values())


class Redrive:
    """One run; `run` moves until the queue is empty or --max is reached, or raises."""

    def __init__(self, sqs: Any, request: RedriveRequest, progress: Progress,
                 clock: Callable[[], float] = time.monotonic, sleep: Callable[[float], None] = time.sleep) -> None:
        self.sqs, self.request, self.progress = sqs, request, progress
        self.clock, self.sleep = clock, sleep
        self.url = queue_url(sqs, request.dead_letter_queue)
        self.name = queue_name(request.dead_letter_queue)
        self.urls: dict[str, str] = {}  # destination name -> URL
        self.tally = Tally()
        self.started = clock()

    def run(self) -> Tally:
        while (size := self.next_size()) > 0:
            batch = self.receive(size)
            if not batch.messages:
                break
            self.check_destinations(batch)
            self.pace(len(batch.messages))
            sent = self.send(batch)
            self.delete(batch, sent)
            self.progress.advance(len(sent))
        return self.tally

    def next_size(self) -> int:
        left = 10 if self.request.max_messages is None else self.request.max_messages - self.tally.count
        if self.request.rate is not None:  # a batch is at most a second's worth, so pacing stays smooth
            left = min(left, max(1, int(self.request.rate)))
        return max(0, min(10, left))

    def receive(self, size: int) -> Batch:
        response = self.sqs.receive_message(QueueUrl=self.url, MaxNumberOfMessages=size, WaitTimeSeconds=WAIT_SECONDS,
                                            VisibilityTimeout=VISIBILITY_SECONDS, **RECEIVE_OPTIONS)
        return Batch(response.get("Messages", []), self.clock() + VISIBILITY_SECONDS)

    def destination(self, message: dict[str, Any]) -> str | None:
        return self.request.to or source_of(message)

    def check_destinations(self, batch: Batch) -> None:
        """Every message of the batch has somewhere to go, else the batch goes back untouched (visible at once)."""
        lacking = [message["MessageId"] for message in batch.messages if self.destination(message) is None]
        if lacking:
            self.release(batch.messages)
            raise MissingDestination(lacking[0])
        try:
            for message in batch.messages:
                name = queue_name(self.destination(message) or "")
                if name not in self.urls:
                    self.urls[name] = queue_url(self.sqs, self.destination(message) or "")
        except AWS_ERRORS:  # a source queue that is gone: the batch stays where it is
            self.release(batch.messages)
            raise

    def pace(self, count: int) -> None:
        """With --rate, wait until sending `count` more keeps the run at that many messages per second."""
        if self.request.rate is not None:
            self.sleep(max(0.0, self.started + (self.tally.count + count) / self.request.rate - self.clock()))

    def send(self, batch: Batch) -> list[dict[str, Any]]:
        """The messages whose copies SQS acknowledged, per destination; on a failure for good, those are
        deleted, the rest released, and RedriveFailed says which stayed in the dead-letter queue."""
        self.keep_invisible(batch)
        groups: dict[str, list[dict[str, Any]]] = {}
        for message in batch.messages:
            groups.setdefault(queue_name(self.destination(message) or ""), []).append(message)
        sent: list[dict[str, Any]] = []
        for name, messages in groups.items():
            done, problem = self.send_to(name, messages)
            sent.extend(done)
            self.tally.moved[name] += len(done)
            if problem:
                self.delete(batch, sent)
                left = [message for message in batch.messages if message not in sent]
                self.release(left)
                ids = ", ".join(message["MessageId"] for message in left)
                raise RedriveFailed(f"cannot send to {name}: {problem}; left in {self.name}: {len(left)} "
                                    f"messages ({ids})")
        return sent

    def send_to(self, name: str, messages: list[dict[str, Any]]) -> tuple[list[dict[str, Any]], str]:
        """(messages sent, "" or the last error); per-entry failures retried unless they are the sender's fault."""
        entries = {str(index): send_entry(str(index), message, name) for index, message in enumerate(messages)}
        pending, problem = dict(entries), ""
        for attempt in range(ENTRY_ATTEMPTS):
            try:
                response = self.sqs.send_message_batch(QueueUrl=self.urls[name], Entries=list(pending.values()))
            except AWS_ERRORS as error:  # after botocore's own retries
                return [m for i, m in enumerate(messages) if str(i) not in pending], describe_error(error)
            for success in response.get("Successful", []):
                pending.pop(success["Id"], None)
            failed = response.get("Failed", [])
            problem = "; ".join(f"{item.get('Code')}: {item.get('Message', '')}" for item in failed[:1])
            if not pending or any(item.get("SenderFault") for item in failed):
                break
            self.sleep(ENTRY_RETRY_SECONDS * 2 ** attempt)
        return [m for i, m in enumerate(messages) if str(i) not in pending], problem if pending else ""

    def delete(self, batch: Batch, sent: list[dict[str, Any]]) -> None:
        """The sent messages out of the dead-letter queue; one that cannot be is named: it is in both queues."""
        if not sent:
            return
        self.keep_invisible(batch)
        pending = {str(index): message for index, message in enumerate(sent)}
        problem = ""
        for attempt in range(ENTRY_ATTEMPTS):
            entries = [{"Id": key, "ReceiptHandle": m["ReceiptHandle"]} for key, m in pending.items()]
            try:
                response = self.sqs.delete_message_batch(QueueUrl=self.url, Entries=entries)
            except AWS_ERRORS as error:
                problem = describe_error(error)
                break
            for success in response.get("Successful", []):
                pending.pop(success["Id"], None)
            problem = "; ".join(f"{item.get('Code')}: {item.get('Message', '')}" for item in response.get("Failed", [])[:1])
            if not pending:
                return
            self.sleep(ENTRY_RETRY_SECONDS * 2 ** attempt)
        ids = ", ".join(message["MessageId"] for message in pending.values())
        raise RedriveFailed(f"sent but cannot delete from {self.name}: {problem}; {len(pending)} messages are in "
                            f"both queues and a later redrive sends them again ({ids})")

    def keep_invisible(self, batch: Batch) -> None:
        """A batch whose send outlived most of its visibility gets the full timeout again before the next call."""
        if batch.visible_at - self.clock() >= RENEW_BELOW_SECONDS:
            return
        self.change_visibility(batch.messages, VISIBILITY_SECONDS)
        batch.visible_at = self.clock() + VISIBILITY_SECONDS

    def release(self, messages: list[dict[str, Any]]) -> None:
        """Messages left in the dead-letter queue are visible again at once; if that fails, after their timeout."""
        try:
            self.change_visibility(messages, 0)
        except AWS_ERRORS:
            pass  # they come back when their visibility timeout ends: nothing is lost

    def change_visibility(self, messages: list[dict[str, Any]], seconds: int) -> None:
        if messages:
            entries = [{"Id": str(index), "ReceiptHandle": message["ReceiptHandle"], "VisibilityTimeout": seconds}
                       for index, message in enumerate(messages)]
            self.sqs.change_message_visibility_batch(QueueUrl=self.url, Entries=entries)

    def peek(self, count: int) -> list[dict[str, Any]]:
        """--dry-run: up to `count` messages seen and left visible (visibility timeout 0): nothing moves."""
        response = self.sqs.receive_message(QueueUrl=self.url, MaxNumberOfMessages=max(1, min(10, count)),
                                            WaitTimeSeconds=WAIT_SECONDS, VisibilityTimeout=0, **RECEIVE_OPTIONS)
        return list(response.get("Messages", []))

    def approximate_total(self) -> int:
        attributes = self.sqs.get_queue_attributes(QueueUrl=self.url, AttributeNames=["ApproximateNumberOfMessages"])
        visible = int(attributes["Attributes"]["ApproximateNumberOfMessages"])
        return visible if self.request.max_messages is None else min(visible, self.request.max_messages)
