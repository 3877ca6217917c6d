"""Run the test suite as several pytest processes at once; `./dev test` uses it.

    python tests/parallel.py [pytest args]     # what ./dev test runs, in .venv
    ./dev test --serial [pytest args]          # one plain pytest process instead (or TEST_WORKERS=1)

Why not pytest-xdist: its workers start through execnet, whose threads run before tests/conftest.py
monkey-patches gevent; after the patch, xdist's worker queue is made with gevent's Event, which
execnet's real thread sets and the main thread waits on: with `-n 4 --dist loadfile` (xdist 3.8,
execnet 2.1) every worker died with `gevent.exceptions.LoopExit` in `xdist/remote.py` TestQueue.get
before running a test.

Here each shard is what `./dev test --serial` runs, `python -m gevent.monkey --module pytest ARGS`
(gevent patched before anything else is imported), with this module as a plugin. Every shard
collects the same tests, then claims units one at a time (an O_EXCL file per unit in a directory
the shards share) and runs them: a unit is a test file's tests, or one test marked slow. Units go
longest first by the durations of earlier runs (kept in ~/.cache/workerless-gevent), so one long
test does not start last. Session fixtures (the moto server) are per shard; after each unit only
they stay set up. Each shard's output goes to a log, printed in full if the shard fails; the
closing line adds up the shards' closing lines.

The tests mostly wait on subprocesses and sockets, so there are more shards than cores:
TEST_WORKERS, default DEFAULT_WORKERS below. Measured on 2 cores: 857 s in one process; 229-236 s
with 4 shards, 209 s with 6 (the bound is the longest test, about 200-240 s). With the CPU-heavy
chaos tests and the machine busy, 6 shards pushed test_polling's weighted backlog test past its
300 s timeout once, while 4 passed everything in 329 s: hence 4.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import cast

import pytest

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_WORKERS = 4
SHARD_DIR = "WORKERLESS_TEST_SHARD_DIR"  # set for the shards by the runner
SHARD_NAME = "WORKERLESS_TEST_SHARD"
# Options after which running more than one process makes no sense or breaks (a debugger, a listing).
SINGLE_PROCESS_OPTIONS = {"--pdb", "--trace", "--collect-only", "--co", "--fixtures", "--fixtures-per-test",
                          "--markers", "-h", "--help", "--version", "-V", "--setup-plan", "--lf", "--last-failed",
                          "--sw", "--stepwise", "--ff", "--failed-first"}
OUTCOMES = ("failed", "passed", "skipped", "deselected", "xfailed", "xpassed", "warnings", "errors")


# --- the plugin, in each shard --------------------------------------------------------------------

def durations_path(shard_dir: Path) -> Path:
    return shard_dir / "durations.json"


@pytest.hookimpl(tryfirst=True)
def pytest_runtestloop(session: pytest.Session) -> bool | None:
    """pytest's own loop (_pytest/main.py), over the units this shard claims instead of all items."""
    shard_dir = os.environ.get(SHARD_DIR)
    if not shard_dir:
        return None
    if session.testsfailed and not session.config.option.continue_on_collection_errors:
        raise session.Interrupted(f"{session.testsfailed} error(s) during collection")
    if session.config.option.collectonly:
        return True
    units: dict[str, list[pytest.Item]] = {}  # what a shard claims: a test file, or one slow test
    for item in session.items:
        units.setdefault(item.nodeid if item.get_closest_marker("slow") else item.nodeid.split("::")[0], []).append(item)
    try:
        known = json.loads(durations_path(Path(shard_dir)).read_text())
    except (OSError, ValueError):
        known = {}
    order = sorted(units, key=lambda name: (-known.get(name, guess_seconds(name, units[name])), name))
    progress = Path(shard_dir) / "progress.jsonl"
    name = os.environ.get(SHARD_NAME, "shard")

    def claim_next() -> str | None:
        while order:
            candidate = order.pop(0)
            token = Path(shard_dir) / ("claim-" + hashlib.sha1(candidate.encode()).hexdigest())
            try:
                os.close(os.open(token, os.O_CREAT | os.O_EXCL | os.O_WRONLY))
            except FileExistsError:
                continue
            return candidate
        return None

    # After a unit's last test, only what the whole session shares (the moto server) stays set up: the
    # next unit is claimed once this one is done, not before, so a long test holds no other unit back.
    keep_session = cast(pytest.Item, KeepSessionOnly(session))
    while (current := claim_next()) is not None:
        items = units[current]
        started = time.monotonic()
        counts_before = Counter(_counts)
        for index, item in enumerate(items):
            nextitem = items[index + 1] if index + 1 < len(items) else keep_session
            item.config.hook.pytest_runtest_protocol(item=item, nextitem=nextitem)
            if session.shouldfail:
                raise session.Failed(session.shouldfail)
            if session.shouldstop:
                raise session.Interrupted(session.shouldstop)
        counts = _counts - counts_before
        event = {"shard": name, "unit": current, "seconds": round(time.monotonic() - started, 2), **counts}
        with open(progress, "a", encoding="utf-8") as handle:
            handle.write(json.dumps(event) + "\n")
    return True  # pytest_sessionfinish tears the session down


