"""Helpers shared by the end-to-end tests."""

from __future__ import annotations

import json
import subprocess
import sys
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

from tests.support import REPO_ROOT, Daemon, HttpApp, MotoServer, Queue, count_messages, wait_until, write_config


def workerless_send(args: list[str], env: dict[str, str], cwd: Path,
                    stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    """`workerless send ARGS` run to its end, output captured; `stdin` is the body when ARGS give none."""
    return subprocess.run([sys.executable, str(REPO_ROOT / "bin" / "workerless"), "send", *args], env=env,
                          cwd=cwd, input=stdin, capture_output=True, text=True, timeout=60)


def send_batch(sqs: Any, url: str, bodies: list[str], **attributes: Any) -> list[str]:
    """Send up to 10 bodies in one call (atomic for a watcher's long poll); return message ids."""
    ids: list[str] = []
    for start in range(0, len(bodies), 10):
        entries = [{"Id": str(i), "MessageBody": body, **attributes}
                   for i, body in enumerate(bodies[start:start + 10])]
        response = sqs.send_message_batch(QueueUrl=url, Entries=entries)
        assert not response.get("Failed"), response
        by_id = {item["Id"]: item["MessageId"] for item in response["Successful"]}
        ids.extend(by_id[str(i)] for i in range(len(entries)))
    return ids


def queue_of(app: HttpApp) -> list[str]:
    """The X-Aws-Sqsd-Queue of every request the app has received, in arrival order."""
    return [request.headers["x-aws-sqsd-queue"] for request in list(app.requests)]


def bodies_of(app: HttpApp) -> list[str]:
    return [request.body.decode("utf-8") for request in list(app.requests)]


def status_config(tmp_path: Path, app: HttpApp, queues: list[Queue], unready_after: int = 60, **top: Any) -> Path:
    """A config with the status server on a free port and `queues` going to `app`."""
    settings = "".join(f"{key} = {value}\n" for key, value in top.items())
    listed = "".join(f'[[queues]]\nname = "{queue.name}"\nerror_visibility_timeout = 600\n\n' for queue in queues)
    return write_config(tmp_path, f"""
concurrency = 4
{settings}
[status]
listen = "127.0.0.1:0"
unready_after = {unready_after}

[metrics]
interval = 1

[polling]
poll_for = 1

{listed}[targets.default]
type = "http"
url = "{app.url}/work"
""")


def http_get(url: str) -> tuple[int, str, str]:
    """(status, content type, body) without raising for 4xx/5xx."""
    try:
        with urllib.request.urlopen(url, timeout=5) as response:
            return response.status, response.headers["Content-Type"], response.read().decode()
    except urllib.error.HTTPError as error:
        return error.code, error.headers["Content-Type"], error.read().decode()


def the_one_lambda_record(proc: Daemon, sqs: Any, queue: Queue, moto_server: MotoServer,
                          function: str) -> dict[str, Any]:
    """Once the daemon has deleted the queue's one message and stopped cleanly: the record moto's Lambda got."""
    wait_until(lambda: count_messages(sqs, queue.url) == 0, 60, message="not deleted")
    assert proc.stop(timeout=30) == 0
    (invocation,) = moto_server.lambda_invocations(function)
    (record,) = json.loads(invocation.raw)["Records"]
    return dict(record)

