"""A model of SQS for the explorer: standard and FIFO queues, visibility timeouts, receive counts, long polls,
redrive policies (maxReceiveCount, moved on the receive after it, as SQS and moto do) and FIFO groups (a
group with a message in flight hands out nothing; a receive may take several of one group, in order).

It keeps every message it ever held and logs every change (`events`), so a test knows exactly what was
received, deleted, moved or made visible, and when. The HTTP side is `sqs_server.py`. Deliberate choices
where SQS leaves room: a standard queue hands out its oldest visible messages first; a delete with an old
receipt handle still deletes (SQS: "succeeds, but the message might not be deleted"); a visibility change
with an old handle fails (ReceiptHandleIsInvalid), and on a message no longer in flight, MessageNotInflight.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import time
import uuid
from dataclasses import dataclass, field
from typing import Any

import gevent
import gevent.event

ACCOUNT = "000000000000"
REGION = "us-east-1"


class SqsError(Exception):
    """An error answer, `code` as SQS names it."""

    def __init__(self, code: str, message: str, status: int = 400) -> None:
        super().__init__(message)
        self.code = code
        self.status = status


@dataclass(frozen=True)
class SqsEvent:
    at: float  # time.monotonic()
    kind: str  # send | receive | delete | visibility | moved | refused
    queue: str
    message_id: str
    handle: str = ""
    seconds: int | None = None  # a visibility change's
    stale: bool = False  # a delete with an older receipt handle than the latest
    detail: str = ""


@dataclass(eq=False)
class Stored:
    message_id: str
    body: str
    attributes: dict[str, Any]  # MessageAttributes as the JSON protocol carries them
    group: str | None
    dedup: str | None
    sequence: int
    sent_at_ms: int
    receive_count: int = 0
    first_received_ms: int = 0
    visible_at: float = 0.0  # time.monotonic() from which it may be handed out
    handle: str = ""  # the latest receipt handle
    gone: bool = False  # deleted or moved

    def as_received(self) -> dict[str, Any]:
        attributes = {"SenderId": "AIDAEXPLORER", "SentTimestamp": str(self.sent_at_ms),
                      "ApproximateReceiveCount": str(self.receive_count),
                      "ApproximateFirstReceiveTimestamp": str(self.first_received_ms)}
        if self.group is not None:
            attributes.update(MessageGroupId=self.group, MessageDeduplicationId=self.dedup or "",
                              SequenceNumber=str(self.sequence))
        message = {"MessageId": self.message_id, "ReceiptHandle": self.handle, "Body": self.body,
                   "MD5OfBody": hashlib.md5(self.body.encode()).hexdigest(), "Attributes": attributes}
        if self.attributes:
            message["MessageAttributes"] = self.attributes
        return message


@dataclass(eq=False)
class ModelQueue:
    name: str
    url: str
    redrive: tuple[str, int] | None = None  # dead-letter queue name, maxReceiveCount
    messages: list[Stored] = field(default_factory=list)  # every message, in the order sent
    dedup_ids: set[str] = field(default_factory=set)
    wake: gevent.event.Event = field(default_factory=gevent.event.Event)

    @property
    def is_fifo(self) -> bool:
        return self.name.endswith(".fifo")

    @property
    def arn(self) -> str:
        return f"arn:aws:sqs:{REGION}:{ACCOUNT}:{self.name}"

    def changed(self) -> None:
        """Wake the long polls waiting on this queue."""
        woken, self.wake = self.wake, gevent.event.Event()
        woken.set()

    def live(self) -> list[Stored]:
        return [message for message in self.messages if not message.gone]


class SqsModel:
    def __init__(self, endpoint: str) -> None:
        self.endpoint = endpoint
        self.queues: dict[str, ModelQueue] = {}
        self.by_handle: dict[str, tuple[ModelQueue, Stored]] = {}
        self.events: list[SqsEvent] = []
        self.sequence = itertools.count(1)

    def note(self, kind: str, queue: ModelQueue, message: Stored, **detail: Any) -> None:
        self.events.append(SqsEvent(time.monotonic(), kind, queue.name, message.message_id, **detail))

    def create_queue(self, name: str, redrive: tuple[str, int] | None = None) -> ModelQueue:
        queue = ModelQueue(name, f"{self.endpoint}/{ACCOUNT}/{name}", redrive)
        self.queues[name] = queue
        return queue

    def queue(self, url_or_name: str) -> ModelQueue:
        queue = self.queues.get(url_or_name.rstrip("/").rsplit("/", 1)[-1])
        if queue is None:
            raise SqsError("AWS.SimpleQueueService.NonExistentQueue", "The specified queue does not exist.")
        return queue

    def send(self, queue: ModelQueue, body: str, attributes: dict[str, Any] | None = None,
             group: str | None = None, dedup: str | None = None) -> str:
        if queue.is_fifo and not group:
            raise SqsError("MissingParameter", "The request must contain the parameter MessageGroupId.")
        message_id = str(uuid.uuid4())
        if queue.is_fifo:
            dedup = dedup or hashlib.sha256(body.encode()).hexdigest()
            if dedup in queue.dedup_ids:  # accepted, not enqueued (SQS's 5-minute deduplication)
                return message_id
            queue.dedup_ids.add(dedup)
        stored = Stored(message_id, body, dict(attributes or {}), group if queue.is_fifo else None, dedup,
                        next(self.sequence), int(time.time() * 1000))
        queue.messages.append(stored)
        self.note("send", queue, stored)
        queue.changed()
        return message_id

    def receive(self, queue: ModelQueue, count: int, wait_seconds: float, visibility: int) -> list[Stored]:
        """Up to `count` messages, waiting up to `wait_seconds` for one (a long poll)."""
        deadline = time.monotonic() + wait_seconds
        while True:
            wake = queue.wake
            taken = self.take(queue, count, visibility)
            now = time.monotonic()
            if taken or now >= deadline:
                return taken
            hidden = [m.visible_at for m in queue.live() if m.visible_at > now]
            wake.wait(min([deadline - now, *(at - now + 0.001 for at in hidden)]))

    def take(self, queue: ModelQueue, count: int, visibility: int) -> list[Stored]:
        now = time.monotonic()
        live = queue.live()
        busy_groups = {m.group for m in live if m.group is not None and m.visible_at > now}
        taken: list[Stored] = []
        for message in live:
            if len(taken) >= count:
                break
            if message.visible_at > now or (message.group is not None and message.group in busy_groups):
                continue
            if queue.redrive is not None and message.receive_count >= queue.redrive[1]:
                self.move(queue, message)
                continue
            message.receive_count += 1
            message.first_received_ms = message.first_received_ms or int(time.time() * 1000)
            message.handle = f"{message.message_id}#{message.receive_count}#{uuid.uuid4().hex[:8]}"
            message.visible_at = now + visibility
            self.by_handle[message.handle] = (queue, message)
            self.note("receive", queue, message, handle=message.handle, seconds=visibility)
            taken.append(message)
        return taken

    def move(self, queue: ModelQueue, message: Stored) -> None:
        """The redrive policy: to the dead-letter queue, with its id, body and attributes."""
        assert queue.redrive is not None
        target = self.queue(queue.redrive[0])
        message.gone = True
        self.note("moved", queue, message, detail=target.name)
        target.messages.append(Stored(message.message_id, message.body, message.attributes, message.group,
                                      message.dedup, next(self.sequence), message.sent_at_ms))
        target.changed()

    def delete(self, queue: ModelQueue, handle: str) -> None:
        found = self.by_handle.get(handle)
        if found is None or found[0] is not queue:
            raise SqsError("ReceiptHandleIsInvalid", f"The input receipt handle \"{handle}\" is not valid.")
        message = found[1]
        if message.gone:
            return  # deleting again succeeds
        message.gone = True
        self.note("delete", queue, message, handle=handle, stale=handle != message.handle)
        queue.changed()

    def change_visibility(self, queue: ModelQueue, handle: str, seconds: int) -> None:
        found = self.by_handle.get(handle)
        if found is None or found[0] is not queue or found[1].gone or handle != found[1].handle:
            raise SqsError("ReceiptHandleIsInvalid", f"The input receipt handle \"{handle}\" is not valid.")
        message = found[1]
        if message.visible_at <= time.monotonic():
            self.note("refused", queue, message, handle=handle, seconds=seconds, detail="MessageNotInflight")
            raise SqsError("AWS.SimpleQueueService.MessageNotInflight", "The message is not in flight.")
        message.visible_at = time.monotonic() + seconds
        self.note("visibility", queue, message, handle=handle, seconds=seconds)
        queue.changed()

    def attributes(self, queue: ModelQueue, names: list[str]) -> dict[str, str]:
        everything = {"QueueArn": queue.arn, "VisibilityTimeout": "30",
                      "ApproximateNumberOfMessages": str(sum(1 for m in queue.live()
                                                             if m.visible_at <= time.monotonic())),
                      "ApproximateNumberOfMessagesNotVisible": str(sum(1 for m in queue.live()
                                                                       if m.visible_at > time.monotonic()))}
        if queue.redrive is not None:
            target = self.queue(queue.redrive[0])
            everything["RedrivePolicy"] = json.dumps({"deadLetterTargetArn": target.arn,
                                                      "maxReceiveCount": queue.redrive[1]})
        if queue.is_fifo:
            everything["FifoQueue"] = "true"
        wanted = set(names)
        return {name: value for name, value in everything.items() if "All" in wanted or name in wanted}
