"""Between taking work and handing it to the target: what the target sees of each message. An SNS
envelope is unwrapped (`sns = "unwrap"`), the extended clients' S3 payload is fetched (`large_payloads`),
and after a successful delivery that payload is deleted (`delete_payloads`). A payload that cannot be
fetched is that message's failure, retried and dead-lettered like any other; on a FIFO queue the rest of
its group is released behind it, undelivered. A queue with neither setting pays one check per delivery,
and gets no `Prepared`."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import gevent

from ..config.model import QueueConfig
from ..envelopes import InvalidPointer, PayloadPointer, payload_pointer, unwrap_sns, with_payload
from ..errors import AWS_ERRORS, describe_error, error_code
from ..logs import fields
from ..message import Message
from ..metrics import Registry
from ..targets import RELEASED, Outcome, QueueInfo, Target, release_behind_failures

logger = logging.getLogger(__name__)

S3_CALL_SECONDS = 60  # one fetch or delete at most, retries included (the client's own timeouts are shorter)
MISSING_CODES = ("NoSuchKey", "NoSuchBucket", "404", "NotFound")


class PayloadError(Exception):
    def __init__(self, error_type: str, error: str) -> None:
        super().__init__(error)
        self.outcome = Outcome.failure(error_type, error)


class PayloadStore:
    """The S3 side of large payloads, on a botocore client: cooperative under gevent, never blocking the hub."""

    def __init__(self, s3: Any) -> None:
        self.s3 = s3

    def fetch(self, pointer: PayloadPointer) -> str:
        where = f"s3://{pointer.bucket}/{pointer.key}"
        try:
            with gevent.Timeout(S3_CALL_SECONDS, TimeoutError):
                data = self.s3.get_object(Bucket=pointer.bucket, Key=pointer.key)["Body"].read()
        except TimeoutError:
            raise PayloadError("PayloadTimeout", f"no payload from {where} within {S3_CALL_SECONDS}s") from None
        except AWS_ERRORS as error:
            if error_code(error).endswith(MISSING_CODES):
                raise PayloadError("PayloadNotFound", f"{where}: {describe_error(error)}") from None
            raise PayloadError("PayloadFetchFailed", f"{where}: {describe_error(error)}") from None
        except OSError as error:  # a connection dropped while the body was read
            raise PayloadError("PayloadFetchFailed", f"{where}: {describe_error(error)}") from None
        try:
            return bytes(data).decode("utf-8")
        except UnicodeDecodeError:
            raise PayloadError("InvalidPayload", f"{where} is not UTF-8 text, so it cannot be a message body") from None

    def delete(self, pointer: PayloadPointer) -> None:
        with gevent.Timeout(S3_CALL_SECONDS, TimeoutError):
            self.s3.delete_object(Bucket=pointer.bucket, Key=pointer.key)


@dataclass
class Prepared:
    """A work's messages as the target will see them: each a Message to deliver, or already an Outcome."""

    items: list[Message | Outcome]
    pointers: list[PayloadPointer | None] = field(default_factory=list)  # with delete_payloads, per message
    groups: list[str | None] = field(default_factory=list)  # a FIFO queue's: each message's group

    def messages(self) -> list[Message]:
        """What the target gets."""
        return [item for item in self.items if isinstance(item, Message)]

    def deliver(self, target: Target, queue: QueueInfo) -> list[Outcome]:
        """The target's outcomes for the messages it got, the preparation's for the others, in order."""
        ready = [item for item in self.items if isinstance(item, Message)]
        if len(ready) == len(self.items):
            return target.deliver(queue, ready)
        answers = iter(target.deliver(queue, ready) if ready else [])
        outcomes = [next(answers) if isinstance(item, Message) else item for item in self.items]
        # FIFO: what the target failed puts what follows it in its group behind it, a failed fetch included
        return release_behind_failures(outcomes, self.groups) if self.groups else outcomes


