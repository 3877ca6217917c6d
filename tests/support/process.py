"""Run the real `bin/workerless` as a subprocess, the way a Procfile would, and watch its log."""

from __future__ import annotations

import re
import signal
import subprocess
import sys
import tempfile
from pathlib import Path

from .wait import wait_until

REPO_ROOT = Path(__file__).resolve().parents[2]


class Daemon:
    """`python bin/workerless ARGS` with stdout and stderr both going to one log file."""

    def __init__(
        self,
        args: list[str],
        env: dict[str, str],
        cwd: Path | str = REPO_ROOT,
        log_path: Path | None = None,
        program: Path | None = None,
        is_executable: bool = False,
    ) -> None:
        """Start at once. `program` replaces bin/workerless (the harness self-test uses it); with
        `is_executable` it runs as it is (e.g. a pip-installed console script) instead of under our Python."""
        if log_path is None:
            log_path = Path(tempfile.mkstemp(prefix="workerless-", suffix=".log")[1])
        self.args = list(args)
        self.log_path = log_path
        env = dict(env)
        env.setdefault("PYTHONUNBUFFERED", "1")  # log lines appear as they are written
        with open(log_path, "wb") as log:
            self.process = subprocess.Popen(
                [*([] if is_executable else [sys.executable]), str(program or REPO_ROOT / "bin" / "workerless"),
                 *self.args],
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                env=env,
                cwd=str(cwd),
            )

    @property
    def pid(self) -> int:
        return self.process.pid

    @property
    def returncode(self) -> int | None:
        return self.process.poll()

    def alive(self) -> bool:
        return self.process.poll() is None

    def output(self) -> str:
        """Everything the daemon has written so far (stdout and stderr interleaved)."""
        try:
            return self.log_path.read_text(errors="replace")
        except FileNotFoundError:
            return ""

    def send_signal(self, sig: int) -> None:
        self.process.send_signal(sig)

    def wait_exit(self, timeout: float) -> int:
        """Wait for the process to end and return its exit code; fail with the log if it won't."""
        try:
            return self.process.wait(timeout)
        except subprocess.TimeoutExpired:
            raise AssertionError(
                f"workerless still running after {timeout:g}s; log:\n{self.output()[-4000:]}"
            ) from None

    def stop(self, timeout: float = 10.0) -> int:
        """SIGTERM and wait, as a platform would stop it."""
        if self.alive():
            self.send_signal(signal.SIGTERM)
        return self.wait_exit(timeout)

    def kill(self) -> None:
        if self.alive():
            self.process.kill()
        self.process.wait()

    def wait_for_output(self, substring: str, timeout: float = 10.0) -> str:
        """Wait until `substring` is in the log; return the log. Fails at once if it exits."""

        def seen() -> bool:
            if substring in self.output():
                return True
            if not self.alive() and substring not in self.output():
                raise AssertionError(
                    f"workerless exited {self.returncode} before printing {substring!r}; "
                    f"log:\n{self.output()[-4000:]}"
                )
            return False

        wait_until(
            seen,
            timeout,
            message=lambda: f"no {substring!r} in workerless log:\n{self.output()[-4000:]}",
        )
        return self.output()


def status_url(proc: Daemon, timeout: float = 30.0) -> str:
    """The daemon was told to listen on port 0: read the port it logged."""
    log = proc.wait_for_output("status server listening on", timeout=timeout)
    match = re.search(r"status server listening on (http://127\.0\.0\.1:\d+)", log)
    assert match, log
    return match.group(1)
