"""The periodic scheduler: at each scheduled time of a task, claim the slot and enqueue the aws-sqsd cron message."""

from __future__ import annotations

import hashlib
import logging
import os
import random
import re
import socket
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from typing import Any, Protocol

import gevent.event

from ..aws.clients import Clients
from ..config.cron import PeriodicTask, iso_slot, latest_slot, slots_between
from ..config.model import Config
from ..errors import AWS_ERRORS, describe_error
from ..rules import is_fifo_queue
from .claims import Claims

logger = logging.getLogger(__name__)

SCHEDULED_JOB_BODY = "elasticbeanstalk scheduled job"  # the body aws-sqsd itself sends
CATCH_UP_SECONDS = 300  # a slot missed by less than this (restart, deploy, AWS errors) is still sent
RETRY_SECONDS = 5.0
MAX_WAIT_SECONDS = 30.0  # re-read the clock at least this often, in case it jumps
WAKE_MARGIN_SECONDS = 0.005
GROUP_ID_UNSAFE = re.compile(r"[^\x21-\x7e]")


class PeriodicQueue(Protocol):
    name: str

    def send(self, body: str, attributes: dict[str, Any], **extra: Any) -> None: ...


@dataclass(slots=True)
class Slot:
    task: PeriodicTask
    time: datetime
    is_claimed: bool = False

    @property
    def key(self) -> str:
        return f"{self.task.name}@{iso_slot(self.time)}"


def build_message(slot: Slot, is_fifo: bool) -> tuple[str, dict[str, Any], dict[str, str]]:
    """Body, attributes and FIFO ids of a cron message, as aws-sqsd's own scheduler sends it."""
    values = {
        "beanstalk.sqsd.task_name": slot.task.name,
        "beanstalk.sqsd.scheduled_time": iso_slot(slot.time),
        "beanstalk.sqsd.path": slot.task.url,
    }
    attributes = {name: {"DataType": "String", "StringValue": value} for name, value in values.items()}
    extra: dict[str, str] = {}
    if is_fifo:
        # Same slot, same deduplication id: SQS drops a second send within its 5-minute window.
        extra["MessageGroupId"] = GROUP_ID_UNSAFE.sub("_", slot.task.name)[:128]
        extra["MessageDeduplicationId"] = hashlib.sha256(slot.key.encode("utf-8")).hexdigest()
    return SCHEDULED_JOB_BODY, attributes, extra


