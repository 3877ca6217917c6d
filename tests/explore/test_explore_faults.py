"""A fault test that explores (issue 41, item 9): seeded schedules of DynamoDB faults (throttling in each of its
forms, 5xx, resets, stalls, cancelled transactions), SQS faults, an app that answers, fails, hangs or is
overloaded, copies of keys sent later, a reload that adds a key, and a stop at a random point, against the
daemon's own receive -> deliver -> settle path in this process (`Daemon.run` on its wires), an SQS model of
our own (standard and FIFO queues, visibility, receive counts, redrive policies) and moto's DynamoDB behind
a faulting proxy. After each schedule the invariants of `invariants.py` are checked.

The CI runs BLOCKS x PER_BLOCK schedules (seeds 0..199), each block its own unit (slow), its schedules all at
once. A failing seed is printed with its schedule, its findings and the daemon's log lines about it,
and replays alone with

    WORKERLESS_SEED=<seed>[,<seed>...] ./dev test tests/explore/test_explore_faults.py::test_replay

which also prints every message's history. The schedule is the same; its timing is the machine's, and alone a
schedule starts sooner than among the 40 of its block, so a finding that hangs on timing may need its block run
again (the failure names it). WORKERLESS_SEED_BASE=N shifts the CI's seeds, to explore others.
"""

from __future__ import annotations

import contextlib
import gc
import logging
import os
import signal
import time
import traceback
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import gevent
import gevent.pool
import pytest

from tests.support import MotoServer

from .facts import every_history
from .invariants import Finding, check
from .run import explore
from .schedule import Schedule, build_schedule

BLOCKS = 5
PER_BLOCK = 40
AT_ONCE = 40  # schedules at once in one process: they mostly wait (visibility timeouts, back-offs, stalls)
REPLAY = "WORKERLESS_SEED"
BASE = int(os.environ.get("WORKERLESS_SEED_BASE") or 0)
LOG_LINES = 80  # of a failing schedule's daemon log
LINE_CHARACTERS = 400  # of one line (a long key makes long lines)


@dataclass
class Outcome:
    schedule: Schedule
    findings: list[Finding]
    seconds: float
    started: float = 0.0  # time.time() at the daemon's start
    stats: dict[str, int] = field(default_factory=dict)
    histories: str = ""  # every message's, for a replay
    stop_over: float = 0.0  # how long the stop took past shutdown_timeout


class Lines(logging.Handler):
    """The daemon's log records of every schedule in this process; a failing seed shows its own."""

    def __init__(self) -> None:
        super().__init__(logging.INFO)
        self.lines: list[tuple[float, str]] = []
        self.setFormatter(logging.Formatter("%(levelname)s %(name)s: %(message)s"))

    def emit(self, record: logging.LogRecord) -> None:
        line = self.format(record)
        if len(line) > LINE_CHARACTERS:
            line = f"{line[:LINE_CHARACTERS]}... ({len(line)} characters)"
        self.lines.append((record.created, line))

    def of(self, seed: int, started: float) -> list[str]:
        """A schedule's lines, timed from its start (as its findings are)."""
        mark = f"x{seed}-"
        return [f"{created - started:6.2f}s {line}" for created, line in self.lines if mark in line]


@contextlib.contextmanager
def daemon_logs() -> Iterator[Lines]:
    """The daemon's INFO lines kept here, not in pytest's capture (ten daemons at once say a lot); entered in the
    test's body, since pytest attaches its handler to the loggers that do not propagate when each phase starts."""
    logger = logging.getLogger("workerless_gevent")
    saved = logger.level, logger.propagate
    lines = Lines()
    logger.addHandler(lines)
    logger.setLevel(logging.INFO)
    logger.propagate = False
    try:
        yield lines
    finally:
        logger.removeHandler(lines)
        logger.setLevel(saved[0])
        logger.propagate = saved[1]


@pytest.fixture
def process_settings() -> Iterator[None]:
    """What Daemon.run changes for the whole process, put back afterwards: the signal handlers it installs, the
    collector's thresholds and frozen objects (lifecycle/runtime.py)."""
    saved = gc.get_threshold(), {signum: signal.getsignal(signum)
                                 for signum in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)}
    try:
        yield
    finally:
        gc.unfreeze()
        gc.set_threshold(*saved[0])
        for signum, handler in saved[1].items():
            signal.signal(signum, handler)


