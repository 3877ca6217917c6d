"""The runner's basics, all on 127.0.0.1: paths and log, its own SQS client, loopback helpers and the daemon's
generated TOML file. The runner itself is plain CPython (no gevent)."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
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
    """Measure another checkout's bin/workerless from now on; None keeps this checkout's."""
    global DAEMON_BIN
    DAEMON_BIN = Path(path).resolve() if path else DAEMON_BIN

def daemon_root() -> Path:
    return DAEMON_BIN.resolve().parent.parent

class Sqs:
    """The runner's own boto3 client, straight to fauxqs's direct port (never delayed, never counted)."""

    def __init__(self, endpoint: str) -> None:
        import boto3
        import botocore.config

        self.client = boto3.session.Session(aws_access_key_id="x", aws_secret_access_key="x",
                                            region_name="us-east-1").client(
            "sqs", endpoint_url=endpoint, config=botocore.config.Config(
                max_pool_connections=16, retries={"mode": "standard", "total_max_attempts": 3}))
        self.pool = ThreadPoolExecutor(4)

    def create(self, name: str) -> str:
        return str(self.client.create_queue(QueueName=name)["QueueUrl"])

    def delete(self, url: str) -> None:
        try:
            self.client.delete_queue(QueueUrl=url)
        except Exception:  # noqa: BLE001 - cleanup only
            pass

    def left(self, url: str) -> int:
        """Messages still in the queue, visible or not (fauxqs's counts are exact): received but never deleted."""
        names = [f"ApproximateNumberOfMessages{kind}" for kind in ("", "NotVisible", "Delayed")]
        attributes = self.client.get_queue_attributes(QueueUrl=url, AttributeNames=names)["Attributes"]
        return sum(int(attributes.get(name, 0)) for name in names)

    def send_batch(self, url: str, first: int, count: int, tag: str, group: str | None = None) -> float:
        entries = [{"Id": str(i), "MessageBody": body(first + i, tag, group),
                    "MessageAttributes": {"kind": {"DataType": "String", "StringValue": tag}},
                    **({"MessageGroupId": group} if group else {})} for i in range(count)]
        response = self.client.send_message_batch(QueueUrl=url, Entries=entries)
        if response.get("Failed"):
            raise RuntimeError(f"send failed: {response['Failed'][:1]}")
        return time.time()

    def send_many(self, url: str, count: int, tag: str, threads: int = 4,
                  group: str | None = None) -> list[tuple[float, int]]:
        """count messages in batches of 10 from `threads` threads; (completed_at, n) per batch."""
        jobs = [(url, first, min(10, count - first), tag, group) for first in range(0, count, 10)]
        done = [self.pool.submit(self.send_batch, *job).result if threads > 1 else lambda job=job: self.send_batch(
            *job) for job in jobs]
        return [(result(), job[2]) for result, job in zip(done, jobs)]

    def send_one(self, url: str, tag: str, group: str | None = None) -> None:
        self.client.send_message(QueueUrl=url, MessageBody=body(0, tag, group),
                                 **({"MessageGroupId": group} if group else {}))

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
    with socket.socket() as probe:  # free again once closed
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])

def body(number: int, tag: str, group: str | None = None) -> str:
    """A message body: its number, kind, tenant and the time it was made (epoch s), padded to about 200 bytes."""
    return json.dumps({"n": number, "kind": tag, "tenant": group, "sent": time.time(), "id": uuid.uuid4().hex,
                       "payload": "x" * 100})

def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"

def toml_value(value: Any) -> str:
    return ("true" if value else "false") if isinstance(value, bool) else json.dumps(value) if isinstance(
        value, str) else str(value)

def write_config(label: str, *, concurrency: int, queues: list[dict[str, Any]], target: dict[str, Any],
                 polling: dict[str, Any], tables: dict[str, dict[str, Any]] | None = None) -> Path:
    """bench/results/conf/LABEL.toml: `tables` adds [idempotency], [tracing], [fleet], [status], ..."""
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
