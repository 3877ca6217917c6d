"""A delivery span's attributes, as OpenTelemetry's messaging conventions name them: those it begins with, its
outcome's (the app's status or the function's error, and an ERROR status on failure), and the SDK's limits on
them, applied as its own span applies them."""

from __future__ import annotations

import time
from collections.abc import Sequence

from opentelemetry.trace import Status, StatusCode

from ..message import Message
from ..targets import Outcome, Result

SYSTEM = {"messaging.system": "aws_sqs", "messaging.operation.type": "process", "messaging.operation.name": "process"}
OUTCOME_KEYS = frozenset({"http.response.status_code", "workerless.failed_count", "error.type"})  # record_outcomes'
# the attributes whose values repeat from delivery to delivery: a span begins with them, and the encoder
# serialises them once (encoding.py)
REPEATING = frozenset({*SYSTEM, "messaging.destination.name", "workerless.target", "workerless.receive_count",
                       "messaging.batch.message_count", *OUTCOME_KEYS})
UNSET = Status(StatusCode.UNSET)
NO_OUTCOMES: tuple[Outcome, ...] = ()  # a delivery that did not fail

Attributes = dict[str, str | int]


def attributes_of(base: Attributes, messages: list[Message], is_batch: bool) -> tuple[Attributes, Attributes]:
    """The delivery's attributes whose values repeat, `base` (the system, the queue and the target) and the receive
    count or the batch's size; and its own."""
    attributes = base.copy()
    own: Attributes = {}
    if is_batch:
        attributes["messaging.batch.message_count"] = len(messages)
        sent = min((at for message in messages if (at := message.sent_at) is not None), default=None)
    else:
        first = messages[0]
        attributes["workerless.receive_count"] = first.receive_count
        own["messaging.message.id"] = first.message_id
        sent = first.sent_at
    if sent is not None:  # the oldest message of the delivery: from SQS's SentTimestamp to now
        own["workerless.queue_wait_ms"] = max(0, round((time.time() - sent) * 1000))
    return attributes, own


def record_outcomes(attributes: Attributes, outcomes: list[Outcome], is_batch: bool) -> Status:
    """The app's status (or the function's error); an ERROR status when a message did not succeed."""
    failed: Sequence[Outcome]
    if len(outcomes) == 1:  # one message: nearly every delivery to an HTTP target
        if outcomes[0].status:
            attributes["http.response.status_code"] = outcomes[0].status
        failed = outcomes if outcomes[0].result is not Result.SUCCESS else NO_OUTCOMES
    else:
        statuses = {outcome.status for outcome in outcomes if outcome.status}
        if len(statuses) == 1:
            attributes["http.response.status_code"] = statuses.pop()
        failed = [outcome for outcome in outcomes if outcome.result is not Result.SUCCESS]
    if is_batch:
        attributes["workerless.failed_count"] = len(failed)
    if not failed:
        return UNSET
    attributes["error.type"] = failed[0].error_type or failed[0].result.value
    return Status(StatusCode.ERROR, failed[0].error[:300])


def limited(attributes: Attributes, length: int | None, count: int | None) -> Attributes:
    """The SDK's attribute limits (OTEL_SPAN_ATTRIBUTE_VALUE_LENGTH_LIMIT, OTEL_SPAN_ATTRIBUTE_COUNT_LIMIT and
    the like) applied as its own span would: longer strings cut and, past the count, the first ones left out (its
    attributes evict the oldest): a delivery's own (its message id, its wait) and its outcome are the last."""
    if length is None and (count is None or len(attributes) <= count):
        return attributes
    kept = list(attributes.items())
    if count is not None:
        kept = kept[len(kept) - count:] if count else []
    return {key: value[:length] if length is not None and isinstance(value, str) else value for key, value in kept}
