"""The startup scenario: process start to first delivery, daemon against the plain baseline, with where the daemon's
start goes (startup_breakdown.py)."""

from __future__ import annotations

import calendar
import json
import subprocess
import sys
import time
from typing import Any

import harness
from figures import compare
from harness import unique
from processes import Worker, make_baseline
from scenario import Block, Check, Row, Scenario, check, compared, interleave
from startup_breakdown import details, startup_breakdown

CONCURRENCY = 50
POLL_FOR = 20
KEYS = ("first_delivery_s", "started_s", "started_to_first_delivery_s", "exit_s", "first_delivery_to_exit_s",
        "cpu_s_to_exit", "peak_rss_mb")


def log_time_ms(worker: Worker, marker: str) -> float | None:
    """Epoch ms of the first JSON log line whose message starts with marker (the log has ms resolution,
    truncated: +0.5 ms puts it mid-millisecond)."""
    for line in worker.log_text().splitlines():
        if not line.startswith("{") or marker not in line:
            continue
        try:
            entry = json.loads(line)
        except ValueError:
            continue
        if not str(entry.get("message", "")).startswith(marker):
            continue
        stamp, _, millis = entry["time"].rstrip("Z").partition(".")
        return calendar.timegm(time.strptime(stamp, "%Y-%m-%dT%H:%M:%S")) * 1000 + int(millis or 0) + 0.5
    return None


def startup_try(bench: Any, kind: str, label: str, python_flags: tuple[str, ...] = ()) -> dict[str, Any]:
    """One start: a queue with one message waiting, the worker with --max-messages=1, timed from just
    before Popen to the sink's arrival (sink clock mapped to ours), then to its exit."""
    name = unique(label)
    url = bench.sqs.create(name)
    bench.sqs.send_one(url, "startup")
    bench.sink.reset(0)
    offset = bench.sink.clock_offset_ms()
    if kind == "daemon":
        worker = bench.daemon(label, queues=[name], concurrency=CONCURRENCY, poll_for=POLL_FOR,
                              extra=("--max-messages=1", "--log-format=json"))
    else:
        worker = make_baseline(label, bench.fauxqs.url, queues=[name], sink_url=bench.sink.url,
                               concurrency=CONCURRENCY, poll_for=POLL_FOR, max_messages=1)
        bench.workers.append(worker)
    worker.argv[1:1] = list(python_flags)
    popen_ms = time.time() * 1000
    worker.start()
    stats = bench.sink.wait(1, timeout=30)
    exit_ms = None
    deadline = time.monotonic() + 40
    while time.monotonic() < deadline:
        if worker.poll() is not None:
            exit_ms = time.time() * 1000 - popen_ms
            break
        time.sleep(0.002)
    if exit_ms is None:
        worker.kill()
    bench.sqs.delete(url)
    if not stats["count"]:
        raise RuntimeError(f"{label}: no delivery within 30 s; see {worker.log_path}")
    first_ms = stats["first"] - offset - popen_ms
    started_at = log_time_ms(worker, "workerless started") if kind == "daemon" else None
    started_ms = started_at - popen_ms if started_at is not None else None
    usage = worker.rusage
    return {"first_delivery_s": first_ms / 1000, "started_s": started_ms / 1000 if started_ms is not None else None,
            "started_to_first_delivery_s": (first_ms - started_ms) / 1000 if started_ms is not None else None,
            "exit_s": exit_ms / 1000 if exit_ms is not None else None,
            "first_delivery_to_exit_s": (exit_ms - first_ms) / 1000 if exit_ms is not None else None,
            "cpu_s_to_exit": usage.ru_utime + usage.ru_stime if usage is not None else None,
            "peak_rss_mb": usage.ru_maxrss / 1024 if usage is not None else None, "exit_code": worker.exit_code}


def startup(bench: Any) -> Block:
    tries = 3 if bench.settings.quick else 5  # per run and side
    # Bytecode as `pip install` leaves it: without it (PYTHONDONTWRITEBYTECODE, a fresh checkout) every start
    # compiles the package's sources again, about 40 ms here.
    root = harness.DAEMON_BIN.resolve().parent.parent
    subprocess.run([sys.executable, "-m", "compileall", "-q", str(root / "workerless_gevent")], check=True)
    runs = interleave(bench.settings.runs * tries, ("daemon", "baseline"),
                      lambda kind, i: startup_try(bench, kind, f"startup-{kind}-{i // tries}-{i % tries}"),
                      lambda kind, i, r: (f"startup {kind} run {i // tries + 1}.{i % tries + 1}: first delivery "
                                          f"{r['first_delivery_s']:.3f} s, started {r['started_s'] or 0:.3f} s, exit "
                                          f"{r['exit_s'] or float('nan'):.3f} s, CPU {r['cpu_s_to_exit'] or 0:.3f} s"))
    out = compare(runs, KEYS)
    return {**out, "tries": len(runs["daemon"]), "concurrency": CONCURRENCY, "poll_for": POLL_FOR,
            "breakdown": startup_breakdown(bench, lambda: startup_try(
                bench, "daemon", "startup-importtime", python_flags=("-X", "importtime")))}


def rows(block: Block) -> list[Row]:
    return [compared(label, block, key, digits) for label, key, digits in (
        ("startup: Popen -> first delivery, s", "first_delivery_s", 3),
        ("  startup: Popen -> 'workerless started', s", "started_s", 3),
        ("  startup: 'started' -> first delivery, s", "started_to_first_delivery_s", 3),
        ("  startup: first delivery -> exit (--max-messages=1), s", "first_delivery_to_exit_s", 3),
        ("  startup: CPU s until exit", "cpu_s_to_exit", 3), ("  startup: peak RSS MB", "peak_rss_mb", 1))]


def checks(block: Block) -> list[Check]:
    return [check("startup: process start to first delivery, daemon (median)",
                  block["daemon"]["first_delivery_s"]["median"], "<= 0.25 s", lambda v: v <= 0.25)]


SCENARIOS = (Scenario("startup", startup, rows, checks, details),)
