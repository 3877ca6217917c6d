"""How long a failed message waits before it is retried, and which of its receives count toward its max_retries
(not those that were overloaded, up to FREE_OVERLOADS, nor those that did not deliver it)."""

from __future__ import annotations

import time
from collections import OrderedDict

from ..message import Message
from ..rules import MAX_VISIBILITY_SECONDS, receipt_seconds_left
from .queue import SqsQueue

FREE_OVERLOADS = 10  # overloaded attempts of one message that do not count toward max_retries
REMEMBERED_OVERLOADS = 100_000  # messages whose overloads are remembered, the least recent forgotten first


class ReceiveCounts:
    """What this process remembers of a message's receives beside SQS's ApproximateReceiveCount."""

    def __init__(self) -> None:
        self.overloads: OrderedDict[str, int] = OrderedDict()  # message id -> overloaded attempts
        self.undelivered: OrderedDict[str, int] = OrderedDict()  # message id -> receives that did not deliver it

    def note_overload(self, message: Message) -> int:
        """One more overloaded attempt of this message; returns how many it has had (in this process)."""
        return remember(self.overloads, message.message_id)

    def note_undelivered(self, message: Message) -> None:
        """A receive of this message that will not deliver it (held, deferred, released): SQS counts it in
        ApproximateReceiveCount, max_retries must not (remembered in this process)."""
        remember(self.undelivered, message.message_id)

    def counted(self, message: Message) -> int:
        """The receives that count toward max_retries."""
        return (message.receive_count - min(FREE_OVERLOADS, self.overloads.get(message.message_id, 0))
                - self.undelivered.get(message.message_id, 0))


def remember(counts: OrderedDict[str, int], message_id: str) -> int:
    """One more of something for this message id; returns how many so far. The least recent ids are forgotten
    past REMEMBERED_OVERLOADS."""
    count = counts.pop(message_id, 0) + 1
    counts[message_id] = count
    if len(counts) > REMEMBERED_OVERLOADS:
        counts.popitem(last=False)
    return count


def retry_delay_seconds(queue: SqsQueue, tries: int) -> int:
    """The error visibility timeout, doubled per try under exponential backoff, capped at 12 h. `tries` counts
    as max_retries does (`ReceiveCounts.counted`): a receive that did not deliver the message, or an overload,
    doubles nothing."""
    base = queue.config.error_visibility_timeout
    if queue.config.backoff == "exponential":
        base = base * 2 ** min(max(1, tries) - 1, 20)
    return int(min(base, MAX_VISIBILITY_SECONDS))


def within_receipt_limit(message: Message, seconds: int) -> int:
    """A long retry delay shortened to end before SQS's receipt limit (`rules.receipt_seconds_left`)."""
    return int(max(0, min(seconds, receipt_seconds_left(message.received_at, time.time()))))
