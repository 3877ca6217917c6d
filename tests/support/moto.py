"""moto server as a subprocess, and its docker-free Lambda.

Lambda facts (moto 5.2, checked against its source and by experiment):
- `POST /moto-api/config {"lambda": {"use_docker": false}}` switches Lambda to the "simple"
  backend. It must happen before any function is created: the two backends keep separate state.
- A simple invoke never runs code. It answers 200 with the next queued result, or else echoes the
  request payload. It does not even check that the function exists.
- `POST /moto-api/static/lambda-simple/response {"results": [str, ...], "region": ...}` queues
  results. The queue is per account and region, not per function.
- moto keeps no record of invocations, but its request recorder (`/moto-api/recorder/...`,
  written to `MOTO_RECORDER_FILEPATH`) logs every request with its body, so payloads can be read
  back from it.
"""

from __future__ import annotations

import base64
import io
import json
import os
import re
import socket
import subprocess
import sys
import time
import urllib.request
import uuid
import zipfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, unquote, urlparse

import boto3
from botocore.config import Config

REGION = "us-east-1"
CREDENTIALS = {"aws_access_key_id": "testing", "aws_secret_access_key": "testing"}
LAMBDA_ROLE_POLICY = {
    "Version": "2012-10-17",
    "Statement": [
        {
            "Effect": "Allow",
            "Principal": {"Service": "lambda.amazonaws.com"},
            "Action": "sts:AssumeRole",
        }
    ],
}


