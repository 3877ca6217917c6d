"""The daemons of the fleet_limits scenario: their TOML file, and what their /status says of the fleet limit.

A member is the real bin/workerless (harness.Worker) on one fauxqs queue, with SQS on fauxqs and DynamoDB
on moto (AWS_ENDPOINT_URL_DYNAMODB), a status server on port 0 (the port read from its log), and either a
`fleet_max_concurrency` shared through a [fleet] table or a per-process `max_concurrency`.
"""

from __future__ import annotations

import json
import re
import sys
import urllib.request
from dataclasses import dataclass, field
from typing import Any

import harness
from harness import RESULTS, Worker, worker_env

LISTENING = re.compile(r"status server listening on (http://127\.0\.0\.1:\d+)")


@dataclass(frozen=True)
class Shape:
    """One member's configuration: the cap, and whether the fleet shares it or each process has its own."""
    queue: str
    sink_url: str
    cap: int
    shared: bool  # True: fleet_max_concurrency = cap over the fleet; False: max_concurrency = cap per process
    table: str
    fleet_name: str
    lease_seconds: int


@dataclass
class StatusSample:
    at: float  # time.monotonic() of the runner
    requests: int  # dynamodb_requests of the fleet row
    share: float
    in_flight: int
    live_members: int
    waits: int


def config_text(shape: Shape) -> str:
    key = "fleet_max_concurrency" if shape.shared else "max_concurrency"
    lines = [f"concurrency = {shape.cap}", "shutdown_timeout = 10", "", "[polling]", "poll_for = 1",
             "batch_size = 10", "", "[[queues]]", f'name = "{shape.queue}"', f"{key} = {shape.cap}", "",
             "[targets.default]", 'type = "http"', f'url = "{shape.sink_url}/"', "",
             "[status]", 'listen = "127.0.0.1:0"', ""]
    if shape.shared:
        lines += ["[fleet]", f'table = "{shape.table}"', f'name = "{shape.fleet_name}"',
                  f"lease = {shape.lease_seconds}", ""]
    return "\n".join(lines)


@dataclass
class Member:
    worker: Worker
    status_url: str | None = None
    samples: list[StatusSample] = field(default_factory=list)

    def find_status_url(self) -> str | None:
        if self.status_url is None:
            match = LISTENING.search(self.worker.log_text())
            self.status_url = match.group(1) if match else None
        return self.status_url

    def sample(self, at: float) -> None:
        """Note the fleet row of /status, if the daemon is up and has one (a failed read is skipped)."""
        url = self.find_status_url()
        if url is None or self.worker.poll() is not None:
            return
        try:
            with urllib.request.urlopen(url + "/status", timeout=5) as response:
                rows: list[dict[str, Any]] = json.loads(response.read()).get("fleet", [])
        except (OSError, ValueError):
            return
        if rows:
            row = rows[0]
            self.samples.append(StatusSample(at, row["dynamodb_requests"], row["share"], row["in_flight"],
                                             row["live_members"], row["waits"]))

    def requests_per_minute(self, start: float, end: float) -> float | None:
        """DynamoDB requests per minute between the first and the last sample inside [start, end]."""
        inside = [s for s in self.samples if start <= s.at <= end]
        if len(inside) < 2 or inside[-1].at <= inside[0].at:
            return None
        return (inside[-1].requests - inside[0].requests) / (inside[-1].at - inside[0].at) * 60

    def last_requests(self) -> int:
        return self.samples[-1].requests if self.samples else 0


def make_member(label: str, shape: Shape, sqs_url: str, dynamodb_url: str) -> Member:
    path = RESULTS / "conf" / f"{label}.toml"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(config_text(shape))
    env = worker_env(sqs_url)
    env["AWS_ENDPOINT_URL_DYNAMODB"] = dynamodb_url  # boto3's per-service endpoint wins over AWS_ENDPOINT_URL
    argv = [sys.executable, str(harness.DAEMON_BIN), "-c", str(path)]
    return Member(Worker("daemon", label, argv, env, cwd=harness.DAEMON_BIN.resolve().parent.parent))
