"""Targets turn messages into deliveries and say, per message, how each went."""

from __future__ import annotations

import enum
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Protocol

from ..message import Message


class Result(enum.Enum):
    SUCCESS = "success"
    FAILURE = "failure"
    RETRY = "retry"  # the target asked to be left alone for a while (429/503 Retry-After, throttle)
    OVERLOADED = "overloaded"  # busy, without saying for how long: slow down; the attempt is not held against it
    RELEASED = "released"  # behind a failed message of its FIFO group in a batch: visible again now, not a try


@dataclass(frozen=True, slots=True)
class Outcome:
    result: Result
    error_type: str = ""
    error: str = ""
    retry_after_seconds: float | None = None
    # the HTTP status the app answered, 0 where there was none (Lambda, no answer): for traces, not a kind of outcome
    status: int = field(default=0, compare=False)

    @classmethod
    def success(cls) -> Outcome:
        return SUCCESS

    @classmethod
    def failure(cls, error_type: str, error: str) -> Outcome:
        return cls(Result.FAILURE, error_type, error)

    @classmethod
    def overloaded(cls, error_type: str, error: str) -> Outcome:
        return cls(Result.OVERLOADED, error_type, error)

    @property
    def is_success(self) -> bool:
        return self.result is Result.SUCCESS


SUCCESS = Outcome(Result.SUCCESS)
# FIFO: behind a message of its group that did not succeed; the settler makes it visible again at once (SQS hands
# out that one before it), and it is not held against it (max_retries)
RELEASED = Outcome(Result.RELEASED, "BehindFailure", "released behind a message of its FIFO group that did not succeed")


def release_behind_failures(outcomes: list[Outcome], groups: Sequence[str | None]) -> list[Outcome]:
    """FIFO's one rule for a delivery of several messages (a batch, its parts, what preparing it left out), in
    their order: the first message of a group that did not succeed keeps its outcome, and every message after it
    in that group is released behind it, whatever became of it, so the group comes again in order from there.
    For .fifo queues only: a standard queue's MessageGroupId orders nothing."""
    stopped: set[str] = set()
    kept: list[Outcome] = []
    for outcome, group in zip(outcomes, groups, strict=True):
        if group is not None and group in stopped:
            kept.append(RELEASED)
            continue
        if outcome.result is not Result.SUCCESS and group is not None:
            stopped.add(group)
        kept.append(outcome)
    return kept


@dataclass(frozen=True, slots=True)
class QueueInfo:
    """What a target may know about the queue a message came from."""

    name: str
    arn: str
    region: str
    is_fifo: bool


class Target(Protocol):
    name: str
    messages_per_delivery: int
    hard_deadline_seconds: float
    pause: Pause

    def deliver(self, queue: QueueInfo, messages: list[Message]) -> list[Outcome]:
        """One outcome per message, in order; never raises for a failing target."""
        ...

    def deadline_seconds(self, queue: QueueInfo, messages: list[Message]) -> float:
        """How long delivering these may take at most: their leases last that long."""
        ...


class Pause:
    """Backpressure: a target that said 'not now' gets no deliveries until the time passes."""

    def __init__(self) -> None:
        self.until = 0.0

    def extend(self, seconds: float) -> None:
        self.until = max(self.until, time.monotonic() + seconds)

    def remaining_seconds(self) -> float:
        return self.until - time.monotonic()