class Preparer:
    def __init__(self, store: PayloadStore | None, registry: Registry) -> None:
        self.store = store  # None unless some queue has large_payloads
        self.registry = registry
        self.warned: set[str] = set()  # queues whose first non-SNS body was logged

    def prepare(self, config: QueueConfig, messages: list[Message]) -> Prepared | None:
        """None when the queue has nothing to prepare: the target gets the work's messages as they are."""
        if config.sns != "unwrap" and not config.large_payloads:
            return None
        unwrapped = [self.unwrap(config, message) for message in messages] if config.sns == "unwrap" else messages
        if not config.large_payloads:
            return Prepared(list(unwrapped))
        pointers, items = self.resolve(config, unwrapped)
        groups = [message.fifo_group for message in messages] if config.is_fifo else []
        return Prepared(items, pointers if config.delete_payloads else [], groups)

    def unwrap(self, config: QueueConfig, message: Message) -> Message:
        inner = unwrap_sns(message)
        if inner is not None:
            return inner
        self.registry.count(config.name, "NotSnsEnvelope")
        if config.name not in self.warned:
            self.warned.add(config.name)
            logger.warning("queue=%s message=%s is not an SNS envelope though sns = \"unwrap\"; delivered as it is "
                           "(logged once per queue, counted as NotSnsEnvelope)", config.name, message.message_id,
                           extra=fields(queue=config.name, message_id=message.message_id))
        return message

    def resolve(self, config: QueueConfig, messages: Sequence[Message]
                ) -> tuple[list[PayloadPointer | None], list[Message | Outcome]]:
        """Fetch every payload of the work at once; in a FIFO queue the rest of a group is released behind a
        message whose payload could not be had, so nothing of a group is delivered past a message that was not."""
        pointers: list[PayloadPointer | None] = []
        fetches: list[gevent.Greenlet | Outcome | None] = []
        for message in messages:
            try:
                pointer = payload_pointer(message)
            except InvalidPointer as error:
                pointers.append(None)
                fetches.append(Outcome.failure("InvalidPayloadPointer", str(error)))
                continue
            pointers.append(pointer)
            fetches.append(None if pointer is None else gevent.spawn(self.fetch, pointer))
        gevent.joinall([fetch for fetch in fetches if isinstance(fetch, gevent.Greenlet)])
        items: list[Message | Outcome] = []
        failed_groups: set[str] = set()
        for message, fetch in zip(messages, fetches):
            item: Message | Outcome = message
            if isinstance(fetch, gevent.Greenlet):
                item = fetch.get()
                item = with_payload(message, item) if isinstance(item, str) else item
            elif isinstance(fetch, Outcome):
                item = fetch
            group = message.fifo_group
            if group is not None and group in failed_groups:
                item = RELEASED
            elif group is not None and isinstance(item, Outcome):
                failed_groups.add(group)
            items.append(item)
        return pointers, items

    def fetch(self, pointer: PayloadPointer) -> str | Outcome:
        if self.store is None:  # build_clients makes the store for every queue with large_payloads
            return Outcome.failure("PayloadFetchFailed", "no S3 client was built for large payloads")
        try:
            return self.store.fetch(pointer)
        except PayloadError as error:
            return error.outcome

    def finish(self, config: QueueConfig, prepared: Prepared, outcomes: list[Outcome]) -> None:
        """delete_payloads: the objects of the messages delivered successfully; never of a failed one."""
        for pointer, outcome in zip(prepared.pointers, outcomes):
            if pointer is None or not outcome.is_success or self.store is None:
                continue
            try:
                self.store.delete(pointer)
            except (*AWS_ERRORS, OSError, TimeoutError) as error:
                logger.warning("queue=%s could not delete the payload s3://%s/%s after its delivery (it stays "
                               "in S3): %s", config.name, pointer.bucket, pointer.key, describe_error(error),
                               extra=fields(queue=config.name))
