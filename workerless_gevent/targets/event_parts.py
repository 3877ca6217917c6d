"""A batch's SQS event as requests of at most 6 MB (Lambda's synchronous Invoke limit, which an HTTP batch keeps
too), sent one after the other; written once for both targets that send it.

Each record is encoded once, as the request carries it (JSON with `ensure_ascii`: a CJK character takes 6 bytes
as a \\uXXXX escape, an emoji 12), and parts are filled in order, a new one when the next record would not fit. The
count of requests that sizes a batch's lease is made by the same rule from each record's exact encoded length,
computed without encoding its body, unless a bound from its strings' lengths shows the batch fits in one (small
messages: the bound costs a fifth of the measure). Both loops yield to the hub every megabyte or so: a batch of
10,000 records of 64 KB is over 600 MB of JSON, and heartbeats must not wait for it."""

from __future__ import annotations

from _json import encode_basestring_ascii, make_encoder
from collections.abc import Callable, Iterator
from typing import Any

import gevent

from ..message import Message
from . import RELEASED, Outcome, QueueInfo, Result, release_behind_failures
from .sqs_event import build_record

MAX_PAYLOAD_BYTES = 6 * 1024 * 1024 - 1024  # Lambda's synchronous limit, less room for the envelope
EVENT_OPEN, SEPARATOR, EVENT_CLOSE = '{"Records": [', ", ", "]}"  # as json.dumps writes {"Records": [...]}
# A record's length in JSON is at most this, and 12 bytes per character of its strings (an escaped surrogate pair)
RECORD_STRUCTURE_BYTES = 1024  # its keys and punctuation, with those of its system attributes (about 300 in all)
ATTRIBUTE_STRUCTURE_BYTES = 128  # a message attribute's keys and punctuation (about 90)
YIELD_EVERY_BYTES = 1 << 20  # of JSON written or measured between two turns of the hub (a few ms of CPU)
# ASCII characters that JSON writes as they are; of the others, these take two bytes (\" \\ \b \f \n \r \t), the
# rest of the ASCII controls six (\u00XX)
PLAIN_ASCII = bytes(code for code in range(0x20, 0x7F) if code not in b'"\\')
SHORT_ESCAPES = b'"\\\b\f\n\r\t'

Send = Callable[[QueueInfo, list[dict[str, Any]], bytes], list[Outcome]]


def refuse(value: object) -> object:
    raise TypeError(f"{type(value).__name__} is not JSON")


# json.dumps' own C encoder with its separators and ensure_ascii, made once: json.dumps makes one per call, half the
# cost of a small record. No check for cycles: a record has none.
RECORD_ENCODER = make_encoder(None, refuse, encode_basestring_ascii, None, ": ", ", ", False, False, True)


def encode_record(record: dict[str, Any]) -> str:
    """json.dumps(record), ASCII only: its length is its length in bytes."""
    return "".join(RECORD_ENCODER(record, 0))


class EventBatchTarget:
    """What the Lambda target and the HTTP batch target share: a batch's parts and their deadline."""

    hard_deadline_seconds: float  # one request's

    def deliver(self, queue: QueueInfo, messages: list[Message]) -> list[Outcome]:
        return deliver_in_parts(queue, messages, self.send_part)

    def deadline_seconds(self, queue: QueueInfo, messages: list[Message]) -> float:
        """One request's deadline per request the batch needs: its parts go one after the other."""
        return self.hard_deadline_seconds * requests_needed(queue, messages)

    def send_part(self, queue: QueueInfo, records: list[dict[str, Any]], body: bytes) -> list[Outcome]:
        """One request with these records (`body`, their event) and an outcome for each."""
        raise NotImplementedError


def deliver_in_parts(queue: QueueInfo, messages: list[Message], send: Send) -> list[Outcome]:
    """The parts one after the other. A part answered with an overload or a retry holds the rest back with the same
    outcome, unsent. On a FIFO queue the first part that did not wholly succeed is the last one sent (what follows
    it is released, unsent), and within the batch FIFO's one rule holds (`release_behind_failures`)."""
    records = [build_record(queue, message) for message in messages]
    outcomes: list[Outcome] = []
    for part, body in encoded_parts(records):
        answered = send(queue, part, body)
        outcomes.extend(answered)
        held = held_back(answered, queue.is_fifo)
        if held is not None:
            outcomes.extend([held] * (len(records) - len(outcomes)))
            break
    if queue.is_fifo:
        return release_behind_failures(outcomes, [message.fifo_group for message in messages])
    return outcomes


