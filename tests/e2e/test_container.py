"""The Dockerfile, without a container runtime: its entry point, run as PID 1 of its own PID namespace
(as in a container), stops on SIGTERM with nothing lost; and it installs the package as the README does."""

from __future__ import annotations

import json
import os
import re
import shlex
import signal
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import gevent.event
import pytest

from tests.e2e.helpers import send_batch
from tests.support import REPO_ROOT, Daemon, HttpApp, Queue, build_config_file, count_visible, wait_until

DOCKERFILE = REPO_ROOT / "Dockerfile"
# Ways to get a PID namespace, the plain one first (root); unprivileged users need a user namespace too.
UNSHARE_VARIANTS = (["unshare", "--pid", "--fork", "--mount-proc"],
                    ["unshare", "--user", "--map-root-user", "--pid", "--fork", "--mount-proc"])
MESSAGES = 12
CONCURRENCY = 3


def instructions(text: str) -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) of a Dockerfile, continuation lines joined, comments dropped."""
    joined = re.sub(r"\\\n\s*", " ", "\n".join(line for line in text.splitlines() if not line.lstrip().startswith("#")))
    return [(line.split(None, 1)[0].upper(), line.split(None, 1)[1].strip() if " " in line.strip() else "")
            for line in joined.splitlines() if line.strip()]


def dockerfile() -> list[tuple[str, str]]:
    return instructions(DOCKERFILE.read_text())


def the(instruction: str) -> str:
    (value,) = [arguments for name, arguments in dockerfile() if name == instruction]
    return value


def pip_installs(commands: list[str]) -> list[list[str]]:
    """The `pip install ...` commands among shell commands (comments dropped, && chains split)."""
    found = []
    for command in commands:
        for part in re.split(r"&&|;", command.split("#", 1)[0]):
            if not re.match(r"\s*pip3? install\b", part):
                continue
            found.append(["pip", *shlex.split(part)[1:]])
    return found


def readme_shell_lines() -> list[str]:
    text = (REPO_ROOT / "README.md").read_text()
    blocks = re.findall(r"```(?:sh|bash|shell)\n(.*?)```", text, re.S)
    return [line for block in blocks for line in re.sub(r"\\\n\s*", " ", block).splitlines()]


def test_the_dockerfile_installs_the_package_the_way_the_readme_does() -> None:
    readme = pip_installs(readme_shell_lines())
    image = pip_installs([arguments for name, arguments in dockerfile() if name == "RUN"])
    assert readme and image, (readme, image)
    assert image == [readme[0]] == [["pip", "install", "."]]
    # "." is the checkout: what the package build reads is copied into the working directory first.
    steps = dockerfile()
    run_at = steps.index(("RUN", "pip install ."))
    workdir = [arguments for name, arguments in steps[:run_at] if name == "WORKDIR"][-1]
    copied = " ".join(arguments for name, arguments in steps[:run_at] if name == "COPY")
    assert workdir == "/src" and "pyproject.toml" in copied and "README.md" in copied and "workerless_gevent" in copied


def test_the_dockerfile_runs_the_console_script_as_pid_1_as_a_non_root_user() -> None:
    assert re.fullmatch(r"python:3\.11-slim(@sha256:[0-9a-f]{64})?", the("FROM"))
    assert json.loads(the("ENTRYPOINT")) == ["workerless"]  # exec form: no shell between SIGTERM and the daemon
    assert the("STOPSIGNAL") == "SIGTERM"
    assert "SHELL" not in [name for name, _ in dockerfile()] and "CMD" not in [name for name, _ in dockerfile()]
    user = the("USER")
    assert user.isdigit() and int(user) != 0
    # The console script `pip install .` makes is the entry point (pyproject's [project.scripts]).
    assert 'workerless = "workerless_gevent.entry:main"' in (REPO_ROOT / "pyproject.toml").read_text()


def pid_namespace_prefix() -> list[str]:
    for variant in UNSHARE_VARIANTS:
        try:
            probe = subprocess.run([*variant, "sh", "-c", "echo $$"], capture_output=True, text=True, timeout=10)
        except (OSError, subprocess.TimeoutExpired):
            continue
        if probe.returncode == 0 and probe.stdout.strip() == "1":
            return variant
    pytest.skip("no PID namespace available here (unshare --pid, with or without --user, failed)")


def namespace_child(outer_pid: int) -> int:
    """The process unshare forked into the new namespace (its only child)."""
    children = Path(f"/proc/{outer_pid}/task/{outer_pid}/children").read_text().split()
    assert len(children) == 1, children
    return int(children[0])


def namespace_pids(pid: int) -> list[int]:
    """The process's PID in each namespace, outermost first (NSpid in /proc/PID/status)."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("NSpid:"):
            return [int(value) for value in line.split()[1:]]
    raise AssertionError(f"no NSpid for {pid}")


