"""The real Runtime Interface Emulator, running a Python handler through AWS's own runtime interface client, as
AWS's Lambda images run it: `aws-lambda-rie <python> -m awslambdaric module.handler`.

Both come from PyPI, fetched once into the venv (`<sys.prefix>/lambda-emulator/`): the aws-lambda-rie binary
that the aws-sam-cli wheel carries (samcli/local/rapid/aws-lambda-rie-<arch>; only that file of it is kept,
nothing of SAM is installed) and awslambdaric, installed into a folder of its own. A test skips, saying why,
where they cannot be had."""

from __future__ import annotations

import os
import platform
import shutil
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

import pytest

from .ports import ReservedPort
from .wait import wait_until

SAM_CLI = "aws-sam-cli==1.170.0"  # carries aws-lambda-rie, the emulator that AWS's Lambda images run
RUNTIME_CLIENT = "awslambdaric==4.2.2"
HOME = Path(sys.prefix) / "lambda-emulator"
ARCHITECTURES = {"x86_64": "x86_64", "amd64": "x86_64", "aarch64": "arm64", "arm64": "arm64"}


def emulator_home() -> Path:
    """The folder with `aws-lambda-rie` and `ric/` (awslambdaric), fetched on first use; pytest.skip if it cannot."""
    if (HOME / "aws-lambda-rie").exists() and (HOME / "ric" / "awslambdaric").is_dir():
        return HOME
    architecture = ARCHITECTURES.get(platform.machine())
    if architecture is None or sys.platform != "linux":
        pytest.skip(f"aws-lambda-rie is built for Linux on x86_64 and arm64, not {sys.platform} {platform.machine()}")
    with tempfile.TemporaryDirectory(dir=HOME.parent) as scratch:
        fetched = Path(scratch) / "home"
        try:
            fetch(fetched, architecture)
        except (subprocess.SubprocessError, OSError, KeyError, zipfile.BadZipFile) as error:
            pytest.skip(f"could not fetch the real emulator ({SAM_CLI}'s aws-lambda-rie, {RUNTIME_CLIENT}): {error}")
        if not HOME.exists():
            os.replace(fetched, HOME)  # whole, or not at all: another process may have fetched it meanwhile
    return HOME


def fetch(home: Path, architecture: str) -> None:
    pip = [sys.executable, "-m", "pip"]
    download = home / "download"
    subprocess.run([*pip, "download", "--quiet", "--no-deps", "--only-binary=:all:", "-d", str(download), SAM_CLI],
                   check=True, timeout=600, capture_output=True)
    wheel = next(download.glob("aws_sam_cli-*.whl"))
    with zipfile.ZipFile(wheel) as archive:
        binary = archive.read(f"samcli/local/rapid/aws-lambda-rie-{architecture}")
    (home / "aws-lambda-rie").write_bytes(binary)
    (home / "aws-lambda-rie").chmod(0o755)
    shutil.rmtree(download)
    subprocess.run([*pip, "install", "--quiet", "--only-binary=:all:", "--target", str(home / "ric"),
                    RUNTIME_CLIENT], check=True, timeout=600, capture_output=True)


class RealEmulator:
    """aws-lambda-rie on a loopback port, running `handler` ("module.function") found in `task_root`."""

    def __init__(self, task_root: Path, handler: str, env: dict[str, str], log: Path) -> None:
        home = emulator_home()
        self.ports = ReservedPort(), ReservedPort()  # the Invoke API's, and the runtime API's (default 9001)
        self.url = f"http://127.0.0.1:{self.ports[0].port}"
        command = [str(home / "aws-lambda-rie"), "--runtime-interface-emulator-address",
                   f"127.0.0.1:{self.ports[0].port}", "--runtime-api-address", f"127.0.0.1:{self.ports[1].port}",
                   sys.executable, "-m", "awslambdaric", handler]
        self.log = log
        with open(log, "wb") as out:
            self.process = subprocess.Popen(command, cwd=task_root, stdout=out, stderr=subprocess.STDOUT,
                                            env={**env, "PYTHONPATH": str(home / "ric")})
        wait_until(self.is_listening, 10, message=lambda: f"aws-lambda-rie did not listen: {self.output()}")
        for port in self.ports:
            port.release()

    def is_listening(self) -> bool:
        import socket

        if self.process.poll() is not None:
            raise AssertionError(f"aws-lambda-rie exited {self.process.returncode}: {self.output()}")
        try:
            socket.create_connection(("127.0.0.1", self.ports[0].port), timeout=1).close()
        except OSError:
            return False
        return True

    def output(self) -> str:
        return self.log.read_text(encoding="utf-8", errors="replace")

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        for port in self.ports:
            port.release()
