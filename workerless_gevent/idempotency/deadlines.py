"""How long a claim lasts and how long a message waits behind one, both from its message's visibility: a claim's
deadline is epoch seconds (other hosts compare it), a message's visibility is on this host's monotonic clock."""

from __future__ import annotations

import math
import time

from ..message import Message
from ..rules import MAX_VISIBILITY_SECONDS, receipt_seconds_left
from .store import Claim

LAPSE_MARGIN_SECONDS = 0.5  # a claim answered with less of its message's visibility left is not delivered


def has_lapsed(message: Message, claim: Claim) -> bool:
    """The claim came back after its message's visibility (or the claim's own deadline) ran out."""
    return message.visible_until - time.monotonic() < LAPSE_MARGIN_SECONDS or claim.deadline <= time.time()


def claim_deadline(message: Message) -> int:
    """A claim lasts as long as its message stays hidden: epoch seconds, for other hosts to compare."""
    return math.ceil(time.time() + max(1.0, message.visible_until - time.monotonic()))


def claim_seconds(message: Message) -> int:
    """A copy behind a claim of ours: visible again when that claim would lapse."""
    return within_limits(message, max(1.0, message.visible_until - time.monotonic()))


def within_limits(message: Message, seconds: float) -> int:
    return int(max(1, min(math.ceil(seconds), MAX_VISIBILITY_SECONDS,
                          receipt_seconds_left(message.received_at, time.time()))))
