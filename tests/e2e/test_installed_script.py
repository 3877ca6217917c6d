"""The console script that `pip install .` makes patches gevent first, like bin/workerless: boto3
calls (here Lambda Invoke) then overlap instead of blocking the hub one at a time.

Invoke normally goes over the daemon's own wire, which never blocks the hub, patched or not. Behind an
HTTP proxy the wire steps aside for botocore's Lambda client (as it does for FIPS and dual-stack), and
only a patched process keeps that client's calls from running one at a time: so the test sets one. The
Lambda stand-in is that proxy (it takes the absolute URI a proxied request carries); SQS, reached as
localhost and listed in NO_PROXY, goes to moto directly."""

from __future__ import annotations

import shutil
import subprocess
import sys
import sysconfig
import urllib.parse
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.support import REPO_ROOT, Daemon, FakeLambda, Queue, count_messages, wait_until
from tests.support.config_file import build_config_file

INVOKE_SECONDS = 2.0
MESSAGES = 10


def install_project(tmp_path: Path) -> Path:
    """A fresh venv with the project pip-installed from a copy of the checkout; its dependencies come
    from the test environment through a .pth file (the build itself takes setuptools from the index)."""
    source = tmp_path / "source"
    source.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(REPO_ROOT / name, source / name)
    shutil.copytree(REPO_ROOT / "workerless_gevent", source / "workerless_gevent",
                    ignore=shutil.ignore_patterns("__pycache__"))
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    python = venv / "bin" / "python"
    purelib = subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                             check=True, capture_output=True, text=True).stdout.strip()
    (Path(purelib) / "test-dependencies.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    # This environment's pip installs into the new venv (pip --python), building as any user's pip would.
    subprocess.run([sys.executable, "-m", "pip", "--python", str(python), "install", "--quiet", "--no-deps",
                    str(source)], check=True)
    return venv / "bin" / "workerless"


@pytest.mark.slow
def test_the_pip_installed_script_overlaps_lambda_invocations(
    daemon: Callable[..., Daemon], aws_env: dict[str, str], fake_lambda: FakeLambda, sqs: Any,
    make_queue: Callable[..., Queue], tmp_path: Path,
) -> None:
    script = install_project(tmp_path)
    assert script.exists() and "workerless_gevent.entry" in script.read_text()
    queue = make_queue()
    for i in range(MESSAGES):
        sqs.send_message(QueueUrl=queue.url, MessageBody=f"m{i}")
    fake_lambda.delay = INVOKE_SECONDS
    config = build_config_file(tmp_path, concurrency=MESSAGES, queues=[{"name": queue.name}],
                               targets={"default": {"type": "lambda", "function": "slow-fn", "batch_size": 1}})
    moto_port = urllib.parse.urlsplit(aws_env["AWS_ENDPOINT_URL"]).port
    env = {**aws_env, "AWS_ENDPOINT_URL": f"http://localhost:{moto_port}", "AWS_ENDPOINT_URL_LAMBDA": fake_lambda.url,
           "HTTP_PROXY": fake_lambda.url, "NO_PROXY": "localhost"}
    proc = daemon(["-c", str(config)], env=env, cwd=tmp_path, program=script, is_executable=True)
    invocations = fake_lambda.wait_for_invocations(MESSAGES, timeout=60)
    arrivals = sorted(invocation.arrived for invocation in invocations[:MESSAGES])
    # Patched, all ten are in flight at once; unpatched, each Invoke blocks the hub for 2 s.
    assert all(invocation.proxied for invocation in invocations)  # botocore's client made them, not the wire
    assert arrivals[-1] - arrivals[0] < INVOKE_SECONDS, [round(a - arrivals[0], 2) for a in arrivals]
    wait_until(lambda: count_messages(sqs, queue.url) == 0, 30, message="invoked messages not deleted")
    assert proc.stop(timeout=30) == 0
    assert "MonkeyPatchWarning" not in proc.output()