def held_back(answered: list[Outcome], is_fifo: bool) -> Outcome | None:
    """The outcome of the records after a part answered so, left unsent; None to send them."""
    last = answered[-1]
    if last.result is Result.RETRY or last.result is Result.OVERLOADED:
        return last
    if is_fifo and any(outcome.result is not Result.SUCCESS for outcome in answered):
        return RELEASED
    return None


class Parts:
    """Records in order into parts under the limit: a new part when the next record would take this one over it
    (a record over the limit alone goes alone, and is refused by whoever gets it)."""

    def __init__(self) -> None:
        self.size = len(EVENT_OPEN) + len(EVENT_CLOSE)
        self.records = 0  # in the current part

    def starts_new_part(self, record_bytes: int) -> bool:
        """Add a record of this encoded size; True if it begins a new part (the one before it is complete)."""
        added = record_bytes + len(SEPARATOR) if self.records else record_bytes
        if self.records and self.size + added > MAX_PAYLOAD_BYTES:
            self.size, self.records = len(EVENT_OPEN) + len(EVENT_CLOSE) + record_bytes, 1
            return True
        self.size += added
        self.records += 1
        return False


def encoded_parts(records: list[dict[str, Any]]) -> Iterator[tuple[list[dict[str, Any]], bytes]]:
    """Each part's records and its event, made when the part before it is done with: a batch stopped early
    encodes no more of it."""
    parts = Parts()
    part: list[dict[str, Any]] = []
    chunks: list[str] = []
    written = 0
    for record in records:
        chunk = encode_record(record)
        written += len(chunk)
        if written >= YIELD_EVERY_BYTES:
            written = 0
            gevent.sleep(0)
        if parts.starts_new_part(len(chunk)):
            yield part, (EVENT_OPEN + SEPARATOR.join(chunks) + EVENT_CLOSE).encode("ascii")
            part, chunks = [], []
        part.append(record)
        chunks.append(chunk)
    if part:
        yield part, (EVENT_OPEN + SEPARATOR.join(chunks) + EVENT_CLOSE).encode("ascii")


def requests_needed(queue: QueueInfo, messages: list[Message]) -> int:
    """How many requests `deliver_in_parts` sends these in: exactly, measured only when a bound from the lengths of
    their strings alone does not already show that they fit in one (a batch of small messages, nearly always)."""
    queue_chars = len(queue.arn) + len(queue.region)
    if sum(record_bytes_at_most(message, queue_chars) for message in messages) + len(EVENT_OPEN + EVENT_CLOSE) <= (
            MAX_PAYLOAD_BYTES):
        return 1
    parts = Parts()
    count = 1
    measured = 0
    for message in messages:
        record = build_record(queue, message)
        record["body"] = ""
        body_bytes = json_string_bytes(message.body)
        count += parts.starts_new_part(len(encode_record(record)) - 2 + body_bytes)
        measured += body_bytes
        if measured >= YIELD_EVERY_BYTES:
            measured = 0
            gevent.sleep(0)
    return count


def record_bytes_at_most(message: Message, queue_chars: int) -> int:
    """More than the message's record takes in JSON (and its separator), from string lengths alone: at most 12 bytes
    a character, a binary value's base64 at most 12 a byte too; list values, which SQS does not take, count whole."""
    chars = len(message.body) + len(message.message_id) + len(message.receipt_handle) + len(message.md5_of_body)
    chars += queue_chars + sum(len(name) + len(value) for name, value in message.attributes.items())
    for name, value in message.message_attributes.items():
        chars += len(name) + len(str(value.get("StringValue", ""))) + len(str(value.get("DataType", "")))
        chars += len(value.get("BinaryValue", b""))
        if value.get("StringListValues") or value.get("BinaryListValues"):
            return MAX_PAYLOAD_BYTES + 1  # measured exactly, then
    return 12 * chars + RECORD_STRUCTURE_BYTES + ATTRIBUTE_STRUCTURE_BYTES * len(message.message_attributes)


def json_string_bytes(text: str) -> int:
    """len(json.dumps(text)), without writing it (a fifth of the time, or less, for a large body): each ASCII
    character is one byte, or its escape's two or six; any other is six per UTF-16 code unit (\\uXXXX, a pair of
    them beyond the BMP)."""
    ascii_only = text.encode("ascii", "ignore")
    units = len(text) if len(ascii_only) == len(text) else len(text.encode("utf-16-le", "surrogatepass")) // 2
    escaped = ascii_only.translate(None, PLAIN_ASCII)
    short = len(escaped) - len(escaped.translate(None, SHORT_ESCAPES))
    return 2 + len(ascii_only) + 6 * (units - len(ascii_only)) + 5 * len(escaped) - 4 * short
