"""`ready_path`: the real daemon receives nothing for a target's queues until its app answers GET
ready_path with 2xx, while the queues of other targets keep running."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Callable

from tests.e2e.helpers import http_get, send_batch
from tests.support import (
    CountingProxy,
    Daemon,
    HttpApp,
    Queue,
    RecordedRequest,
    build_config_file,
    count_messages,
    count_visible,
    status_url,
    wait_until,
)
from tests.support.http_app import Reply


class SlowStartingApp:
    """503 on /health until `is_up`; 200 for everything else."""

    def __init__(self) -> None:
        self.is_up = False

    def __call__(self, request: RecordedRequest) -> Reply:
        if request.path == "/health" and not self.is_up:
            return 503, {}, b"starting"
        return 200, {}, b""


def posts(app: HttpApp) -> list[RecordedRequest]:
    return [request for request in list(app.requests) if request.method == "POST"]


def receives_of(proxy: CountingProxy, queue: Queue) -> int:
    return sum(1 for request in proxy.between(0, float("inf"), "ReceiveMessage")
               if str(request.params.get("QueueUrl", "")).endswith("/" + queue.name))


def test_nothing_is_received_until_the_app_is_ready_and_other_targets_keep_running(
    daemon: Callable[..., Daemon], proxied_env: dict[str, str], counting_proxy: CountingProxy,
    http_app: HttpApp, sqs: Any, make_queue: Callable[..., Queue], tmp_path: Path,
) -> None:
    gated, other = make_queue(), make_queue()
    app = SlowStartingApp()
    http_app.respond = app
    bodies = [f"job-{i}" for i in range(5)]
    send_batch(sqs, gated.url, bodies)
    config = build_config_file(
        tmp_path, concurrency=4, queues=[{"name": gated.name}, {"name": other.name, "target": "other"}],
        targets={"default": {"type": "http", "url": f"{http_app.url}/work", "ready_path": "/health"},
                 "other": {"type": "http", "url": f"{http_app.url}/other"}},
        tables={"status": {"listen": "127.0.0.1:0"}})
    proc = daemon(["-c", str(config)], env=proxied_env)
    url = status_url(proc, timeout=30)
    proc.wait_for_output("target=default waiting for the app", timeout=10)
    sqs.send_message(QueueUrl=other.url, MessageBody="not gated")
    wait_until(lambda: [request.body for request in posts(http_app)] == [b"not gated"], 20,
               message=lambda: f"posts: {[r.body for r in posts(http_app)]}")
    wait_until(lambda: sum(request.path == "/health" for request in list(http_app.requests)) >= 3, 10)

    assert receives_of(counting_proxy, gated) == 0 and receives_of(counting_proxy, other) >= 1
    assert count_visible(sqs, gated.url) == 5
    readyz = json.loads(http_get(url + "/readyz")[2])
    assert readyz["ready"] is False
    assert readyz["reasons"] == [f"queue {gated.name}: target default waiting for its app "
                                 f"(GET {http_app.url}/health: HTTP 503)"]
    status = json.loads(http_get(url + "/status")[2])
    assert [queue["state"] for queue in status["queues"]][0] == "paused"
    assert [(target["name"], target["state"]) for target in status["targets"]] == [("default", "waiting"),
                                                                                   ("other", "ready")]

    app.is_up = True
    wait_until(lambda: len(posts(http_app)) == 6, 20, message=lambda: f"{len(posts(http_app))} posts")
    assert sorted(request.body.decode() for request in posts(http_app)[1:]) == bodies
    assert all(request.path == "/work" for request in posts(http_app)[1:])
    wait_until(lambda: count_messages(sqs, gated.url) == 0, 15, message="not deleted")
    wait_until(lambda: http_get(url + "/readyz")[0] == 200, 10)
    assert proc.stop(timeout=20) == 0
    log = proc.output()
    assert "delivered=6 failed=0" in log
    assert log.count("target=default waiting for the app") == 1 and log.count("target=default app ready after") == 1
    assert "app still not ready" not in log  # a WARNING only after a minute of waiting, not one per check
