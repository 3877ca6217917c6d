"""The status page in a real headless Chromium while a slow delivery runs."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import uuid
from pathlib import Path
from typing import Any, Callable

import pytest

from tests.e2e.helpers import http_get, status_config
from tests.support import REPO_ROOT, Daemon, HttpApp, Queue, status_url, wait_until
from workerless_gevent.observability.status_page import render_page

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
SCREENSHOT_COPY = Path("/tmp/status-screenshot.png")  # the one to look at after a run (printed by the test)
# The docs site's picture of the page (docs/operations/status-page.md): the charts test takes it; it replaces the
# committed one when WORKERLESS_UPDATE_SCREENSHOT=1, so that a test run leaves the working tree as it was.
DOCS_SCREENSHOT = REPO_ROOT / "docs" / "images" / "status-page.png"
CHARTS = ("chart-deliveries", "chart-latency", "chart-in-flight", "chart-backlog")


def run_chromium(profile: Path, *args: str) -> subprocess.CompletedProcess[str]:
    assert CHROMIUM is not None
    command = [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
               "--disable-background-networking", "--disable-component-update", "--disable-sync",
               "--disable-dev-shm-usage", f"--user-data-dir={profile}", *args]
    env = {key: value for key, value in os.environ.items() if "proxy" not in key.lower()}
    result = subprocess.run(command, capture_output=True, text=True, timeout=90, env=env)
    assert result.returncode == 0, result.stderr[-3000:]
    return result


@pytest.mark.skipif(CHROMIUM is None, reason="chromium is not installed (Debian package `chromium`)")
def test_status_page_shows_queues_and_the_message_in_flight(
    daemon: Callable[..., Daemon], aws_env: dict[str, str], http_app: HttpApp, sqs: Any,
    make_queue: Callable[..., Queue], tmp_path: Path,
) -> None:
    payments = make_queue(name=f"payments-{uuid.uuid4().hex[:8]}")
    default = make_queue(name=f"default-{uuid.uuid4().hex[:8]}")
    http_app.delay = 60  # the delivery is still running when the browser looks
    config = status_config(tmp_path, http_app, [payments, default], name='"status-page"', shutdown_timeout=3)
    proc = daemon(["-c", str(config)], env=aws_env)
    url = status_url(proc, timeout=20)
    message_id = sqs.send_message(QueueUrl=payments.url, MessageBody="slow")["MessageId"]
    http_app.wait_for_requests(1, timeout=20)
    wait_until(lambda: json.loads(http_get(url + "/status")[2])["in_flight_count"] == 1, timeout=10)
    # two samples at least, so each chart has a line (one every few seconds)
    wait_until(lambda: len(json.loads(http_get(url + "/status")[2])["series"]["times"]) >= 2, timeout=20)

    dom = run_chromium(tmp_path / "profile-dom", "--dump-dom", url + "/").stdout
    assert "<table" in dom and payments.name in dom and default.name in dom
    assert message_id in dom and "In flight (1)" in dom
    assert 'http-equiv="refresh"' in dom and 'id="health"' in dom
    assert not re.search(r"""(src|href)=["']?(https?:)?//""", dom)  # no external assets (a target's url is text)
    assert f"<td>{http_app.url}/work</td>" in dom and ">Targets<" in dom
    assert all(f'id="{chart}"' in dom for chart in CHARTS) and dom.count("<svg") == len(CHARTS)
    assert 'data-series="in flight"' in dom and 'data-series="succeeded"' in dom

    screenshot = tmp_path / "status.png"
    run_chromium(tmp_path / "profile-shot", f"--screenshot={screenshot}", "--window-size=1200,1500", url + "/")
    assert screenshot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and screenshot.stat().st_size > 10_000
    shutil.copyfile(screenshot, SCREENSHOT_COPY)
    print(f"status page screenshot: {screenshot} (copied to {SCREENSHOT_COPY})")

    proc.send_signal(15)
    wait_until(lambda: http_get(url + "/healthz")[::2] == (503, "stopping\n"), timeout=5)
    assert proc.wait_exit(timeout=20) == 0


def test_the_page_escapes_what_it_shows() -> None:
    status = {
        "name": "<b>n</b>", "version": "0", "healthy": False, "health": "receives failing: <q> (2 in a row)",
        "uptime_seconds": 1.0, "strategy": "priority", "concurrency": 1, "in_flight_count": 0, "in_flight": [],
        "totals": {}, "queues": [],
        "failures": [{"type": "HTTP 500", "count": 2, "latest_error": "<script>alert(1)</script>"}],
    }
    page = render_page(status)
    assert "<script>" not in page and "&lt;script&gt;alert(1)&lt;/script&gt;" in page
    assert "<b>n</b>" not in page and 'class="badge bad"' in page and "&lt;q&gt;" in page


def test_the_charts_move_while_messages_flow(
    daemon: Callable[..., Daemon], aws_env: dict[str, str], http_app: HttpApp, sqs: Any,
    make_queue: Callable[..., Queue], tmp_path: Path,
) -> None:
    jobs = make_queue(name=f"jobs-{uuid.uuid4().hex[:8]}")
    http_app.delay = 0.25  # a latency to chart, and 120 messages at concurrency 4 flow for about 8 s
    proc = daemon(["-c", str(status_config(tmp_path, http_app, [jobs]))], env=aws_env)
    url = status_url(proc, timeout=20)
    for start in range(0, 120, 10):
        sqs.send_message_batch(QueueUrl=jobs.url, Entries=[
            {"Id": str(index), "MessageBody": f"job {start + index}"} for index in range(10)])

    def series() -> dict[str, Any]:
        return dict(json.loads(http_get(url + "/status")[2])["series"])

    def has_flowed() -> bool:
        current = series()
        return (any(rate > 0 for rate in current["succeeded_per_second"])
                and any(p50 is not None for p50 in current["latency_p50_ms"])
                and any(count > 0 for count in current["in_flight"])
                and any(value for value in current["backlog"].get(jobs.name, []) if value))

    wait_until(has_flowed, timeout=60, message=lambda: f"the series did not move: {series()}")
    http_app.wait_for_requests(120, timeout=60)
    current = series()
    assert current["in_flight_limit"][-1] == 4 and current["window_seconds"] == 900
    assert len(current["times"]) == len(current["succeeded_per_second"]) == len(current["latency_p95_ms"])
    page = http_get(url + "/")[2]
    assert 'data-series="succeeded"' in page and f'data-series="{jobs.name}"' in page
    if CHROMIUM is not None:
        screenshot = tmp_path / "status-charts.png"
        run_chromium(tmp_path / "profile-charts", f"--screenshot={screenshot}", "--window-size=1100,1250", url + "/")
        assert screenshot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and screenshot.stat().st_size > 10_000
        if os.environ.get("WORKERLESS_UPDATE_SCREENSHOT") == "1":
            shutil.copyfile(screenshot, DOCS_SCREENSHOT)
    proc.send_signal(15)
    assert proc.wait_exit(timeout=20) == 0
