"""bench/table.py: every scenario is a row that its kind can run (its warm-ups, pairs and targets name what the row
has), and the bench stays within its size: at most 3,500 lines of .py and .mjs, no module over 250."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from tests.support import REPO_ROOT

BENCH = REPO_ROOT / "bench"
sys.path.insert(0, str(BENCH))

import run  # noqa: E402
from shapes import Case, Row, check, place  # noqa: E402
from table import ROWS, SCENARIOS  # noqa: E402


@pytest.mark.parametrize("row", ROWS, ids=lambda row: row.name)
def test_a_row_names_only_what_it_has(row: Row) -> None:
    assert row.kind in run.KINDS
    assert set(row.warmup) <= set(row.cases)
    for _, over, under, _ in row.paired:
        assert {over, under} <= set(row.cases)
    assert all(op in (">=", "<=", "==", "<") for _, _, op, _ in row.targets)


def test_the_rows_have_one_name_each_and_a_full_run_takes_the_fair_queue_rows() -> None:
    assert len(SCENARIOS) == len(ROWS)
    full = [row.name for row in ROWS if row.in_full_run]
    assert {"throughput", "latency", "fair_alone", "fair_queue"} <= set(full)
    assert not {"soak", "cpu_check", "instructions"} & set(full)


def test_the_fair_queue_row_takes_the_cap_from_its_configuration() -> None:
    cases = SCENARIOS["fair_queue"].cases
    assert "max_concurrency_per_group" not in cases["without"].queue
    assert cases["with"].queue["max_concurrency_per_group"] == 10


def test_a_target_reads_a_spread_by_its_median_and_is_unknown_without_a_figure() -> None:
    row = Row("r", targets=(("rate", "c50.daemon.msgs_per_s", ">=", 3), ("missing", "c10.x", "<=", 1)))
    block: dict[str, object] = {}
    place(block, "c50/daemon", {"msgs_per_s": {"median": 3.5, "min": 2, "max": 4, "runs": []}})
    assert [(item["value"], item["pass"]) for item in check(row, block)] == [(3.5, True), (None, None)]


def test_a_case_knows_the_rate_its_slots_allow_against_a_slow_app() -> None:
    assert Case(concurrency=50, app_ms=100, target={"batch_size": 10}).ideal() == 5000
    assert Case(app_ms=0).ideal() is None


def lines(path: Path) -> int:
    return len(path.read_text(encoding="utf-8").splitlines())


def test_the_bench_stays_within_its_size() -> None:
    modules = [*BENCH.glob("*.py"), *BENCH.glob("*.mjs")]
    assert sum(lines(module) for module in modules) <= 3500
    assert max((lines(module), module.name) for module in modules)[0] <= 250