def test_as_pid_1_sigterm_stops_cleanly_and_loses_nothing(
    daemon: Callable[..., Daemon], aws_env: dict[str, str], http_app: HttpApp, sqs: Any,
    make_queue: Callable[..., Queue], tmp_path: Path,
) -> None:
    prefix = pid_namespace_prefix()
    script = Path(sys.executable).with_name("workerless")  # the console script of this environment's install
    assert script.exists(), f"{script}: install the project (./dev does) to get its console script"
    queue = make_queue()
    bodies = [f"pid1-{i}" for i in range(MESSAGES)]
    send_batch(sqs, queue.url, bodies)
    released = gevent.event.Event()  # every delivery is held until PID 1 has its SIGTERM (60 s at most)
    http_app.respond = lambda request: (released.wait(60), (200, {}, b""))[1]
    config = build_config_file(tmp_path, concurrency=CONCURRENCY, shutdown_timeout=10, queues=[{"name": queue.name}],
                               targets={"default": {"type": "http", "url": f"{http_app.url}/work"}})
    # The image's entry point and no arguments: the configuration comes from WORKERLESS_CONFIG, as deploy/ sets it.
    entrypoint = json.loads(the("ENTRYPOINT"))
    proc = daemon([*prefix[1:], str(script.with_name(entrypoint[0])), *entrypoint[1:]],
                  env={**aws_env, "WORKERLESS_CONFIG": str(config)}, cwd=tmp_path, program=Path(prefix[0]),
                  is_executable=True)
    http_app.wait_for_requests(CONCURRENCY, timeout=60)
    inner = namespace_child(proc.pid)
    assert namespace_pids(inner)[-1] == 1  # PID 1 in its namespace, as in a container
    assert Path(f"/proc/{inner}/cmdline").read_bytes().split(b"\0")[1] == str(script).encode()
    held = {request.body.decode() for request in http_app.requests}
    assert len(held) == CONCURRENCY and http_app.in_flight == CONCURRENCY

    os.kill(inner, signal.SIGTERM)  # from outside the namespace, as the container runtime signals PID 1
    proc.wait_for_output("stopping (SIGTERM)", timeout=30)
    released.set()  # the held deliveries finish during the stop, and are deleted
    assert proc.wait_exit(timeout=30) == 0, proc.output()[-3000:]
    log = proc.output()
    assert "stopping (SIGTERM)" in log and "workerless stopped" in log
    # Nothing lost: the deliveries that were running finished and were deleted; everything else was
    # released and is visible again now, not invisible until a visibility timeout.
    delivered = {request.body.decode() for request in http_app.requests}
    assert held <= delivered
    assert http_app.in_flight == 0
    attributes = sqs.get_queue_attributes(QueueUrl=queue.url, AttributeNames=["All"])["Attributes"]
    assert attributes["ApproximateNumberOfMessagesNotVisible"] == "0", attributes
    assert count_visible(sqs, queue.url) == MESSAGES - len(delivered)
    left = set()
    while True:
        batch = sqs.receive_message(QueueUrl=queue.url, MaxNumberOfMessages=10, VisibilityTimeout=60).get("Messages", [])
        if not batch:
            break
        left |= {message["Body"] for message in batch}
    assert left | delivered == set(bodies) and not left & delivered
    wait_until(lambda: not Path(f"/proc/{inner}").exists(), 5, message="PID 1 still there")
