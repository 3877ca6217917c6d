"""`workerless stats`: each configured queue's depths and its dead-letter queue's, from GetQueueAttributes."""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import asdict, dataclass
from typing import Any

from ..config.model import QueueConfig
from ..errors import AWS_ERRORS, describe_error, error_code
from .queues import queue_name, queue_url, read_attributes, redrive_target, url_of_arn_queue

DEPTHS = ["ApproximateNumberOfMessages", "ApproximateNumberOfMessagesNotVisible",
          "ApproximateNumberOfMessagesDelayed"]
HEADERS = ("queue", "visible", "in flight", "delayed", "dead-letter queue", "dlq visible")


@dataclass(frozen=True, slots=True, kw_only=True)
class QueueStats:
    """One line of `stats`; `--json` prints exactly these keys."""
    queue: str
    visible: int
    in_flight: int
    delayed: int
    dead_letter_queue: str | None  # ours (dead_letter_queue), else the SQS redrive policy's, else None
    dead_letter_visible: int | None


class QueueUnreadable(Exception):
    """An AWS error reading one queue, named: `queue nope: AWS.SimpleQueueService.NonExistentQueue: ...`."""

    def __init__(self, queue: str, error: BaseException) -> None:
        super().__init__(f"queue {queue}: {describe_error(error)}")
        self.is_missing = error_code(error).endswith(("QueueDoesNotExist", "NonExistentQueue"))


def read_stats(sqs: Any, queues: Iterable[QueueConfig]) -> list[QueueStats]:
    """Two or three GetQueueAttributes per queue (after botocore's retries, an error is QueueUnreadable)."""
    rows = []
    for queue in queues:
        try:
            rows.append(read_queue(sqs, queue))
        except AWS_ERRORS as error:
            raise QueueUnreadable(queue.name, error) from None
    return rows


def read_queue(sqs: Any, queue: QueueConfig) -> QueueStats:
    attributes = read_attributes(sqs, queue.url or queue_url(sqs, queue.name), [*DEPTHS, "RedrivePolicy"])
    dead_letter_queue, dead_letter_visible = None, None
    if queue.dead_letter_queue:
        dead_letter_queue = queue.dead_letter_queue
        dead_letter_url = queue_url(sqs, dead_letter_queue)
    elif (policy := redrive_target(attributes)) is not None:
        dead_letter_queue = policy[0]
        dead_letter_url = url_of_arn_queue(sqs, *policy)
    if dead_letter_queue is not None:
        visible = read_attributes(sqs, dead_letter_url, DEPTHS[:1])
        dead_letter_visible = int(visible[DEPTHS[0]])
    return QueueStats(queue=queue.name, visible=int(attributes[DEPTHS[0]]), in_flight=int(attributes[DEPTHS[1]]),
                      delayed=int(attributes[DEPTHS[2]]), dead_letter_queue=dead_letter_queue,
                      dead_letter_visible=dead_letter_visible)


def stats_json(rows: list[QueueStats]) -> str:
    return json.dumps([asdict(row) for row in rows], indent=2)


def stats_table(rows: list[QueueStats]) -> str:
    """Aligned columns, numbers to the right; a queue without a dead-letter queue shows a dash."""
    cells = [HEADERS] + [(row.queue, str(row.visible), str(row.in_flight), str(row.delayed),
                          row.dead_letter_queue or "-", "-" if row.dead_letter_visible is None
                          else str(row.dead_letter_visible)) for row in rows]
    widths = [max(len(line[column]) for line in cells) for column in range(len(HEADERS))]
    lines = []
    for line in cells:
        parts = [text.ljust(width) if column in (0, 4) else text.rjust(width)
                 for column, (text, width) in enumerate(zip(line, widths))]
        lines.append("  ".join(parts).rstrip())
    return "\n".join(lines)

