"""moto's server as the bench's DynamoDB (fauxqs has none): the fleet_limits scenario's lease table.

Started as tests/support/moto.py starts it (tests/support/moto_main.py, whose DynamoDB backend runs one
call at a time, as DynamoDB applies one item's writes), on a free 127.0.0.1 port. Only DynamoDB goes
there (the daemons get AWS_ENDPOINT_URL_DYNAMODB; SQS stays on fauxqs). moto's request recorder counts
the requests independently of the daemons' own counts on /status.
"""

from __future__ import annotations

import base64
import json
import os
import subprocess
import sys
import time
import urllib.request
from typing import Any

from harness import AWS_ENV, LOGS, ROOT, free_port, stop_process

MOTO_MAIN = ROOT / "tests" / "support" / "moto_main.py"
KEY = "slot"  # the fleet table's key (workerless_gevent/fleet/table.py)


class MotoDynamo:
    """moto's server, a fleet table on it, and its request recorder."""

    def __init__(self, table: str) -> None:
        LOGS.mkdir(parents=True, exist_ok=True)
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.table = table
        self.recording = LOGS / "moto-recording.jsonl"
        self.recording.unlink(missing_ok=True)
        env = {key: value for key, value in os.environ.items() if not key.startswith("AWS_")}
        env["MOTO_RECORDER_FILEPATH"] = str(self.recording)
        self.log = open(LOGS / "moto.log", "wb")
        self.process = subprocess.Popen([sys.executable, "-P", str(MOTO_MAIN), "-H", "127.0.0.1", "-p",
                                         str(self.port)], stdin=subprocess.DEVNULL, stdout=self.log,
                                        stderr=subprocess.STDOUT, env=env)
        self.wait_for_server(30.0)
        self.create_table()

    def api(self, path: str, body: Any = None) -> bytes:
        data = None if body is None else json.dumps(body).encode()
        request = urllib.request.Request(self.url + path, data=data, headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(request, timeout=5) as response:
            return bytes(response.read())

    def wait_for_server(self, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while True:
            if self.process.poll() is not None:
                raise RuntimeError(f"moto server exited {self.process.returncode}; see {LOGS / 'moto.log'}")
            try:
                self.api("/moto-api/config")
                return
            except OSError:
                if time.monotonic() >= deadline:
                    self.stop()
                    raise RuntimeError(f"moto server not up after {timeout}s; see {LOGS / 'moto.log'}")
                time.sleep(0.05)

    def client(self) -> Any:
        import boto3

        return boto3.session.Session(aws_access_key_id=AWS_ENV["AWS_ACCESS_KEY_ID"],
                                     aws_secret_access_key=AWS_ENV["AWS_SECRET_ACCESS_KEY"],
                                     region_name="us-east-1").client("dynamodb", endpoint_url=self.url)

    def create_table(self) -> None:
        """Created once, before the daemons: their start-up then only describes it."""
        self.client().create_table(TableName=self.table, KeySchema=[{"AttributeName": KEY, "KeyType": "HASH"}],
                                   AttributeDefinitions=[{"AttributeName": KEY, "AttributeType": "S"}],
                                   BillingMode="PAY_PER_REQUEST")

    def start_recording(self) -> None:
        self.api("/moto-api/recorder/reset-recording", {})
        self.api("/moto-api/recorder/start-recording", {})

    def recorded(self, needle: str) -> dict[str, int]:
        """Requests recorded since start_recording whose body names `needle` (a fleet's name), by action."""
        counts: dict[str, int] = {}
        if not self.recording.exists():
            return counts
        for line in self.recording.read_text().splitlines():
            entry = json.loads(line)
            body = entry.get("body") or ""
            if entry.get("body_encoded"):
                body = base64.b64decode(body).decode(errors="replace")
            if needle not in body:
                continue
            target = {k.lower(): v for k, v in entry.get("headers", {}).items()}.get("x-amz-target", "?")
            action = target.rsplit(".", 1)[-1]
            counts[action] = counts.get(action, 0) + 1
        return counts

    def stop(self) -> None:
        stop_process(self.process, 10)
        self.log.close()

