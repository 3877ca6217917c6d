"""The one shape of a scenario of bench/run.py: its run on the Bench (paired runs, interleaved), its rows, its targets."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Iterable, TypeVar

from figures import Runs, cell, ratio_text
from harness import log

Row = tuple[str, str, str, str]  # figure, workerless, plain baseline (or another case), ratio
Check = dict[str, Any]
Block = dict[str, Any]
K = TypeVar("K")


def _none(block: Block) -> list[Any]:
    return []


@dataclass(frozen=True)
class Scenario:
    """One --only name: `run` returns its figures (the JSON block), `rows` and `notes` print them, `checks` holds
    them to their targets."""
    name: str
    run: Callable[[Any], Block]
    rows: Callable[[Block], list[Row]] = _none
    checks: Callable[[Block], list[Check]] = _none
    notes: Callable[[Block], list[str]] = _none


def interleave(runs: int, cases: Iterable[K], one: Callable[[K, int], dict[str, Any]],
               say: Callable[[K, int, dict[str, Any]], str], order: Callable[[int], list[K]] | None = None
               ) -> dict[K, Runs]:
    """Every case once in each of `runs` rounds, so machine noise hits all cases alike and run i of one case pairs
    with run i of another; `say` is each run's progress line."""
    cases = list(cases)
    out: dict[K, Runs] = {case: [] for case in cases}
    for index in range(runs):
        for case in order(index) if order else cases:
            result = one(case, index)
            log(f"  {say(case, index, result)}")
            out[case].append(result)
    return out


def check(name: str, value: Any, limit: str, ok: Callable[[Any], bool]) -> Check:
    """A target: its figure, the limit in words, and whether it passed (None: no figure)."""
    return {"target": name, "value": value, "limit": limit, "pass": None if value is None else bool(ok(value))}


def compared(label: str, block: Block, key: str, digits: int = 1, over: str = "daemon",
             under: str = "baseline") -> Row:
    """A figure of one side beside the other's, and the ratio of their medians."""
    ratio = block.get(f"ratio_{over}_to_{under}", {}).get(key)
    return (label, cell(block[over].get(key), digits), cell(block[under].get(key), digits), ratio_text(ratio))


def alone(label: str, figure: Any, digits: int = 1, ratio: str = "") -> Row:
    """A figure of the daemon alone (the baseline column empty)."""
    return (label, cell(figure, digits) if isinstance(figure, dict) else str(figure), "", ratio)
