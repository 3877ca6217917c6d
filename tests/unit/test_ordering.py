"""Ordering strategies: pure `(queues, tick, rng) -> list` functions."""

from __future__ import annotations

import random
from collections import Counter

import pytest

from workerless_gevent.config.model import QueueConfig
from workerless_gevent.delivery.ordering import STRATEGIES, Strategy, at_random, by_priority, by_weight, round_robin

DRAWS = 60_000


def weighted_queues(*weights: int) -> list[QueueConfig]:
    names = ["payments", "submissions", "default", "reports", "cleanup"]
    return [QueueConfig(name=name, weight=weight) for name, weight in zip(names, weights)]


def first_shares(strategy: Strategy, queues: list[QueueConfig], seed: int) -> dict[str, float]:
    rng = random.Random(seed)
    firsts = Counter(strategy(queues, tick, rng)[0].name for tick in range(DRAWS))
    return {queue.name: firsts[queue.name] / DRAWS for queue in queues}


def test_strategy_names() -> None:
    assert STRATEGIES == {"priority": by_priority, "weighted": by_weight, "random": at_random,
                          "round-robin": round_robin}


def test_by_priority_keeps_order_whatever_the_tick() -> None:
    queues = weighted_queues(1, 5, 2)
    rng = random.Random(1)
    for tick in range(10):
        assert by_priority(queues, tick, rng) == queues


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_by_weight_puts_queues_first_in_proportion_to_weight(seed: int) -> None:
    shares = first_shares(by_weight, weighted_queues(3, 2, 1), seed)
    assert shares["payments"] == pytest.approx(3 / 6, abs=0.01)
    assert shares["submissions"] == pytest.approx(2 / 6, abs=0.01)
    assert shares["default"] == pytest.approx(1 / 6, abs=0.01)


def test_by_weight_gives_a_heavy_queue_nearly_every_first() -> None:
    shares = first_shares(by_weight, weighted_queues(1000, 1), seed=4)
    assert shares["payments"] == pytest.approx(1000 / 1001, abs=0.002)


@pytest.mark.parametrize("seed", [1, 2])
def test_at_random_firsts_are_near_uniform(seed: int) -> None:
    shares = first_shares(at_random, weighted_queues(9, 1, 1, 1), seed)
    for share in shares.values():
        assert share == pytest.approx(1 / 4, abs=0.01)


@pytest.mark.parametrize("strategy", [by_priority, by_weight, at_random, round_robin])
def test_every_order_is_a_permutation(strategy: Strategy) -> None:
    queues = weighted_queues(3, 2, 1, 7, 1)
    rng = random.Random(5)
    for tick in range(200):
        order = strategy(queues, tick, rng)
        assert sorted(queue.name for queue in order) == sorted(queue.name for queue in queues)


def test_round_robin_rotates_by_tick() -> None:
    a, b, c = weighted_queues(1, 1, 1)
    rng = random.Random(6)
    assert round_robin([a, b, c], 0, rng) == [a, b, c]
    assert round_robin([a, b, c], 1, rng) == [b, c, a]
    assert round_robin([a, b, c], 2, rng) == [c, a, b]
    assert round_robin([a, b, c], 3, rng) == [a, b, c]
    assert round_robin([a, b, c], 3001, rng) == [b, c, a]


def test_round_robin_gives_each_queue_an_equal_turn_first() -> None:
    queues = weighted_queues(5, 1, 1)
    firsts = Counter(round_robin(queues, tick, random.Random(7))[0].name for tick in range(300))
    assert set(firsts.values()) == {100}


@pytest.mark.parametrize("strategy", [by_priority, by_weight, at_random, round_robin])
def test_no_queues_give_an_empty_order(strategy: Strategy) -> None:
    assert strategy([], 3, random.Random(8)) == []


@pytest.mark.parametrize("strategy", [by_priority, by_weight, at_random, round_robin])
def test_same_seed_gives_same_orders(strategy: Strategy) -> None:
    queues = weighted_queues(3, 2, 1, 4)
    first = [[q.name for q in strategy(queues, tick, random.Random(99))] for tick in range(50)]
    rng_a, rng_b = random.Random(11), random.Random(11)
    run_a = [[q.name for q in strategy(queues, tick, rng_a)] for tick in range(50)]
    run_b = [[q.name for q in strategy(queues, tick, rng_b)] for tick in range(50)]
    assert run_a == run_b
    assert first == [[q.name for q in strategy(queues, tick, random.Random(99))] for tick in range(50)]


@pytest.mark.parametrize("strategy", [by_priority, by_weight, at_random, round_robin])
def test_strategies_return_a_new_list_and_leave_input_alone(strategy: Strategy) -> None:
    queues = weighted_queues(3, 2, 1)
    before = list(queues)
    order = strategy(queues, 1, random.Random(12))
    assert order is not queues
    order.reverse()
    assert queues == before


def test_random_strategies_consume_only_the_given_rng() -> None:
    queues = weighted_queues(3, 2, 1)
    global_state = random.getstate()
    by_weight(queues, 0, random.Random(13))
    at_random(queues, 0, random.Random(13))
    assert random.getstate() == global_state