class KeepSessionOnly:
    """The `nextitem` of a unit's last test: pytest tears down every node that is not in `nextitem.listchain()`
    (_pytest/runner.py SetupState.teardown_exact), so this keeps the session's fixtures and nothing else."""

    def __init__(self, session: pytest.Session) -> None:
        self.session = session

    def listchain(self) -> list[pytest.Session]:
        return [self.session]


_counts: Counter[str] = Counter()  # this shard's outcomes so far


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    if report.failed:
        _counts["failed" if report.when == "call" else "errors"] += 1
    elif report.skipped:
        _counts["xfailed" if hasattr(report, "wasxfail") else "skipped"] += 1
    elif report.when == "call":
        _counts["xpassed" if hasattr(report, "wasxfail") else "passed"] += 1


def guess_seconds(unit: str, items: list[pytest.Item]) -> float:
    """No duration known yet (a first run, a new test): slow tests first, the longest timeout first,
    then test files by their number of tests, end-to-end ones weighing most."""
    if items[0].get_closest_marker("slow"):
        timeout = items[0].get_closest_marker("timeout")
        return 1000.0 + float(timeout.args[0] if timeout and timeout.args else 300)
    return len(items) * (2.0 if "/e2e/" in unit else 0.3 if "/integration/" in unit else 0.02)


# --- the runner ------------------------------------------------------------------------------------

def paths_in(args: list[str]) -> list[str]:
    """The arguments that name test files, directories or node ids (the rest are options and their values)."""
    return [arg for arg in args if not arg.startswith("-") and (ROOT / arg.split("::")[0]).exists()]


def wants_one_process(args: list[str]) -> bool:
    paths = paths_in(args)
    if any(arg.split("=")[0] in SINGLE_PROCESS_OPTIONS for arg in args):
        return True
    if any("::" in path for path in paths):
        return True
    return bool(paths) and all((ROOT / path).is_file() for path in paths) and len(paths) == 1


def shard_command(args: list[str]) -> list[str]:
    return [sys.executable, "-m", "gevent.monkey", "--module", "pytest", *args]


def summary_counts(log: str) -> Counter[str]:
    """pytest's closing line ("2 failed, 300 passed, 4 skipped in 12.00s"), as counts."""
    for line in reversed(log.splitlines()):
        if re.search(r"\b(passed|failed|skipped|no tests ran|errors?|deselected)\b.* in [\d.]+s", line):
            plural = {"warning": "warnings", "error": "errors"}
            counts: Counter[str] = Counter()
            for number, word in re.findall(r"(\d+) (\w+)", line):
                counts[plural.get(word, word)] += int(number)
            return counts
    return Counter()


def closing_line(counts: Counter[str], seconds: float) -> str:
    parts = [f"{counts[word]} {word[:-1] if counts[word] == 1 and word in ('warnings', 'errors') else word}"
             for word in OUTCOMES if counts[word]]
    return (", ".join(parts) or "no tests ran") + f" in {seconds:.2f}s"


