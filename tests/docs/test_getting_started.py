"""The commands of the getting-started page, run as a newcomer would: the demo in one terminal, then each line
of the page's shell blocks in another, with the `export` line the demo printed."""

from __future__ import annotations

import json
import os
import re
import shlex
import signal
import subprocess
import sys
from pathlib import Path

from tests.support import REPO_ROOT, Daemon, wait_until

PAGE = REPO_ROOT / "docs" / "getting-started" / "demo.md"


def shell_commands(markdown: str) -> list[str]:
    """Every line of the page's ```sh blocks, without comments."""
    blocks = re.findall(r"```sh\n(.*?)```", markdown, flags=re.S)
    lines = [line.split("  #")[0].strip() for block in blocks for line in block.splitlines()]
    return [line for line in lines if line and not line.startswith("#")]


def test_the_getting_started_commands_run_against_the_demo(tmp_path: Path) -> None:
    commands = shell_commands(PAGE.read_text())
    assert commands[0] == "./dev demo" and len(commands) >= 6, commands
    env = {key: value for key, value in os.environ.items() if not key.startswith("AWS_")}
    demo = Daemon(["demo"], env, cwd=REPO_ROOT, log_path=tmp_path / "demo.log")  # what ./dev demo runs
    try:
        wait_until(lambda: "workerless started" in demo.output() and "export AWS_ENDPOINT_URL" in demo.output(),
                   timeout=90, message=lambda: demo.output()[-2000:])
        exported = re.search(r"\[demo\]   export (.*)", demo.output())
        status = re.search(r"\[demo\] status page: http://127\.0\.0\.1:(\d+)/", demo.output())
        assert exported and status, demo.output()
        shell_env = {**env, **dict(item.split("=", 1) for item in shlex.split(exported.group(1)))}
        bin_dir = Path(sys.executable).parent  # .venv/bin, or the venv ./dev was told to use
        outputs = {}
        for command in commands[1:]:
            line = command.replace(".venv/bin/", f"{bin_dir}/").replace(":49221/", f":{status.group(1)}/")
            result = subprocess.run(line, shell=True, cwd=REPO_ROOT, env=shell_env, capture_output=True, text=True,
                                    timeout=60)
            assert result.returncode == 0, f"{command}\n{result.stdout}\n{result.stderr}"
            outputs[command] = result.stdout
        sent = [output for command, output in outputs.items() if " send " in command]
        assert sent and all(re.fullmatch(r"[0-9a-f-]{36}\n", output) for output in sent), sent
        # the demo app prints the body and each header as writes of their own: wait for both, not one then the other
        wait_until(lambda: '"order": 42' in demo.output() and "X-Aws-Sqsd-Attr-Tenant: acme" in demo.output(),
                   timeout=30, message=lambda: demo.output()[-2000:])
        by_name = {command.split()[1]: output for command, output in outputs.items() if command.startswith(".venv")}
        assert "payments-dlq" in by_name["stats"] and "dry run: 0 messages in payments-dlq" in by_name["redrive"]
        assert json.loads(by_name["check"])["queues"][0]["dead_letter_queue"] == "payments-dlq"
        curl = next(output for command, output in outputs.items() if command.startswith("curl"))
        assert [queue["name"] for queue in json.loads(curl)["queues"]] == ["payments", "submissions", "default",
                                                                            "events"]
    finally:
        if demo.alive():  # SIGINT: the demo stops the daemon and the emulator it started in sessions of their own
            demo.send_signal(signal.SIGINT)
            demo.wait_exit(timeout=30)