class Scheduler:
    """Sends each slot of each task at most once per process; the claims table makes it once overall."""

    def __init__(self, tasks: tuple[PeriodicTask, ...], queue: PeriodicQueue, is_fifo: bool,
                 claims: Claims | None, clock: Callable[[], float], rng: random.Random) -> None:
        self.tasks = tasks
        self.queue = queue
        self.is_fifo = is_fifo
        self.claims = claims
        self.clock = clock
        self.rng = rng
        self.pending: dict[str, Slot] = {}
        now = self.now()
        self.checked_until = now
        # Only a claims table can tell a slot missed during a restart from one an earlier run sent.
        if claims is not None:
            for task in tasks:
                latest = latest_slot(task.schedule, now, timedelta(seconds=CATCH_UP_SECONDS))
                if latest is not None:
                    self.add(Slot(task, latest))

    def now(self) -> datetime:
        return datetime.fromtimestamp(self.clock(), timezone.utc)

    def add(self, slot: Slot) -> None:
        self.pending.setdefault(slot.key, slot)

    def run(self, stopping: gevent.event.Event) -> None:
        self.log_start()
        if self.claims is not None and not self.wait_for_claims_table(self.claims, stopping):
            return
        while not stopping.is_set():
            self.tick(self.now())
            stopping.wait(self.seconds_to_wait(self.now()))

    def wait_for_claims_table(self, claims: Claims, stopping: gevent.event.Event) -> bool:
        """Retry until the table is usable: sending without it could send a slot twice."""
        return claims.wait_until_usable(stopping, self.rng, "no periodic task is sent")

    def tick(self, now: datetime) -> None:
        """Collect the slots that came due since the last tick and send each one not yet settled."""
        # After a long pause (suspended host, clock jump) only the catch-up window is worth looking at.
        after = max(self.checked_until, now - timedelta(seconds=CATCH_UP_SECONDS))
        for task in self.tasks:
            for moment in slots_between(task.schedule, after, now):
                self.add(Slot(task, moment))
        self.checked_until = max(self.checked_until, now)
        for slot in sorted(self.pending.values(), key=lambda slot: slot.time):
            if (now - slot.time).total_seconds() > CATCH_UP_SECONDS:
                logger.error("periodic task=%s slot=%s: not sent within %ds of its time; skipped",
                             slot.task.name, iso_slot(slot.time), CATCH_UP_SECONDS)
                del self.pending[slot.key]
            elif self.fire(slot):
                del self.pending[slot.key]

    def fire(self, slot: Slot) -> bool:
        """True once the slot is settled: this instance sent it, or another one claimed it."""
        try:
            if self.claims is not None and not slot.is_claimed:
                if not self.claims.claim(slot.key, slot.task.name, slot.time.timestamp()):
                    logger.info("periodic task=%s slot=%s: claimed by another instance",
                                slot.task.name, iso_slot(slot.time))
                    return True
                slot.is_claimed = True
            body, attributes, extra = build_message(slot, self.is_fifo)
            self.queue.send(body, attributes, **extra)
        except AWS_ERRORS as error:
            logger.warning("periodic task=%s slot=%s: %s; retrying", slot.task.name, iso_slot(slot.time),
                           describe_error(error))
            return False
        logger.info("periodic task=%s slot=%s sent to queue=%s path=%s", slot.task.name, iso_slot(slot.time),
                    self.queue.name, slot.task.url)
        return True

    def seconds_to_wait(self, now: datetime) -> float:
        if self.pending:
            return RETRY_SECONDS
        upcoming = [next(slots_between(task.schedule, now, now + timedelta(days=400)), None) for task in self.tasks]
        soonest = min((moment for moment in upcoming if moment is not None), default=None)
        if soonest is None:
            return MAX_WAIT_SECONDS
        seconds = (soonest - now).total_seconds() + WAKE_MARGIN_SECONDS
        return max(WAKE_MARGIN_SECONDS, min(seconds, MAX_WAIT_SECONDS))

    def log_start(self) -> None:
        names = ", ".join(f"{task.name}={task.schedule!r}" for task in self.tasks)
        if self.claims is None:
            logger.info("periodic: %d tasks [%s] to queue=%s; no claims_table, so this instance schedules alone "
                        "(run one instance, or set [periodic] claims_table); slots missed while stopped are not sent",
                        len(self.tasks), names, self.queue.name)
        else:
            logger.info("periodic: %d tasks [%s] to queue=%s; slots claimed in DynamoDB table %s",
                        len(self.tasks), names, self.queue.name, self.claims.table_name)


def build_scheduler(config: Config, clients: Clients, queues: dict[str, Any], rng: random.Random) -> Scheduler | None:
    """The scheduler of a run, or None without [periodic] tasks."""
    periodic = config.periodic
    if periodic is None or not periodic.tasks:
        return None
    claims = None
    if periodic.claims_table is not None:
        # Unique per run: a restarted container keeps its hostname and PID 1, and must not take its
        # predecessor's claim for its own.
        owner = f"{socket.gethostname()}/{os.getpid()}/{rng.getrandbits(32):08x}"
        claims = Claims(clients.dynamodb, periodic.claims_table, owner)
    queue = queues[periodic.queue]
    return Scheduler(periodic.tasks, queue, is_fifo_queue(periodic.queue), claims, time.time, rng)
