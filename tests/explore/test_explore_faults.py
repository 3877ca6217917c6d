"""A fault test that explores (issue 41, item 9; partial faults, issue 48): seeded schedules of DynamoDB faults
(throttling in each of its forms, 5xx, resets, stalls, cancelled transactions; whole outages, a share of one
kind of call, slow calls), SQS faults (the same: whole, a share of one action, slow, a GetQueueUrl that never
answers), an app that answers, fails, hangs or is overloaded, takes one message per POST, a batch per POST or
a Lambda Invoke (a share of them throttled), FIFO batches with payloads in S3 (one object missing at times),
copies of keys sent later, reloads (SIGHUP: the key added, a queue added by name, the queue's settings changed,
a second SIGHUP), and a stop (SIGTERM) at a random point, during a reload or during a hold, against the daemon's
own receive -> deliver -> settle path in this process (`Daemon.run` on its wires), an SQS model of our own
(standard and FIFO queues, visibility, receive counts, redrive policies), moto's DynamoDB behind a faulting
proxy and moto's S3. After each schedule the invariants of `invariants.py` and `tries.py` are checked.

Two tests, each run by the CI:
- test_schedules_keep_the_invariants: BLOCKS x PER_BLOCK general schedules (seeds 0..119), each block its own
  unit (slow), its schedules all at once. WORKERLESS_EXPLORE_BLOCKS=N runs N blocks (e.g. 25: a thousand
  schedules, locally), WORKERLESS_SEED_BASE=N shifts the seeds, to explore others.
- test_scenario: the scenarios of `scenarios.py`, each a schedule family fixed on one partial fault of issue 48
  (a partly throttled table, a SIGTERM during a stalled reload, a FIFO batch with a payload missing, back-off
  behind a poison group-mate): on the code before that issue's fixes (18d15f8) each finds its bug, after them
  each keeps every invariant.
  WORKERLESS_SCENARIO_SEEDS=N runs seeds 0..N-1 of each instead of `scenarios.CI_SEEDS`.

A failing schedule is printed with its schedule, its findings and the daemon's log lines about it, and replays
alone with

    WORKERLESS_SEED=<seed or scenario:seed>[,...] ./dev test tests/explore/test_explore_faults.py::test_replay

which also prints every message's history. The schedule is the same; its timing is the machine's, and alone a
schedule starts sooner than among the 40 of its block, so a finding that hangs on timing may need its block run
again (the failure names it).
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

from .histories import every_history
from .invariants import Finding, check
from .run import Moto, explore
from .scenarios import CI_SEEDS, SCENARIOS
from .schedule import Schedule, build_schedule, parse_name

# The CI's share, kept modest (the suite runs on a loaded 2-core machine); more locally with the variables below.
BLOCKS = int(os.environ.get("WORKERLESS_EXPLORE_BLOCKS") or 3)
PER_BLOCK = 40
AT_ONCE = 40  # schedules at once in one process: they mostly wait (visibility timeouts, back-offs, stalls)
REPLAY = "WORKERLESS_SEED"
BASE = int(os.environ.get("WORKERLESS_SEED_BASE") or 0)
SCENARIO_SEEDS = int(os.environ.get("WORKERLESS_SCENARIO_SEEDS") or 0)
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

    def of(self, schedule: Schedule, started: float) -> list[str]:
        """A schedule's lines, timed from its start (as its findings are)."""
        mark = f"{schedule.prefix}-"
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


def run_one(schedule: Schedule, moto: Moto, directory: Path, verbose: bool) -> Outcome:
    started = time.monotonic()
    workdir = directory / f"schedule-{schedule.name.replace(':', '-')}"
    workdir.mkdir()
    try:
        run = explore(schedule, moto, workdir)
        findings = check(run)
    except Exception:  # a bug of the harness (or a start that failed): the schedule's finding, with its traceback
        return Outcome(schedule, [Finding("harness", traceback.format_exc())], time.monotonic() - started)
    finally:
        drop(moto, schedule)
    stats = {"deliveries": len(run.app.deliveries), "sqs_calls": len(run.sqs.calls),
             "store_calls": len(run.store.calls), "store_faults": sum(1 for c in run.store.calls if c.failed),
             "sqs_faults": sum(1 for c in run.sqs.calls if c.fault and c.fault != "slow")}
    return Outcome(schedule, findings, time.monotonic() - started, run.started_at, stats,
                   every_history(run) if verbose else "", run.stopped - run.stop_requested - schedule.shutdown_timeout)


def drop(moto: Moto, schedule: Schedule) -> None:
    """The schedule's table and payload bucket, if made."""
    try:
        moto.dynamodb.delete_table(TableName=f"{schedule.prefix}-idem")
    except Exception:  # never created
        pass
    if schedule.large_payloads:
        bucket = f"{schedule.prefix}-payloads"
        try:
            for item in moto.s3.list_objects_v2(Bucket=bucket).get("Contents", []):
                moto.s3.delete_object(Bucket=bucket, Key=item["Key"])
            moto.s3.delete_bucket(Bucket=bucket)
        except Exception:  # never created
            pass


