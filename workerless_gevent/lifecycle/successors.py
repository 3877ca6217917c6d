"""What a reload puts in place of running queues and targets (`Successors`, resolved before anything drains),
and the swap of each into the running parts once its predecessor has drained."""

from __future__ import annotations

from dataclasses import dataclass

from ..aws.clients import Clients
from ..config.model import TargetConfig
from ..delivery.queue import SqsQueue
from ..idempotency.guard import Idempotency
from ..targets import Target
from .assembly import Parts, queue_info


@dataclass(frozen=True, slots=True)
class Successors:
    """What replaces parts of the running configuration, made (queues resolved) before anything drains."""
    queues: dict[str, SqsQueue | None]  # None: the queue is removed
    dead_letter_queues: dict[str, SqsQueue]  # by source queue, for the queues above that have one
    targets: dict[str, tuple[TargetConfig, Target] | None]  # None: the target is removed
    replaces_idempotency: bool = False  # [idempotency] changed: `idempotency` (None: removed) takes over
    idempotency: Idempotency | None = None


def swap_queues(parts: Parts, successors: Successors, clients: Clients) -> list[SqsQueue]:
    """Each successor queue in `parts` (or its queue taken out); the queues it replaced, still to flush."""
    replaced = []
    for name, queue in successors.queues.items():
        old = parts.queues.pop(name, None)
        if old is not None and old is not queue:
            replaced.append(old)
        parts.queue_infos.pop(name, None)
        parts.dead_letter_queues.pop(name, None)
        if queue is not None:
            parts.queues[name] = queue
            parts.queue_infos[name] = queue_info(queue, clients)
            if name in successors.dead_letter_queues:
                parts.dead_letter_queues[name] = successors.dead_letter_queues[name]
    return replaced


def swap_target(parts: Parts, name: str, successor: tuple[TargetConfig, Target] | None) -> TargetConfig | None:
    """The running target closed and its successor in `parts` (none: the target is removed); the successor's
    configuration."""
    close = getattr(parts.targets.pop(name, None), "close", None)
    if close is not None:
        close()
    if successor is None:
        return None
    config, parts.targets[name] = successor
    return config
