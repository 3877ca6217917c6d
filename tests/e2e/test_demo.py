"""The README's first command: the demo runs on an embedded emulator, shows priority order, serves the status
page and prints nothing a newcomer would take for an error."""

from __future__ import annotations

import json
import os
import re
import signal

from pathlib import Path

from tests.e2e.helpers import http_get
from tests.support import REPO_ROOT, Daemon, wait_until


def test_demo_delivers_in_priority_order_and_stops_on_ctrl_c(tmp_path: Path) -> None:
    env = {key: value for key, value in os.environ.items() if not key.startswith("AWS_")}
    demo = Daemon(["demo"], env, cwd=REPO_ROOT, log_path=tmp_path / "demo.log")
    try:
        wait_until(lambda: len(re.findall(r"app got POST", demo.output())) >= 10, timeout=90,
                   message=lambda: demo.output()[-2000:])
        queues = re.findall(r'app got POST / \{"queue": "(\w+)"', demo.output())
        assert queues == ["payments"] * 3 + ["submissions"] * 3 + ["default"] * 4
        assert "X-Aws-Sqsd-Msgid" in demo.output()

        match = re.search(r"\[demo\] status page: (http://127\.0\.0\.1:\d+)/ ", demo.output())
        assert match, demo.output()
        status = json.loads(http_get(match.group(1) + "/status")[2])
        assert [queue["name"] for queue in status["queues"]] == ["payments", "submissions", "default"]
        assert http_get(match.group(1) + "/")[0] == 200
        assert re.search(r"\[demo\]   export AWS_ENDPOINT_URL=http://127\.0\.0\.1:\d+ ", demo.output())

        demo.send_signal(signal.SIGINT)
        assert demo.wait_exit(timeout=30) == 0
        assert "workerless stopped" in demo.output()
        assert not re.search(r"\b(WARNING|ERROR|CRITICAL|Traceback)\b", demo.output()), demo.output()
    finally:
        if demo.alive():
            demo.kill()
