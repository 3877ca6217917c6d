"""One batch of `redrive` on its way: received, its destinations checked, sent per destination, then deleted;
on a failure for good, what was sent is deleted and the rest made visible again (RedriveFailed says where
each message was left). A message is deleted only once SendMessageBatch acknowledged its copy."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..errors import AWS_ERRORS, describe_error
from .entries import send_entry, source_of
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
    """Batches whose send or delete failed for good (exit 1): the first problem of each kind, and which
    messages were left in the dead-letter queue (`left`) or are in both queues (`doubled`)."""

    def __init__(self, queue: str, send_problem: str = "", left: Sequence[str] = (), delete_problem: str = "",
                 doubled: Sequence[str] = ()) -> None:
        self.queue, self.send_problem, self.left = queue, send_problem, list(left)
        self.delete_problem, self.doubled = delete_problem, list(doubled)
        super().__init__(self.line())

    def line(self) -> str:
        parts = []
        if self.send_problem:
            parts.append(f"{self.send_problem}; left in {self.queue}: {len(self.left)} messages "
                         f"({', '.join(self.left)})")
        if self.doubled:
            parts.append(f"sent but cannot delete from {self.queue}: {self.delete_problem}; {len(self.doubled)} "
                         f"messages are in both queues and a later redrive sends them again ({', '.join(self.doubled)})")
        return "; ".join(parts)


def combined(failures: Sequence[Exception]) -> Exception:
    """The run's one error: the first worker's, or, if that is a failed batch, every failed batch's messages."""
    batches = [failure for failure in failures if isinstance(failure, RedriveFailed)]
    if not isinstance(failures[0], RedriveFailed) or len(batches) == 1:
        return failures[0]
    return RedriveFailed(batches[0].queue, next((b.send_problem for b in batches if b.send_problem), ""),
                         [i for b in batches for i in b.left],
                         next((b.delete_problem for b in batches if b.delete_problem), ""),
                         [i for b in batches for i in b.doubled])


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


def ids_of(messages: list[dict[str, Any]]) -> list[str]:
    return [message["MessageId"] for message in messages]


def first_problem(failed: list[dict[str, Any]]) -> str:
    return "; ".join(f"{item.get('Code')}: {item.get('Message', '')}" for item in failed[:1])


class BatchMover:
    """The calls of one run's batches, on the dead-letter queue `url`; any number of batches at once."""

    def __init__(self, sqs: Any, url: str, name: str, to: str | None, clock: Callable[[], float],
                 sleep: Callable[[float], None]) -> None:
        self.sqs, self.url, self.name, self.to = sqs, url, name, to
        self.clock, self.sleep = clock, sleep
        self.urls: dict[str, str] = {}  # destination name -> URL
        self.tally = Tally()

    def receive(self, size: int) -> Batch:
        response = self.sqs.receive_message(QueueUrl=self.url, MaxNumberOfMessages=size, WaitTimeSeconds=WAIT_SECONDS,
                                            VisibilityTimeout=VISIBILITY_SECONDS, **RECEIVE_OPTIONS)
        return Batch(response.get("Messages", []), self.clock() + VISIBILITY_SECONDS)

    def destination(self, message: dict[str, Any]) -> str | None:
        return self.to or source_of(message)

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

    def send(self, batch: Batch) -> list[dict[str, Any]]:
        """The messages whose copies SQS acknowledged, per destination in the order received; on a failure for
        good, the rest is released, what was sent deleted, and RedriveFailed says which stayed where."""
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
                left = [message for message in batch.messages if message not in sent]
                self.release(left)
                failure = RedriveFailed(self.name, f"cannot send to {name}: {problem}", ids_of(left))
                try:
                    self.delete(batch, sent)
                except RedriveFailed as also:
                    raise combined([failure, also]) from None
                raise failure
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
            problem = first_problem(failed)
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
            problem = first_problem(response.get("Failed", []))
            if not pending:
                return
            self.sleep(ENTRY_RETRY_SECONDS * 2 ** attempt)
        raise RedriveFailed(self.name, delete_problem=problem, doubled=ids_of(list(pending.values())))

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
