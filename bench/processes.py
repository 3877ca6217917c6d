"""The measured processes: bin/workerless and bench/baseline.py as subprocesses with their logs, sampled from /proc."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import harness
from harness import AWS_ENV, BENCH, LOGS, ROOT

CLOCK_TICKS = os.sysconf("SC_CLK_TCK")

def proc_cpu_seconds(pid: int) -> float | None:
    try:
        with open(f"/proc/{pid}/stat") as handle:
            fields = handle.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / CLOCK_TICKS  # utime, stime
    except (OSError, IndexError, ValueError):
        return None

def proc_status_kb(pid: int, key: str) -> int | None:
    try:
        with open(f"/proc/{pid}/status") as handle:
            return next((int(line.split()[1]) for line in handle if line.startswith(key + ":")), None)
    except (OSError, ValueError):
        return None

def tree_rss_kb(pid: int) -> int | None:
    """VmRSS of pid and every process under it (a container's memory limit counts them all); None once gone."""
    found, todo = [], [pid]
    while todo:
        found.append(current := todo.pop())
        try:
            for task in os.listdir(f"/proc/{current}/task"):
                with open(f"/proc/{current}/task/{task}/children") as handle:
                    todo += [int(child) for child in handle.read().split()]
        except OSError:
            pass
    return sum(value for value in (proc_status_kb(member, "VmRSS") for member in found) if value) or None

@dataclass
class Sample:
    at: float  # time.monotonic()
    count: int  # sink deliveries so far
    cpu: float | None  # process utime+stime, seconds
    hwm_kb: int | None  # VmHWM
    tree_kb: int | None = None  # VmRSS of the process and its children (the credentials child, if any)

@dataclass
class Worker:
    """bin/workerless or bench/baseline.py as a subprocess, with its log in bench/results/logs."""
    kind: str  # "daemon" | "baseline"
    label: str
    argv: list[str]
    env: dict[str, str]
    process: subprocess.Popen[bytes] | None = None
    rusage: Any = None
    exit_code: int | None = None
    samples: list[Sample] = field(default_factory=list)
    cwd: Path = ROOT

    log_path = property(lambda self: LOGS / f"{self.label}.log")
    pid = property(lambda self: self.process.pid)

    def start(self) -> Worker:
        LOGS.mkdir(parents=True, exist_ok=True)
        self.log_handle = open(self.log_path, "wb")
        self.process = subprocess.Popen(self.argv, cwd=self.cwd, env=self.env, stdout=self.log_handle,
                                        stderr=subprocess.STDOUT)
        return self

    def log_text(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""

    def wait_started(self, timeout: float = 30) -> None:
        marker = "workerless started" if self.kind == "daemon" else "baseline started"
        deadline = time.monotonic() + timeout
        while marker not in self.log_text():
            if self.poll() is not None or time.monotonic() > deadline:
                tail = "\n".join(self.log_text().splitlines()[-15:])
                self.kill()
                raise RuntimeError(f"{self.label} did not start (exit {self.exit_code}):\n{tail}")
            time.sleep(0.01)

    def poll(self) -> int | None:
        """Reap the process with wait4 so its rusage (peak RSS, CPU) is kept."""
        if self.exit_code is not None or self.process is None:
            return self.exit_code
        try:
            pid, status, rusage = os.wait4(self.pid, os.WNOHANG)
        except ChildProcessError:
            self.exit_code = self.process.returncode if self.process.returncode is not None else -1
            return self.exit_code
        if pid == 0:
            return None
        self.rusage, self.exit_code = rusage, os.waitstatus_to_exitcode(status)
        self.process.returncode = self.exit_code
        self.log_handle.close()
        return self.exit_code

    def wait(self, timeout: float) -> int | None:
        deadline = time.monotonic() + timeout
        while self.poll() is None and time.monotonic() < deadline:
            time.sleep(0.01)
        return self.exit_code

    def signal(self, signum: int = signal.SIGTERM) -> None:
        if self.poll() is None:
            os.kill(self.pid, signum)  # still ours: poll has not reaped it

    def stop(self, timeout: float = 15) -> int | None:
        """SIGTERM, then SIGKILL if it does not exit in time."""
        self.signal(signal.SIGTERM)
        return self.exit_code if self.wait(timeout) is not None else self.kill()

    def kill(self) -> int | None:
        self.signal(signal.SIGKILL)
        return self.wait(5)

    def status_kb(self, key: str) -> int | None:
        return proc_status_kb(self.pid, key) if self.exit_code is None else None

    def cpu(self) -> float | None:
        return proc_cpu_seconds(self.pid) if self.exit_code is None else None

    def sample(self, sink: Any) -> Sample:
        self.samples.append(Sample(time.monotonic(), sink.stats()["count"] if sink is not None else 0, self.cpu(),
                                   self.status_kb("VmHWM"), tree_rss_kb(self.pid) if self.exit_code is None else None))
        return self.samples[-1]

    def peak_rss_mb(self) -> float | None:
        """VmHWM as last sampled, or ru_maxrss from wait4 when no sample had it."""
        values = [s.hwm_kb for s in self.samples if s.hwm_kb]
        return max(values) / 1024 if values else self.rusage.ru_maxrss / 1024 if self.rusage is not None else None

    def peak_tree_rss_mb(self) -> float | None:
        values = [s.tree_kb for s in self.samples if s.tree_kb]
        return max(values) / 1024 if values else None

def worker_env(endpoint: str) -> dict[str, str]:
    env = {key: value for key, value in os.environ.items() if not key.startswith(("AWS_", "WORKERLESS_", "OTEL_"))}
    return {**env, **AWS_ENV, "AWS_ENDPOINT_URL": endpoint, "PYTHONUNBUFFERED": "1"}

def make_daemon(label: str, endpoint: str, config: Path, extra: tuple[str, ...] = (),
                env: dict[str, str] | None = None) -> Worker:
    """bin/workerless on `config`, run from its own checkout as one runs it: a `python -m` child of the daemon would
    put the working directory first on its sys.path and import this checkout's workerless_gevent instead."""
    argv = [sys.executable, str(harness.DAEMON_BIN), "-c", str(config), *extra]
    return Worker("daemon", label, argv, {**worker_env(endpoint), **(env or {})}, cwd=harness.daemon_root())

def make_baseline(label: str, endpoint: str, *, queues: list[str], sink_url: str, concurrency: int,
                  poll_for: int, max_messages: int | None = None) -> Worker:
    argv = [sys.executable, str(BENCH / "baseline.py"), f"--queues={','.join(queues)}", f"--http={sink_url}/",
            f"--concurrency={concurrency}", f"--poll-for={poll_for}", *([f"--max-messages={max_messages}"]
                                                                       if max_messages else [])]
    return Worker("baseline", label, argv, worker_env(endpoint))