def free_port() -> int:
    """A port the kernel just handed out; free again when we return."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def aws_environ(base: dict[str, str], endpoint: str, config_dir: Path) -> dict[str, str]:
    """`base` with fake credentials and every AWS endpoint pointed at `endpoint`.

    Profiles, tokens, service-specific endpoints and the user's ~/.aws files are removed so no
    real account or stray setting can leak into a test.
    """
    env = {
        key: value
        for key, value in base.items()
        if not (key.startswith("AWS_") or key.startswith("BOTO_"))
    }
    env.update(
        AWS_ACCESS_KEY_ID="testing",
        AWS_SECRET_ACCESS_KEY="testing",
        AWS_DEFAULT_REGION=REGION,
        AWS_REGION=REGION,
        AWS_ENDPOINT_URL=endpoint,
        AWS_CONFIG_FILE=str(config_dir / "config"),
        AWS_SHARED_CREDENTIALS_FILE=str(config_dir / "credentials"),
        AWS_EC2_METADATA_DISABLED="true",
    )
    return env


def build_client(service: str, endpoint_url: str, **config: Any) -> Any:
    """A boto3 client on a loopback endpoint with fake keys (standard retries unless `retries` is given)."""
    config.setdefault("retries", {"mode": "standard", "total_max_attempts": 3})
    return boto3.client(
        service,
        endpoint_url=endpoint_url,
        region_name=REGION,
        config=Config(**config),
        **CREDENTIALS,
    )


@dataclass(frozen=True)
class MotoInvocation:
    function_name: str
    qualifier: str | None
    raw: bytes
    invocation_type: str


class MotoServer:
    """moto's server (SQS calls made atomic, `moto_main.py`) on a 127.0.0.1 port of its choosing, docker-free
    Lambda on."""

    def __init__(self, workdir: Path) -> None:
        self.port = 0  # chosen by the server itself at start (a port picked here first could be taken meanwhile)
        self.url = ""
        self.log_path = workdir / "moto.log"
        self.recording_path = workdir / "moto-recording.jsonl"
        self.process: subprocess.Popen[bytes] | None = None

    def start(self, timeout: float = 30.0) -> None:
        env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
        env["MOTO_RECORDER_FILEPATH"] = str(self.recording_path)
        with open(self.log_path, "wb") as log:
            self.process = subprocess.Popen(
                [sys.executable, "-P", str(Path(__file__).with_name("moto_main.py")), "-H", "127.0.0.1", "-p", "0"],
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                env=env,
            )
        deadline = time.monotonic() + timeout
        while True:
            if self.process.poll() is not None:
                raise RuntimeError(f"moto server exited {self.process.returncode}: {self.log()}")
            try:
                self.port = self.port or self.listening_port()
                self.url = f"http://127.0.0.1:{self.port}"
                self.api("/moto-api/config")
                break
            except (OSError, LookupError):
                if time.monotonic() >= deadline:
                    self.stop()
                    raise RuntimeError(f"moto server not up after {timeout}s: {self.log()}")
                time.sleep(0.05)
        self.api("/moto-api/config", {"lambda": {"use_docker": False}})

    def listening_port(self) -> int:
        """The port werkzeug says it listens on (LookupError until it has said so). Binding port 0 in the
        server leaves no gap in which another process, a test suite of another Python say, takes the port."""
        found = re.search(r"Running on http://127\.0\.0\.1:(\d+)", self.log_path.read_text(errors="replace"))
        if found is None:
            raise LookupError("moto is not listening yet")
        return int(found.group(1))

    def stop(self) -> None:
        if self.process and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")[-4000:]

    def api(self, path: str, body: Any = None) -> bytes:
        """GET `path`, or POST `body` as JSON to it when given."""
        data = None if body is None else json.dumps(body).encode()
        request = urllib.request.Request(
            self.url + path, data=data, headers={"Content-Type": "application/json"}
        )
        with urllib.request.urlopen(request, timeout=5) as response:
            return bytes(response.read())

    def client(self, service: str, **config: Any) -> Any:
        """A boto3 client on this server (standard retries unless `retries` is given)."""
        return build_client(service, self.url, **config)

    # --- Lambda ------------------------------------------------------------------------------

    def create_lambda_function(self, name: str | None = None) -> str:
        """Create a python function (with the IAM role moto insists on); return its name."""
        name = name or f"fn-{uuid.uuid4().hex[:12]}"
        role = self.client("iam").create_role(
            RoleName=f"role-{name}", AssumeRolePolicyDocument=json.dumps(LAMBDA_ROLE_POLICY)
        )["Role"]["Arn"]
        code = io.BytesIO()
        with zipfile.ZipFile(code, "w") as archive:
            archive.writestr("handler.py", "def handler(event, context):\n    return event\n")
        self.client("lambda").create_function(
            FunctionName=name,
            Runtime="python3.11",
            Role=role,
            Handler="handler.handler",
            Code={"ZipFile": code.getvalue()},
        )
        return name

    def queue_lambda_results(self, *results: Any, region: str = REGION) -> None:
        """Queue what the next invokes (of any function in `region`) return, in order.

        str and bytes are returned as they are; anything else is JSON-encoded first.
        """
        texts = [
            r.decode() if isinstance(r, bytes) else r if isinstance(r, str) else json.dumps(r)
            for r in results
        ]
        self.api("/moto-api/static/lambda-simple/response", {"results": texts, "region": region})

    def drain_lambda_results(self, function_name: str, limit: int = 1000) -> int:
        """Consume queued results nobody invoked for, so the next test starts clean.

        Invokes with a unique payload until moto echoes it back (its queue is then empty).
        """
        client = self.client("lambda", retries={"total_max_attempts": 1})
        sentinel = json.dumps({"drain": uuid.uuid4().hex}).encode()
        for drained in range(limit):
            answer = client.invoke(FunctionName=function_name, Payload=sentinel)
            if answer["Payload"].read() == sentinel:
                return drained
        raise AssertionError(f"moto lambda result queue not empty after {limit} invokes")

    # --- request recorder: the only way to read invoke payloads back from moto ---------------

    def start_recording(self) -> None:
        self.api("/moto-api/recorder/reset-recording", {})
        self.api("/moto-api/recorder/start-recording", {})

    def stop_recording(self) -> None:
        self.api("/moto-api/recorder/stop-recording", {})

    def lambda_invocations(self, function_name: str | None = None) -> list[MotoInvocation]:
        """Invokes recorded since `start_recording`, optionally only those of one function."""
        if not self.recording_path.exists():
            return []
        found = []
        for line in self.recording_path.read_text().splitlines():
            entry = json.loads(line)
            url = urlparse(entry["url"])
            parts = url.path.split("/")
            if len(parts) < 5 or parts[-1] != "invocations" or parts[2] != "functions":
                continue
            name = unquote(parts[3])
            if function_name is not None and name != function_name:
                continue
            body = entry.get("body") or ""
            raw = base64.b64decode(body) if entry.get("body_encoded") else body.encode()
            headers = {k.lower(): v for k, v in entry.get("headers", {}).items()}
            found.append(
                MotoInvocation(
                    function_name=name,
                    qualifier=parse_qs(url.query).get("Qualifier", [None])[0],
                    raw=raw,
                    invocation_type=headers.get("x-amz-invocation-type", "RequestResponse"),
                )
            )
        return found