def run_one(seed: int, moto_server: MotoServer, dynamodb: Any, directory: Path, verbose: bool) -> Outcome:
    schedule = build_schedule(seed)
    started = time.monotonic()
    workdir = directory / f"seed-{seed}"
    workdir.mkdir()
    try:
        run = explore(schedule, moto_server.url, dynamodb, workdir)
        findings = check(run)
    except Exception:  # a bug of the harness (or a start that failed): the seed's finding, with its traceback
        return Outcome(schedule, [Finding("harness", traceback.format_exc())], time.monotonic() - started)
    finally:
        try:
            dynamodb.delete_table(TableName=f"x{seed}-idem")
        except Exception:  # never created
            pass
    stats = {"deliveries": len(run.app.deliveries), "sqs_calls": len(run.sqs.calls),
             "store_calls": len(run.store.calls), "store_faults": sum(1 for c in run.store.calls if c.fault),
             "sqs_faults": sum(1 for c in run.sqs.calls if c.fault)}
    return Outcome(schedule, findings, time.monotonic() - started, run.started_at, stats,
                   every_history(run) if verbose else "", run.stopped - run.stop_requested - schedule.shutdown_timeout)


def run_many(seeds: list[int], moto_server: MotoServer, directory: Path, at_once: int) -> list[Outcome]:
    dynamodb = moto_server.client("dynamodb", max_pool_connections=at_once + 5)  # each schedule makes its table
    pool = gevent.pool.Pool(at_once)
    jobs = [pool.spawn(run_one, seed, moto_server, dynamodb, directory, at_once == 1) for seed in seeds]
    gevent.joinall(jobs, raise_error=True)
    return [job.value for job in jobs]


def report(outcomes: list[Outcome], logs: Lines, seconds: float) -> str:
    totals: dict[str, int] = {}
    counts: dict[str, int] = {}
    for outcome in outcomes:
        for name, value in outcome.stats.items():
            totals[name] = totals.get(name, 0) + value
        for finding in outcome.findings:
            counts[finding.invariant] = counts.get(finding.invariant, 0) + 1
    failing = sorted(outcome.schedule.seed for outcome in outcomes if outcome.findings)
    head = (f"{len(outcomes)} schedules in {seconds:.1f}s (longest {max(o.seconds for o in outcomes):.1f}s): "
            f"{', '.join(f'{value} {name}' for name, value in totals.items())}, stops at most "
            f"{max(o.stop_over for o in outcomes):+.3f}s past shutdown_timeout; "
            f"{len(failing)} failing {failing} {counts}")
    return "\n".join([head, *(describe(outcome, logs) for outcome in outcomes
                              if outcome.findings or outcome.histories)])


def describe(outcome: Outcome, logs: Lines) -> str:
    seed = outcome.schedule.seed
    lines = logs.of(seed, outcome.started)
    block = (seed - BASE) // PER_BLOCK
    return (f"\n===== seed {seed}: replay alone with {REPLAY}={seed} ./dev test "
            f"tests/explore/test_explore_faults.py::test_replay, or with its block as CI ran it (its timing then is "
            f"closer): ./dev test 'tests/explore/test_explore_faults.py::test_schedules_keep_the_invariants[{block}]' "
            f"-m slow\n"
            + "".join(f"FINDING {finding}\n" for finding in outcome.findings)
            + f"{outcome.schedule.describe()}\n  daemon log ({min(len(lines), LOG_LINES)} of {len(lines)} lines):\n"
            + "\n".join("    " + line for line in lines[:LOG_LINES])
            + (f"\n  every message:\n{outcome.histories}" if outcome.histories else ""))


def explore_seeds(seeds: list[int], moto_server: MotoServer, tmp_path: Path, at_once: int = AT_ONCE) -> None:
    started = time.monotonic()
    with daemon_logs() as logs:
        outcomes = run_many(seeds, moto_server, tmp_path, at_once)
    text = report(outcomes, logs, time.monotonic() - started)
    print(text)  # the whole report: pytest shows it with the failure (and with -s)
    assert not any(outcome.findings for outcome in outcomes), text.splitlines()[0]


@pytest.mark.slow
@pytest.mark.timeout(900)
@pytest.mark.parametrize("block", range(BLOCKS))
@pytest.mark.usefixtures("process_settings")
def test_schedules_keep_the_invariants(block: int, moto_server: MotoServer, tmp_path: Path) -> None:
    first = BASE + block * PER_BLOCK
    explore_seeds(list(range(first, first + PER_BLOCK)), moto_server, tmp_path)


@pytest.mark.timeout(900)
@pytest.mark.usefixtures("process_settings")
def test_replay(moto_server: MotoServer, tmp_path: Path) -> None:
    """WORKERLESS_SEED=1234[,5678] replays those schedules (alone, one after the other)."""
    text = os.environ.get(REPLAY, "").strip()
    if not text:
        pytest.skip(f"replays the seeds in {REPLAY} (e.g. {REPLAY}=1234)")
    explore_seeds([int(part) for part in text.split(",") if part.strip()], moto_server, tmp_path, at_once=1)