def run_shards(args: list[str], workers: int) -> int:
    started = time.monotonic()
    cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "workerless-gevent"
    known_durations = cache / "test-durations.json"  # shared by the checkouts and venvs of this machine
    shard_dir = Path(tempfile.mkdtemp(prefix="workerless-tests-"))
    if known_durations.exists():
        shutil.copy(known_durations, durations_path(shard_dir))
    print(f"tests: {workers} pytest processes at once, each taking a test file (or a slow test) at a time;"
          f" logs in {shard_dir}; all in one process: {shlex.join(['./dev', 'test', '--serial', *args])}",
          flush=True)
    shards: list[tuple[str, subprocess.Popen[bytes], Path]] = []
    for number in range(workers):
        name = f"shard{number}"
        log = shard_dir / f"{name}.log"
        env = {**os.environ, SHARD_DIR: str(shard_dir), SHARD_NAME: name}
        with open(log, "wb") as handle:
            command = shard_command(["-p", "tests.parallel", *args])
            shards.append((name, subprocess.Popen(command, cwd=ROOT, env=env, stdout=handle,
                                                  stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL), log))
    progress = shard_dir / "progress.jsonl"
    seen = 0
    durations: dict[str, float] = {}
    try:
        while True:
            running = [proc for _, proc, _ in shards if proc.poll() is None]
            if progress.exists():
                lines = progress.read_text(encoding="utf-8").split("\n")[:-1]  # the last one may be half written
                for line in lines[seen:]:
                    event = json.loads(line)
                    seen += 1
                    durations[event["unit"]] = event["seconds"]
                    tally = ", ".join(f"{event[word]} {word}" for word in OUTCOMES if event.get(word))
                    mark = "FAILED " if event.get("failed") or event.get("errors") else ""
                    print(f"[{time.monotonic() - started:6.1f}s] {mark}{event['unit']}: {tally or 'nothing ran'}"
                          f" ({event['seconds']:.1f}s, {event['shard']})", flush=True)
            if not running:
                break
            time.sleep(0.5)
    except KeyboardInterrupt:
        for _, proc, _ in shards:
            proc.terminate()
        for _, proc, _ in shards:
            proc.wait()
        print(f"interrupted; logs in {shard_dir}", file=sys.stderr)
        return 130
    totals: Counter[str] = Counter()
    codes: list[int] = []
    printed: dict[str, str] = {}  # output without its timings -> the shard that printed it
    for name, proc, log in shards:
        text = log.read_text(encoding="utf-8", errors="replace")
        codes.append(proc.returncode)
        same = re.sub(r" in [\d.]+s.*", "", text)
        if proc.returncode not in (0, 5) and same in printed:  # a collection error: every shard has it
            print(f"\n{name} exited {proc.returncode} with the same output as {printed[same]}", flush=True)
            continue
        counts = summary_counts(text)
        deselected = max(totals["deselected"], counts.pop("deselected", 0))  # each shard deselects the same
        totals += counts
        totals["deselected"] = deselected
        if proc.returncode not in (0, 5):
            printed[same] = name
            print(f"\n{'=' * 30} {name} exited {proc.returncode}: its output {'=' * 30}\n{text}", flush=True)
    if durations:  # hints for the next run's order only, so any trouble here is ignored
        try:
            cache.mkdir(parents=True, exist_ok=True)
            known = json.loads(known_durations.read_text()) if known_durations.exists() else {}
            fresh = cache / f"test-durations.{os.getpid()}.json"
            fresh.write_text(json.dumps({**known, **durations}, indent=0, sort_keys=True))
            fresh.replace(known_durations)
        except (OSError, ValueError):
            pass
    failing = [code for code in codes if code not in (0, 5)]
    code = failing[0] if failing else 5 if all(code == 5 for code in codes) else 0
    if code == 0:
        shutil.rmtree(shard_dir, ignore_errors=True)
    else:
        print(f"\nshard logs kept in {shard_dir}; failing tests alone: ./dev test --serial <file>::<test>")
    print(closing_line(totals, time.monotonic() - started), flush=True)
    return code


def main(argv: list[str]) -> int:
    os.chdir(ROOT)
    args = list(argv)
    serial = "--serial" in args
    args = [arg for arg in args if arg != "--serial"]
    workers = int(os.environ.get("TEST_WORKERS") or DEFAULT_WORKERS)
    if serial or workers <= 1 or wants_one_process(args):
        os.execv(sys.executable, shard_command(args))
    return run_shards(args, workers)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
