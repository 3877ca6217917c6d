"""The runner's SQS client and the measured processes, all on 127.0.0.1: bin/workerless on a generated TOML file
and bench/baseline.py, sampled from /proc. The runner itself is plain CPython (no gevent)."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

BENCH = Path(__file__).resolve().parent
ROOT = BENCH.parent
RESULTS = BENCH / "results"
LOGS = RESULTS / "logs"
CLOCK_TICKS = os.sysconf("SC_CLK_TCK")
DAEMON_BIN = ROOT / "bin" / "workerless"  # run.py --daemon-bin points this at another checkout
AWS_ENV = {"AWS_ACCESS_KEY_ID": "x", "AWS_SECRET_ACCESS_KEY": "x", "AWS_DEFAULT_REGION": "us-east-1",
           "AWS_REGION": "us-east-1"}


def log(text: str) -> None:
    print(text, file=sys.stderr, flush=True)


@dataclass(frozen=True)
class Idempotent:
    """Every queue gets `idempotency_key`, [idempotency] names `table`, DynamoDB is at `dynamodb_url`."""
    dynamodb_url: str
    table: str
    key: str = "message_id"


@dataclass(frozen=True)
class Traced:
    """`[tracing] exporter = "otlp"` to `endpoint`, sampled by `sampler` (with `sampler_arg`), other OTEL_* in `env`."""
    endpoint: str
    sampler: str = "always_on"
    sampler_arg: str | None = None
    env: tuple[tuple[str, str], ...] = ()

    def variables(self) -> dict[str, str]:
        out = {"OTEL_EXPORTER_OTLP_ENDPOINT": self.endpoint, "OTEL_TRACES_SAMPLER": self.sampler, **dict(self.env)}
        if self.sampler_arg is not None:
            out["OTEL_TRACES_SAMPLER_ARG"] = self.sampler_arg
        return out


# ---------------------------------------------------------------- SQS feeding


class Sqs:
    """The runner's own boto3 client, straight to fauxqs's direct port (never delayed, never through the proxy)."""

    def __init__(self, endpoint: str) -> None:
        import boto3
        import botocore.config

        self.client = boto3.session.Session(aws_access_key_id="x", aws_secret_access_key="x",
                                            region_name="us-east-1").client(
            "sqs", endpoint_url=endpoint,
            config=botocore.config.Config(max_pool_connections=16, retries={"mode": "standard",
                                                                            "total_max_attempts": 3}))
        self.pool = ThreadPoolExecutor(4)

    def create(self, name: str) -> str:
        return self.client.create_queue(QueueName=name)["QueueUrl"]

    def delete(self, url: str) -> None:
        try:
            self.client.delete_queue(QueueUrl=url)
        except Exception:  # noqa: BLE001 - cleanup only
            pass

    def left(self, url: str) -> int:
        """Messages still in the queue, visible or not (fauxqs's counts are exact): received but never deleted."""
        names = ["ApproximateNumberOfMessages", "ApproximateNumberOfMessagesNotVisible",
                 "ApproximateNumberOfMessagesDelayed"]
        attributes = self.client.get_queue_attributes(QueueUrl=url, AttributeNames=names)["Attributes"]
        return sum(int(attributes.get(name, 0)) for name in names)

    def send_batch(self, url: str, first: int, count: int, tag: str) -> float:
        entries = [{"Id": str(i), "MessageBody": body(first + i, tag),
                    "MessageAttributes": {"kind": {"DataType": "String", "StringValue": tag}}}
                   for i in range(count)]
        response = self.client.send_message_batch(QueueUrl=url, Entries=entries)
        if response.get("Failed"):
            raise RuntimeError(f"send failed: {response['Failed'][:1]}")
        return time.time()

    def send_many(self, url: str, count: int, tag: str, threads: int = 4) -> list[tuple[float, int]]:
        """Send count messages in batches of 10 from `threads` threads; returns (completed_at, n) per batch."""
        starts = list(range(0, count, 10))
        jobs = [(url, first, min(10, count - first), tag) for first in starts]
        if threads <= 1:
            return [(self.send_batch(*job), job[2]) for job in jobs]
        futures = [(self.pool.submit(self.send_batch, *job), job[2]) for job in jobs]
        return [(future.result(), n) for future, n in futures]

    def send_one(self, url: str, tag: str) -> None:
        self.client.send_message(QueueUrl=url, MessageBody=body(0, tag))


def stop_process(process: subprocess.Popen[bytes], wait_seconds: float) -> None:
    """SIGTERM, then SIGKILL if it has not exited within `wait_seconds`."""
    if process.poll() is None:
        process.terminate()
        try:
            process.wait(wait_seconds)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def free_port() -> int:
    """A loopback port the kernel just handed out; free again when this returns."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def body(number: int, tag: str) -> str:
    return json.dumps({"n": number, "kind": tag, "id": uuid.uuid4().hex, "payload": "x" * 120})


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


# ---------------------------------------------------------------- measured processes


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
            for line in handle:
                if line.startswith(key + ":"):
                    return int(line.split()[1])
    except (OSError, ValueError):
        return None
    return None


def descendants(pid: int) -> list[int]:
    """pid and every process under it, from /proc/PID/task/TID/children."""
    found, todo = [], [pid]
    while todo:
        current = todo.pop()
        found.append(current)
        try:
            for task in os.listdir(f"/proc/{current}/task"):
                with open(f"/proc/{current}/task/{task}/children") as handle:
                    todo += [int(child) for child in handle.read().split()]
        except OSError:
            pass
    return found


def tree_rss_kb(pid: int) -> int | None:
    """VmRSS of pid and its descendants together (a container's memory limit counts them all); None once gone."""
    values = [proc_status_kb(member, "VmRSS") for member in descendants(pid)]
    return sum(value for value in values if value) or None


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
    process: subprocess.Popen | None = None
    rusage: Any = None
    exit_code: int | None = None
    samples: list[Sample] = field(default_factory=list)
    cwd: Path = ROOT

    @property
    def log_path(self) -> Path:
        return LOGS / f"{self.label}.log"

    def start(self) -> Worker:
        LOGS.mkdir(parents=True, exist_ok=True)
        self.log_handle = open(self.log_path, "wb")
        self.process = subprocess.Popen(self.argv, cwd=self.cwd, env=self.env, stdout=self.log_handle,
                                        stderr=subprocess.STDOUT)
        return self

    @property
    def pid(self) -> int:
        assert self.process is not None
        return self.process.pid

    def log_text(self) -> str:
        try:
            return self.log_path.read_text(errors="replace")
        except OSError:
            return ""

    def wait_started(self, timeout: float = 30) -> None:
        marker = "workerless started" if self.kind == "daemon" else "baseline started"
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if marker in self.log_text():
                return
            if self.poll() is not None:
                break
            time.sleep(0.01)
        tail = "\n".join(self.log_text().splitlines()[-15:])
        self.kill()
        raise RuntimeError(f"{self.label} did not start (exit {self.exit_code}):\n{tail}")

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
        self.rusage = rusage
        self.exit_code = os.waitstatus_to_exitcode(status)
        self.process.returncode = self.exit_code
        self.log_handle.close()
        return self.exit_code

    def wait(self, timeout: float) -> int | None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.poll() is not None:
                return self.exit_code
            time.sleep(0.01)
        return None

    def signal(self, signum: int = signal.SIGTERM) -> None:
        if self.poll() is None:
            try:
                os.kill(self.pid, signum)
            except ProcessLookupError:
                pass

    def stop(self, timeout: float = 15) -> int | None:
        """SIGTERM, then SIGKILL if it does not exit in time."""
        self.signal(signal.SIGTERM)
        if self.wait(timeout) is None:
            self.kill()
        return self.exit_code

    def kill(self) -> None:
        self.signal(signal.SIGKILL)
        self.wait(5)

    def cpu(self) -> float | None:
        return proc_cpu_seconds(self.pid) if self.exit_code is None else None

    def sample(self, sink: Any) -> Sample:
        count = sink.stats()["count"] if sink is not None else 0
        alive = self.exit_code is None
        item = Sample(time.monotonic(), count, self.cpu(), proc_status_kb(self.pid, "VmHWM"),
                      tree_rss_kb(self.pid) if alive else None)
        self.samples.append(item)
        return item

    def peak_rss_mb(self) -> float | None:
        """VmHWM as last sampled, or ru_maxrss from wait4 when no sample had it."""
        values = [s.hwm_kb for s in self.samples if s.hwm_kb]
        if values:
            return max(values) / 1024
        if self.rusage is not None:
            return self.rusage.ru_maxrss / 1024
        return None


    def peak_tree_rss_mb(self) -> float | None:
        """The largest sampled sum of VmRSS over the process and its children."""
        values = [s.tree_kb for s in self.samples if s.tree_kb]
        return max(values) / 1024 if values else None


def worker_env(endpoint: str) -> dict[str, str]:
    env = {key: value for key, value in os.environ.items() if not key.startswith(("AWS_", "WORKERLESS_", "OTEL_"))}
    return {**env, **AWS_ENV, "AWS_ENDPOINT_URL": endpoint, "PYTHONUNBUFFERED": "1"}


def toml_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return json.dumps(value) if isinstance(value, str) else str(value)


def write_config(label: str, *, concurrency: int, queues: list[dict[str, Any]], target: dict[str, Any],
                 polling: dict[str, Any], tables: dict[str, dict[str, Any]] | None = None) -> Path:
    """bench/results/conf/LABEL.toml: only documented keys; `tables` adds [idempotency], [tracing], [fleet], ..."""
    def table(header: str, keys: dict[str, Any]) -> list[str]:
        return [header, *(f"{key} = {toml_value(value)}" for key, value in keys.items()), ""]

    lines = [f"concurrency = {concurrency}", "shutdown_timeout = 10", "", *table("[polling]", polling)]
    for name, keys in (tables or {}).items():
        lines += table(f"[{name}]", keys)
    for queue in queues:
        lines += table("[[queues]]", queue)
    lines += table("[targets.default]", target)
    path = RESULTS / "conf" / f"{label}.toml"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join(lines))
    return path


def make_daemon(label: str, endpoint: str, config: Path, extra: tuple[str, ...] = (),
                env: dict[str, str] | None = None) -> Worker:
    """bin/workerless on `config`, run from its own checkout as one runs it: a `python -m` child of the daemon would
    put the working directory first on its sys.path and import this checkout's workerless_gevent instead."""
    argv = [sys.executable, str(DAEMON_BIN), "-c", str(config), *extra]
    return Worker("daemon", label, argv, {**worker_env(endpoint), **(env or {})}, cwd=DAEMON_BIN.resolve().parent.parent)


def make_baseline(label: str, endpoint: str, *, queues: list[str], sink_url: str, concurrency: int,
                  poll_for: int, max_messages: int | None = None) -> Worker:
    argv = [sys.executable, str(BENCH / "baseline.py"), f"--queues={','.join(queues)}", f"--http={sink_url}/",
            f"--concurrency={concurrency}", f"--poll-for={poll_for}"]
    if max_messages:
        argv.append(f"--max-messages={max_messages}")
    return Worker("baseline", label, argv, worker_env(endpoint))
