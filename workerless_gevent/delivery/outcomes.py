"""The one owner of a message's state from receive to settlement: the lease is taken here at receive, narrowed
here when the delivery starts, and let go here when an outcome becomes its SQS action (delete, retry later,
dead-letter, expire, release), which is also where its FIFO group is freed.

"When is a message done?" When `Settler.settle` (after a delivery), `abandon` (after a bug or at stop), `release`
(received, never started) or `admit` (expired) hands its one last SQS action to its queue (`SqsQueue.delete` or
`change_visibility`); the settler marks it settled as it does (its `delete`, `change_visibility`), which stops its
heartbeat. The queue's batcher then sends the action, retried until it lands or the message's visibility runs out."""

from __future__ import annotations

import logging
import math
from collections.abc import Callable

from ..filtering import matches_any
from ..logs import fields
from ..message import Message
from ..metrics import OVERALL, Registry
from ..targets import Outcome, Result
from .dead_letters import dead_letter
from .keyed import DeliveryGuard, HandOver, sort_out
from .leases import Leases
from .poller import Work
from .queue import SqsQueue
from .retries import FREE_OVERLOADS, ReceiveCounts, retry_delay_seconds, within_receipt_limit

logger = logging.getLogger(__name__)


# Frees a work's FIFO groups and its place under the caps (told whether the target was overloaded);
# returns the buffered messages to release.
Finish = Callable[[Work, set[str], bool], list[Message]]


Note = Callable[[Message, str, dict[str, str | int]], None]


def finish_nothing(work: Work, failed_groups: set[str], overloaded: bool) -> list[Message]:
    return []


def hand_over_nothing(queue: SqsQueue, messages: list[Message]) -> bool:
    return False


