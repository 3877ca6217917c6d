"""`workerless redrive`: a dead-letter queue's messages back where they came from, by `parallel` workers
each moving a batch of up to 10 at a time (commands/batches.py: receive, send, then delete), so N batches are
on their way at once. A crash or Ctrl-C can duplicate the batches in hand and never lose one. A FIFO group
keeps its order: SQS hands out none of a group's messages while a batch holding some is in hand (received
and not yet deleted), and each batch is sent in the order it was received."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import gevent
import gevent.event
import gevent.pool

from ..rules import is_fifo_queue
from .batches import (RECEIVE_OPTIONS, VISIBILITY_SECONDS, WAIT_SECONDS, Batch, BatchMover, Tally, combined)
from .progress import Progress
from .queues import queue_name, queue_url
from .quota import BATCH_MESSAGES, Quota

DEFAULT_PARALLEL = 10
MAX_PARALLEL = 100


@dataclass(frozen=True, slots=True, kw_only=True)
class RedriveRequest:
    dead_letter_queue: str  # a name or URL, as given
    to: str | None = None  # every message goes here, whatever its source
    max_messages: int | None = None
    rate: float | None = None  # messages per second
    parallel: int = DEFAULT_PARALLEL  # batches on their way at once


class Redrive:
    """One run; `run` moves until the queue is empty or --max is reached, or raises once every worker stopped."""

    def __init__(self, sqs: Any, request: RedriveRequest, progress: Progress,
                 clock: Callable[[], float] = time.monotonic, sleep: Callable[[float], None] = time.sleep) -> None:
        self.sqs, self.request, self.progress = sqs, request, progress
        self.url = queue_url(sqs, request.dead_letter_queue)
        self.name = queue_name(request.dead_letter_queue)
        self.batches = BatchMover(sqs, self.url, self.name, request.to, clock, sleep)
        self.quota = Quota(request.max_messages, request.rate, clock, sleep)
        self.in_hand = 0  # batches received and not yet settled (sent and deleted, or released)
        self.settled = gevent.event.Event()  # set, and replaced, each time a batch is settled
        self.failures: list[Exception] = []
        self.deletes = gevent.pool.Group()  # each worker's last batch being deleted

    @property
    def tally(self) -> Tally:
        return self.batches.tally

    def run(self) -> Tally:
        workers = [gevent.spawn(self.work) for _ in range(self.request.parallel)]
        try:
            gevent.joinall(workers)
            self.deletes.join()
        finally:  # after Ctrl-C: the batches in hand come back when their visibility ends
            self.deletes.kill()
            gevent.killall(workers)
        if self.failures:
            raise combined(self.failures)
        return self.tally

    def work(self) -> None:
        """One worker: batch after batch until the queue is empty, --max is reached or another worker failed.
        A batch's delete goes on while the worker receives the next (a round trip saved per batch), and ends
        before that one is sent: a worker has one batch sent and not yet deleted at most."""
        deleting: gevent.Greenlet[..., None] | None = None
        try:
            while not self.failures and (size := self.quota.take()) > 0:
                settled_before = self.settled
                batch = self.batches.receive(size)
                self.quota.give_back(size - len(batch.messages))
                if deleting is not None:
                    deleting.join()
                if self.failures:
                    self.batches.release(batch.messages)
                    return
                if batch.messages:
                    deleting = self.deletes.spawn(self.delete, batch, self.send(batch))
                elif self.is_drained(settled_before):
                    return
        except Exception as error:  # raised by `run` once every worker has stopped
            self.failures.append(error)

    def is_drained(self, settled_before: gevent.event.Event) -> bool:
        """After an empty receive. A FIFO queue hides the groups of the batches in hand: it is drained only if no
        batch was in hand during the receive, else its next messages come once one is settled."""
        if not is_fifo_queue(self.name) or (self.in_hand == 0 and not settled_before.is_set()):
            return True
        if self.in_hand:
            self.settled.wait(timeout=VISIBILITY_SECONDS)
        return False

    def send(self, batch: Batch) -> list[dict[str, Any]]:
        """The batch's copies sent: it is in hand (its FIFO groups locked) until `delete` settles it."""
        self.in_hand += 1
        try:
            self.batches.check_destinations(batch)
            return self.batches.send(batch)
        except BaseException:
            self.settle()
            raise

    def delete(self, batch: Batch, sent: list[dict[str, Any]]) -> None:
        try:
            self.batches.delete(batch, sent)
            self.progress.advance(len(sent))
        except Exception as error:  # raised by `run` once every worker has stopped
            self.failures.append(error)
        finally:
            self.settle()

    def settle(self) -> None:
        self.in_hand -= 1
        settled, self.settled = self.settled, gevent.event.Event()
        settled.set()

    def peek(self, count: int) -> list[dict[str, Any]]:
        """--dry-run: up to `count` messages seen and left visible (visibility timeout 0): nothing moves."""
        response = self.sqs.receive_message(QueueUrl=self.url, MaxNumberOfMessages=max(1, min(BATCH_MESSAGES, count)),
                                            WaitTimeSeconds=WAIT_SECONDS, VisibilityTimeout=0, **RECEIVE_OPTIONS)
        return list(response.get("Messages", []))

    def approximate_total(self) -> int:
        attributes = self.sqs.get_queue_attributes(QueueUrl=self.url, AttributeNames=["ApproximateNumberOfMessages"])
        visible = int(attributes["Attributes"]["ApproximateNumberOfMessages"])
        return visible if self.request.max_messages is None else min(visible, self.request.max_messages)
