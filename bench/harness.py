"""The runner's basics, all on 127.0.0.1: its paths and log, its own SQS client, loopback helpers and the daemon's
generated TOML file. The runner itself is plain CPython (no gevent)."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

BENCH = Path(__file__).resolve().parent
ROOT = BENCH.parent
RESULTS = BENCH / "results"
LOGS = RESULTS / "logs"
DAEMON_BIN = ROOT / "bin" / "workerless"  # run.py --daemon-bin points this at another checkout
AWS_ENV = {"AWS_ACCESS_KEY_ID": "x", "AWS_SECRET_ACCESS_KEY": "x", "AWS_DEFAULT_REGION": "us-east-1",
           "AWS_REGION": "us-east-1"}


def log(text: str) -> None:
    print(text, file=sys.stderr, flush=True)


def use_daemon_bin(path: str | Path | None) -> None:
    """Measure another checkout's bin/workerless from now on (--daemon-bin); None keeps this checkout's."""
    global DAEMON_BIN
    if path:
        DAEMON_BIN = Path(path).resolve()


def checkouts(vs: str | None, this: str | None = None) -> dict[str, Path]:
    """The daemons a standalone tool measures: this checkout's (or `this`), and with --vs another checkout's."""
    bins = {"this": Path(this or DAEMON_BIN).resolve()}
    if vs:
        bins["vs"] = (Path(vs) / "bin" / "workerless").resolve()
    return bins


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
