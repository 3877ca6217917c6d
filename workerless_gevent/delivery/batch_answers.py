"""How a batcher reads what came of a call: per entry done, stale, again (and when) or given up; or its error."""

from __future__ import annotations

import logging
import random
import time
from typing import Any

from ..errors import error_code
from ..logs import fields
from ..metrics import Count
from ..rules import THROTTLE_CODES, TRANSIENT_CODES, backoff_seconds
from ..wire.retries import retry_cost
from .batch_failures import RETRY_BASE_SECONDS, RETRY_CAP_SECONDS, BatchEntry, GiveUps

logger = logging.getLogger("workerless_gevent.delivery.batching")  # one logger for the batches' lines

STALE_HANDLE_CODES = ("ReceiptHandleIsInvalid", "InvalidParameterValue", "MessageNotInflight")
# Refreshable credentials are fetched anew on the next signature: worth another try.
REFRESHED_CODES = ("ExpiredToken", "ExpiredTokenException", "RequestExpired")
RETRY_REASON = "entries failed or left out of the answer"


class UnexpectedAnswer(ValueError):
    """SQS answered 200 with something that is not a batch result."""


class Answers:
    """The answers to one batcher's calls (`kind`: "delete" or "visibility" on one queue), read entry by entry."""

    def __init__(self, queue_name: str, kind: str, count: Count, rng: random.Random, given_up: GiveUps) -> None:
        self.queue_name = queue_name
        self.kind = kind
        self.count = count
        self.rng = rng
        self.given_up = given_up

    def judge(self, chunk: list[BatchEntry], response: dict[str, Any]) -> list[BatchEntry]:
        """Per-entry results: the entries to retry (the retryable failures and any entry the answer left out),
        each with its next try set; the stale are counted, the others given up."""
        successful, failed = response.get("Successful", []), response.get("Failed", [])
        if not isinstance(successful, list) or not isinstance(failed, list):
            raise UnexpectedAnswer(f"{self.kind} batch answer has no Successful/Failed lists: {response!r:.200}")
        done = {str(item.get("Id")) for item in successful if isinstance(item, dict)}
        retry: list[BatchEntry] = []
        stale: list[BatchEntry] = []
        stale_codes: set[str] = set()
        strangers: list[object] = []
        for failure in failed:
            entry = entry_of(chunk, failure)
            if entry is None or not isinstance(failure, dict):
                strangers.append(failure)
                continue
            done.add(str(failure["Id"]))
            code = str(failure.get("Code", ""))
            if code.endswith(STALE_HANDLE_CODES):
                stale.append(entry)
                stale_codes.add(code)
            elif failure.get("SenderFault") is not True or code.endswith(THROTTLE_CODES + TRANSIENT_CODES):
                retry.append(entry)
            else:
                self.given_up.add([entry], hide_handles(f"{code}: {failure.get('Message', '')}", [entry]))
        if strangers:
            logger.warning("queue=%s %s batch answer names %d entries we did not send: %.300r", self.queue_name,
                           self.kind, len(strangers), strangers, extra=fields(queue=self.queue_name, batch=self.kind))
        if stale:  # the message was received again, or is gone: nothing to retry, nothing lost
            self.count(self.queue_name, "StaleReceipts", len(stale))
            ids = ",".join(entry.message.message_id for entry in stale)
            logger.info("queue=%s %s of %d messages skipped: stale receipt handle (%s; message=%s)", self.queue_name,
                        self.kind, len(stale), ",".join(sorted(stale_codes)), ids,
                        extra=fields(queue=self.queue_name, batch=self.kind, message_id=ids))
        missing = [entry for position, entry in enumerate(chunk) if str(position) not in done]
        return self._again(retry + missing) if retry or missing else []

    def _again(self, entries: list[BatchEntry]) -> list[BatchEntry]:
        """Entries SQS failed inside an answered call: full-jitter backoff per entry until its deadline."""
        now = time.monotonic()
        for entry in entries:
            entry.attempts += 1
            pause = backoff_seconds(entry.attempts + 1, self.rng, RETRY_CAP_SECONDS, RETRY_BASE_SECONDS)
            entry.not_before = now + pause
        logger.debug("queue=%s %s of %d messages failed, trying again: %s", self.queue_name, self.kind,
                     len(entries), RETRY_REASON, extra=fields(queue=self.queue_name, batch=self.kind))
        return entries


def is_beyond_retry(error: BaseException) -> bool:
    """A call failed as a whole in a way another try would not mend (the wire would not retry it either)."""
    return retry_cost(error) is None and not error_code(error).endswith(REFRESHED_CODES)


def entry_of(chunk: list[BatchEntry], failure: object) -> BatchEntry | None:
    position = str(failure.get("Id", "")) if isinstance(failure, dict) else ""
    return chunk[int(position)] if position.isascii() and position.isdigit() and int(position) < len(chunk) else None


def hide_handles(text: str, entries: list[BatchEntry]) -> str:
    """SQS quotes receipt handles in some messages; they stay out of the log."""
    for entry in entries:
        text = text.replace(entry.message.receipt_handle, "<receipt handle>")
    return text
