"""A received SQS message and the facts about it every part of the daemon needs."""

from __future__ import annotations

import functools
import time
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any

from .rules import is_fifo_queue


@dataclass(slots=True, kw_only=True, eq=False)
class Message:
    """One receive of one message; identity is the object, since a message may be received twice."""

    queue: str
    message_id: str
    receipt_handle: str
    body: str
    md5_of_body: str
    attributes: dict[str, str]
    message_attributes: dict[str, dict[str, Any]]
    received_at: float  # time.time() at receive
    visible_until: float  # monotonic deadline of the current visibility timeout
    settled: bool = field(default=False)
    idempotency_key: str | None = None  # its queue's idempotency_key, read at receive
    claim: str | None = None  # the token of its `in progress` claim in the idempotency table, while it holds one
    payload_hash: str | None = None  # validate_payload's digest, computed for its claim and kept for `completed`
    trace_headers: dict[str, str] | None = None  # [tracing]: the delivery span's context, for the app
    # The group FIFO's rules apply to: its MessageGroupId on a FIFO queue, None on a standard one, where the
    # group (a fair queue's tenant) orders and serialises nothing. Decided here, once, by the queue's kind.
    fifo_group: str | None = None

    @classmethod
    def from_sqs(cls, queue: str, raw: dict[str, Any], received_at: float, visible_until: float) -> Message:
        if "Unreadable" in raw:  # marked by the wire: a member it could not parse
            raise ValueError(raw["Unreadable"])
        attributes = dict(raw.get("Attributes", {}))
        return cls(
            queue=queue,
            message_id=raw["MessageId"],
            receipt_handle=raw["ReceiptHandle"],
            body=raw.get("Body", ""),
            md5_of_body=raw.get("MD5OfBody", ""),
            attributes=attributes,
            message_attributes=dict(raw.get("MessageAttributes", {})),
            received_at=received_at,
            visible_until=visible_until,
            fifo_group=attributes.get("MessageGroupId") if is_fifo_queue(queue) else None,
        )

    @property
    def receive_count(self) -> int:
        return int(self.attributes.get("ApproximateReceiveCount", "1"))

    @property
    def sent_at(self) -> float | None:
        """Seconds since the epoch at which SQS accepted the message, if it told us."""
        value = self.attributes.get("SentTimestamp")
        return int(value) / 1000.0 if value and value.isdigit() else None

    @property
    def group_id(self) -> str | None:
        """Its MessageGroupId on any queue: a FIFO group, or a fair queue's tenant (see `fifo_group`)."""
        return self.attributes.get("MessageGroupId")

    def string_attribute(self, name: str) -> str | None:
        value = self.message_attributes.get(name)
        if value and value.get("DataType", "").split(".")[0] in ("String", "Number"):
            text = value.get("StringValue")
            return text if isinstance(text, str) else None
        return None


LAST_DATETIME_SECOND = 253402300799  # 9999-12-31T23:59:59Z


@functools.lru_cache(maxsize=1024)
def iso_utc(epoch_ms: str | None) -> str:
    """SQS epoch-milliseconds strings -> ISO 8601 UTC with a Z, as aws-sqsd sends them. Cached: a receive's
    messages mostly share their first receive's millisecond, and a SendMessageBatch's their sent one."""
    if epoch_ms and len(epoch_ms) == 13 and epoch_ms.isdigit():  # every timestamp from 2001 to 2286: no arithmetic
        return f"{utc_second(epoch_ms[:10])}.{epoch_ms[10:]}Z"
    if not epoch_ms or not epoch_ms.isdigit():
        return ""
    value = int(epoch_ms)
    seconds, milliseconds = divmod(value, 1000)
    if seconds > LAST_DATETIME_SECOND:  # past year 9999: fail as datetime does
        moment = datetime.fromtimestamp(value / 1000.0, tz=timezone.utc)
        return moment.strftime("%Y-%m-%dT%H:%M:%S.") + f"{moment.microsecond // 1000:03d}Z"
    return f"{utc_second(str(seconds))}.{milliseconds:03d}Z"


@functools.lru_cache(maxsize=256)
def utc_second(seconds: str) -> str:
    """For each new millisecond `iso_utc` meets; the messages of a backlog mostly share their seconds."""
    t = time.gmtime(int(seconds))
    return "%04d-%02d-%02dT%02d:%02d:%02d" % (  # noqa: UP031 - a third faster than an f-string here
        t.tm_year, t.tm_mon, t.tm_mday, t.tm_hour, t.tm_min, t.tm_sec)
