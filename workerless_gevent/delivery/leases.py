"""Keeps every received message invisible while it waits in the buffer or is being delivered."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

import gevent
import gevent.event

from ..message import Message
from ..rules import RECEIPT_LIMIT_SECONDS, receipt_seconds_left
from .queue import SqsQueue

logger = logging.getLogger(__name__)

TICK_SECONDS = 0.5


class Leases:
    """Every message between receive and settlement, with the time after which it is let go."""

    def __init__(self, queues: dict[str, SqsQueue], extend_claims: Callable[[list[Message]], None] | None = None
                 ) -> None:
        self.queues = queues
        self.extend_claims = extend_claims  # idempotency claims follow their messages' visibility
        self.messages: dict[Message, float] = {}  # message -> monotonic time to stop extending

    def hold(self, message: Message) -> None:
        self.messages[message] = time.monotonic() + RECEIPT_LIMIT_SECONDS

    def limit(self, messages: list[Message], seconds: float) -> None:
        """Once a delivery starts, extend its messages only until it must have ended."""
        stop_at = time.monotonic() + seconds
        held = self.messages
        for message in messages:
            if message in held and stop_at < held[message]:
                held[message] = stop_at

    def release(self, message: Message) -> None:
        self.messages.pop(message, None)

    def in_flight(self) -> int:
        return len(self.messages)

    def beat(self) -> int:
        """Extend the visibility of each held message whose deadline is near; returns how many."""
        now = time.monotonic()
        extended = 0
        claimed: list[Message] = []
        for message, stop_at in list(self.messages.items()):
            queue = self.queues[message.queue]
            visibility = queue.config.visibility_timeout
            margin = min(5.0, visibility / 2) + TICK_SECONDS
            if message.settled or now >= stop_at or message.visible_until - now > margin:
                continue
            seconds = int(min(visibility, max(1.0, receipt_seconds_left(message.received_at, time.time()))))
            queue.change_visibility(message, seconds, is_heartbeat=True)  # retried until the current visibility ends
            message.visible_until = now + seconds
            extended += 1
            if message.claim is not None:
                claimed.append(message)
        if claimed and self.extend_claims is not None:
            self.extend_claims(claimed)
        return extended

    def run(self, stopped: gevent.event.Event) -> None:
        """The heartbeat greenlet; it keeps beating while deliveries drain after a stop signal."""
        while not stopped.wait(TICK_SECONDS):
            count = self.beat()
            if count:
                logger.debug("extended visibility of %d messages", count)