def run_many(schedules: list[Schedule], moto_server: MotoServer, directory: Path, at_once: int) -> list[Outcome]:
    connections = {"max_pool_connections": at_once + 5}  # each schedule makes its table (and its bucket)
    moto = Moto(moto_server.url, moto_server.client("dynamodb", **connections), moto_server.client("s3", **connections))
    pool = gevent.pool.Pool(at_once)
    jobs = [pool.spawn(run_one, schedule, moto, directory, at_once == 1) for schedule in schedules]
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
    failing = [outcome.schedule.name for outcome in outcomes if outcome.findings]
    head = (f"{len(outcomes)} schedules in {seconds:.1f}s (longest {max(o.seconds for o in outcomes):.1f}s): "
            f"{', '.join(f'{value} {name}' for name, value in totals.items())}, stops at most "
            f"{max(o.stop_over for o in outcomes):+.3f}s past shutdown_timeout; "
            f"{len(failing)} failing {failing} {counts}")
    return "\n".join([head, *(describe(outcome, logs) for outcome in outcomes
                              if outcome.findings or outcome.histories)])


def describe(outcome: Outcome, logs: Lines) -> str:
    schedule = outcome.schedule
    lines = logs.of(schedule, outcome.started)
    if schedule.scenario:
        again = (f"its scenario as CI ran it: ./dev test "
                 f"'tests/explore/test_explore_faults.py::test_scenario[{schedule.scenario}]'")
    else:
        again = (f"its block as CI ran it (its timing then is closer): ./dev test "
                 f"'tests/explore/test_explore_faults.py::test_schedules_keep_the_invariants"
                 f"[{(schedule.seed - BASE) // PER_BLOCK}]' -m slow")
    return (f"\n===== {schedule.name}: replay alone with {REPLAY}={schedule.name} ./dev test "
            f"tests/explore/test_explore_faults.py::test_replay, or with {again}\n"
            + "".join(f"FINDING {finding}\n" for finding in outcome.findings)
            + f"{schedule.describe()}\n  daemon log ({min(len(lines), LOG_LINES)} of {len(lines)} lines):\n"
            + "\n".join("    " + line for line in lines[:LOG_LINES])
            + (f"\n  every message:\n{outcome.histories}" if outcome.histories else ""))


def explore_schedules(schedules: list[Schedule], moto_server: MotoServer, tmp_path: Path,
                      at_once: int = AT_ONCE) -> None:
    started = time.monotonic()
    with daemon_logs() as logs:
        outcomes = run_many(schedules, moto_server, tmp_path, at_once)
    text = report(outcomes, logs, time.monotonic() - started)
    print(text)  # the whole report: pytest shows it with the failure (and with -s)
    assert not any(outcome.findings for outcome in outcomes), text.splitlines()[0]


@pytest.mark.slow
@pytest.mark.timeout(900)
@pytest.mark.parametrize("block", range(BLOCKS))
@pytest.mark.usefixtures("process_settings")
def test_schedules_keep_the_invariants(block: int, moto_server: MotoServer, tmp_path: Path) -> None:
    first = BASE + block * PER_BLOCK
    explore_schedules([build_schedule(seed) for seed in range(first, first + PER_BLOCK)], moto_server, tmp_path)


@pytest.mark.slow
@pytest.mark.timeout(900)
@pytest.mark.parametrize("scenario", sorted(SCENARIOS))
@pytest.mark.usefixtures("process_settings")
def test_scenario(scenario: str, moto_server: MotoServer, tmp_path: Path) -> None:
    """Issue 48's partial faults (scenarios.py): before that issue's fixes each scenario finds its bug (the
    failure names the invariant); with them, this is their check."""
    seeds = range(SCENARIO_SEEDS) if SCENARIO_SEEDS else CI_SEEDS[scenario]
    explore_schedules([build_schedule(seed, scenario) for seed in seeds], moto_server, tmp_path)


@pytest.mark.timeout(900)
@pytest.mark.usefixtures("process_settings")
def test_replay(moto_server: MotoServer, tmp_path: Path) -> None:
    """WORKERLESS_SEED=1234[,throttled_claims:3] replays those schedules (alone, one after the other)."""
    text = os.environ.get(REPLAY, "").strip()
    if not text:
        pytest.skip(f"replays the schedules in {REPLAY} (e.g. {REPLAY}=1234 or {REPLAY}=throttled_claims:0)")
    names = [parse_name(name) for name in text.split(",") if name.strip()]
    schedules = [build_schedule(seed, scenario) for scenario, seed in names]
    explore_schedules(schedules, moto_server, tmp_path, at_once=1)