class Settler:
    def __init__(self, queues: dict[str, SqsQueue], dead_letter_queues: dict[str, SqsQueue],
                 registry: Registry, leases: Leases, finish: Finish = finish_nothing,
                 idempotency: DeliveryGuard | None = None) -> None:
        self.queues = queues
        self.idempotency = idempotency  # claims around the deliveries of queues with an idempotency_key
        self.dead_letter_queues = dead_letter_queues
        self.registry = registry
        self.leases = leases
        self.finish = finish  # the poller's: frees FIFO groups, returns buffered messages behind a failure
        self.counts = ReceiveCounts()  # receives that do not count toward max_retries
        self.note: Note | None = None  # [tracing]: a retry or a dead letter, as an event on the delivery's span
        self.hand_over: HandOver = hand_over_nothing  # the poller's: messages whose claims were retried in place

    def admit(self, queue: SqsQueue, messages: list[Message]) -> list[Message]:
        """At receive: count, expire what is past its retention period, hold the rest. A bug on the way
        releases what it had not settled (visible again now) before it is raised."""
        try:
            return self.sort_received(queue, messages)
        except Exception:
            self.release([message for message in messages if not message.settled])
            raise

    def sort_received(self, queue: SqsQueue, messages: list[Message]) -> list[Message]:
        if not messages:
            self.registry.count(queue.name, "EmptyReceives")
            return []
        self.registry.count(queue.name, "Received", len(messages))
        admitted = []
        for message in messages:
            sent_at = message.sent_at
            if sent_at is not None:
                self.registry.observe(queue.name, "QueueTime", max(0.0, (message.received_at - sent_at) * 1000))
                # 5 s of tolerance for clock skew between us and SQS before calling a message expired
                if message.received_at - sent_at > queue.config.retention_period + 5:
                    logger.info("queue=%s message=%s expired: older than retention_period=%ds, deleted undelivered",
                                queue.name, message.message_id, queue.config.retention_period,
                                extra=fields(queue=queue.name, message_id=message.message_id, outcome="expired"))
                    self.registry.count(queue.name, "Expired")
                    self.delete(queue, message)
                    continue
            if queue.config.filter and not matches_any(queue.config.filter, message):
                logger.debug("queue=%s message=%s matches no filter: deleted undelivered", queue.name,
                             message.message_id, extra=fields(queue=queue.name, message_id=message.message_id,
                                                              outcome="filtered"))
                self.registry.count(queue.name, "Filtered")
                self.delete(queue, message)
                continue
            admitted.append(message)
        for message in admitted:  # kept hidden from now on, also while a claim is retried in place
            self.leases.hold(message)
        if self.idempotency is not None and self.idempotency.has_key(queue.name) and admitted:
            keyed = admitted
            admitted = sort_out(self, queue, keyed, self.idempotency)
            self.let_go_settled(keyed)
        return admitted

    def let_go_settled(self, messages: list[Message]) -> None:
        """The leases of messages that got their last action at receive (their heartbeat has stopped already)."""
        for message in messages:
            if message.settled:
                self.leases.release(message)

    def start(self, work: Work, seconds: float) -> None:
        """A delivery starts: its messages are kept invisible only until it must have ended."""
        self.leases.limit(work.messages, seconds)

    def settle(self, work: Work, outcomes: list[Outcome], target: str) -> None:
        """A delivery ended: each message's outcome becomes its SQS action; then the work's FIFO groups are
        freed, and the messages buffered behind a failed one in its group are released."""
        queue = work.state.queue
        if len(outcomes) != len(work.messages):  # a bug in a target: no message may be left without an action
            logger.error("queue=%s target=%s gave %d outcomes for %d messages; failing them all", queue.name, target,
                         len(outcomes), len(work.messages), extra=fields(queue=queue.name, target=target))
            outcomes = [Outcome.failure("InternalError", f"{len(outcomes)} outcomes for {len(work.messages)} messages")
                        ] * len(work.messages)
        guard = self.idempotency
        if guard is not None:  # one settle's claims given up together, not one message after another
            given_up = [message for message, outcome in zip(work.messages, outcomes)
                        if outcome.result is not Result.SUCCESS and guard.is_claimed(message)]
            if given_up:
                guard.give_up(given_up)
        failed_groups: set[str] = set()
        overloaded = False
        for message, outcome in zip(work.messages, outcomes):
            self.settle_message(queue, message, outcome, target)
            if outcome.result is not Result.SUCCESS:
                overloaded = overloaded or outcome.result is Result.OVERLOADED
                if message.fifo_group is not None:
                    failed_groups.add(message.fifo_group)
        released = self.finish_once(work, failed_groups, overloaded)
        if released:
            self.release(released)

    def abandon(self, work: Work) -> None:
        """After a bug mid-delivery, or a delivery still running at the end of the grace period: what was
        not settled is visible again at once, and its receive counts toward max_retries (the target had it: a
        bug that follows one message must not loop it forever, never dead-lettered); its FIFO groups are freed
        with the rest of them released, uncounted."""
        groups = {message.fifo_group for message in work.messages if message.fifo_group is not None}
        self.release([message for message in work.messages if not message.settled], delivered=True)
        self.release(self.finish_once(work, groups, False))

    def finish_once(self, work: Work, failed_groups: set[str], overloaded: bool) -> list[Message]:
        """The poller hears of a work's end once, whether it was settled, abandoned, or both (a bug after
        settling): twice would free a FIFO group another work now holds, and a place under a cap."""
        if work.is_finished:
            return []
        work.is_finished = True
        return self.finish(work, failed_groups, overloaded)

    def settle_message(self, queue: SqsQueue, message: Message, outcome: Outcome, target: str) -> None:
        """The SQS action for one outcome (`settle` calls it for each message of a delivery): a success is
        deleted, `decide` picks the action for any other; then the queue gets it, once."""
        self.leases.release(message)
        if outcome.result is Result.SUCCESS:  # most of them: nothing to decide
            self.registry.count(queue.name, "Succeeded")
            if self.idempotency is not None and self.idempotency.is_claimed(message):
                message.settled = True  # `completed` first, then the delete
                self.idempotency.complete(message, lambda: queue.delete(message))
            else:
                self.delete(queue, message)
            return
        if outcome.result is Result.RELEASED:  # SQS hands it out again after the failed one before it in its group
            self.release([message])
            return
        action, seconds = self.fail(queue, message, outcome, target)
        if self.note is not None:
            detail: dict[str, str | int] = {"workerless.retry_in_seconds": seconds} if action == "retry" else \
                {"workerless.dead_letter_queue": self.dead_letter_queues[queue.name].name}
            try:  # tracing fails open: the message's action is already on its way
                self.note(message, "retry scheduled" if action == "retry" else "dead-lettered", detail)
            except Exception:
                self.registry.count(OVERALL, "InternalErrors")
                logger.debug("queue=%s message=%s tracing's note failed", queue.name, message.message_id,
                             exc_info=True)

    def fail(self, queue: SqsQueue, message: Message, outcome: Outcome, target: str) -> tuple[str, int]:
        """A failed attempt (delivered or not): retried later, or dead-lettered once its copy is safely there.
        Returns the action taken ("retry" | "dead-letter") and the seconds `decide` gave it."""
        action, seconds = self.decide(queue, message, outcome, target)
        if action == "dead-letter" and not dead_letter(queue, self.dead_letter_queues[queue.name], message, outcome,
                                                      self.registry):
            action = "retry"  # the copy is not safely there: keep the message, try again at its next failure
        if action == "retry":
            self.change_visibility(queue, message, seconds)
        else:  # a dead-letter copy that is safely there
            self.delete(queue, message)
        return action, seconds

    def delete(self, queue: SqsQueue, message: Message) -> None:
        """The message's last action: from here its heartbeat stops."""
        if self.idempotency is not None and self.idempotency.is_claimed(message):  # a redriven copy may claim
            self.idempotency.give_up([message])
        message.settled = True
        queue.delete(message)

    def change_visibility(self, queue: SqsQueue, message: Message, seconds: int) -> None:
        """The message's last action (a retry later, or a release now): from here its heartbeat stops."""
        if self.idempotency is not None and self.idempotency.is_claimed(message):  # its next receive may claim it
            self.idempotency.give_up([message])
        message.settled = True
        queue.change_visibility(message, seconds)

    def decide(self, queue: SqsQueue, message: Message, outcome: Outcome, target: str) -> tuple[str, int]:
        """For an outcome other than a success: ("retry" | "dead-letter", seconds until a retried message is
        visible again), counted and logged."""
        ids = {"queue": queue.name, "message_id": message.message_id, "target": target}
        if outcome.result is Result.RETRY or (outcome.result is Result.OVERLOADED
                                              and self.counts.note_overload(message) <= FREE_OVERLOADS):
            self.registry.count(queue.name, "Throttled")
            delay = outcome.retry_after_seconds
            seconds = int(math.ceil(delay if delay is not None else queue.config.error_visibility_timeout))
            kind = "asked to retry" if outcome.result is Result.RETRY else "is overloaded, slowing down; retrying"
            logger.info("queue=%s message=%s target=%s %s in %ds (%s)", queue.name, message.message_id, target,
                        kind, seconds, outcome.error, extra=fields(**ids, outcome=outcome.result.value))
            return "retry", within_receipt_limit(message, seconds)
        self.registry.count(queue.name, "Failed")
        self.registry.record_failure(outcome.error_type, outcome.error, queue=queue.name, target=target)
        logger.warning("queue=%s message=%s receive_count=%d target=%s outcome=failure type=%s: %s",
                       queue.name, message.message_id, message.receive_count, target, outcome.error_type, outcome.error,
                       extra=fields(**ids, outcome="failure", error_type=outcome.error_type,
                                    receive_count=message.receive_count))
        tries = self.counts.counted(message)
        seconds = within_receipt_limit(message, retry_delay_seconds(queue, tries))
        if queue.name in self.dead_letter_queues and tries >= queue.config.max_retries:
            return "dead-letter", seconds  # the seconds serve if the copy cannot be made
        return "retry", seconds

    def release(self, messages: list[Message], delivered: bool = False) -> None:
        """Visible again now. Received but never started (stopping, or behind a failed or hidden FIFO message):
        a receive that did not deliver it does not count toward its max_retries; `delivered` (`abandon`): it does."""
        if self.idempotency is not None:
            self.idempotency.give_up(messages)  # their claims at once, not one by one
        for message in messages:
            self.leases.release(message)
            if not delivered:
                self.note_undelivered(message)
            self.change_visibility(self.queues[message.queue], message, 0)

    def note_undelivered(self, message: Message) -> None:
        """A receive that will not deliver this message (`retries.ReceiveCounts.note_undelivered`)."""
        self.counts.note_undelivered(message)
