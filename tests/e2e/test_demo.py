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
        wait_until(lambda: len(re.findall(r"app got POST", demo.output())) >= 11, timeout=90,
                   message=lambda: demo.output()[-2000:])
        posts = re.findall(r'app got POST (/ \{"queue": "\w+"|/batch with \d+ records)', demo.output())
        queues = [post.split('"')[3] if post.startswith("/ ") else post for post in posts]
        # the lowest queue last, its 5 messages in one POST of Lambda's SQS event
        assert queues == ["payments"] * 3 + ["submissions"] * 3 + ["default"] * 4 + ["/batch with 5 records"]
        records = re.findall(r'\[demo\]     record [0-9a-f-]{36}: \{"queue": "events", "n": (\d)\}', demo.output())
        assert sorted(records) == ["1", "2", "3", "4", "5"], demo.output()
        assert "X-Aws-Sqsd-Msgid" in demo.output() and "X-Aws-Sqsd-Msgcount: 5" in demo.output()

        match = re.search(r"\[demo\] status page: (http://127\.0\.0\.1:\d+)/ ", demo.output())
        assert match, demo.output()
        status = json.loads(http_get(match.group(1) + "/status")[2])
        assert [queue["name"] for queue in status["queues"]] == ["payments", "submissions", "default", "events"]
        wait_until(lambda: json.loads(http_get(match.group(1) + "/status")[2])["totals"]["Succeeded"] == 15, 10,
                   message=lambda: http_get(match.group(1) + "/status")[2])  # counted per message, batch or not
        assert http_get(match.group(1) + "/")[0] == 200
        assert re.search(r"\[demo\]   export AWS_ENDPOINT_URL=http://127\.0\.0\.1:\d+ ", demo.output())

        demo.send_signal(signal.SIGINT)
        assert demo.wait_exit(timeout=30) == 0
        assert "workerless stopped" in demo.output()
        assert not re.search(r"\b(WARNING|ERROR|CRITICAL|Traceback)\b", demo.output()), demo.output()
    finally:
        if demo.alive():
            demo.kill()
