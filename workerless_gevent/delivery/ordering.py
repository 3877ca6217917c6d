"""Queue ordering strategies: pure functions `(queues, tick, rng) -> list`, one draw per free slot."""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence
from typing import Any, Protocol, TypeVar


class Weighted(Protocol):
    @property
    def weight(self) -> int: ...


Q = TypeVar("Q", bound=Weighted)
Strategy = Callable[[Sequence[Any], int, random.Random], list[Any]]


def by_priority(queues: Sequence[Q], tick: int, rng: random.Random) -> list[Q]:
    """Strict order: a queue is looked at only when every queue before it has nothing."""
    return list(queues)


def by_weight(queues: Sequence[Q], tick: int, rng: random.Random) -> list[Q]:
    """Weighted shuffle (Efraimidis-Spirakis): queue i comes first with probability w_i / sum(w)."""
    return sorted(queues, key=lambda queue: rng.random() ** (1.0 / queue.weight), reverse=True)


def at_random(queues: Sequence[Q], tick: int, rng: random.Random) -> list[Q]:
    """Uniform shuffle: every queue is equally likely to be looked at first."""
    order = list(queues)
    rng.shuffle(order)
    return order


def round_robin(queues: Sequence[Q], tick: int, rng: random.Random) -> list[Q]:
    """Rotate the start by one queue per draw, like qless's round-robin pop."""
    if not queues:
        return []
    start = tick % len(queues)
    return list(queues[start:]) + list(queues[:start])


STRATEGIES: dict[str, Strategy] = {
    "priority": by_priority,
    "weighted": by_weight,
    "random": at_random,
    "round-robin": round_robin,
}
