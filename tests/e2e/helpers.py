"""Helpers shared by the end-to-end tests."""

from __future__ import annotations

import json
import subprocess
import sys
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any, Callable

from tests.support import (REPO_ROOT, Daemon, HttpApp, MotoServer, Queue, build_config_file, count_messages, wait_until,
                           write_config)


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


def send_traced(sqs: Any, url: str, count: int = 3) -> list[tuple[str, str]]:
    """Send `count` messages in one call, each in a producer's trace (its `traceparent` attribute); return each
    producer's (trace id, span id), in order."""
    producers = [(f"{index:032x}", f"{index + 100:016x}") for index in range(1, count + 1)]
    entries = [{"Id": str(index), "MessageBody": f"record {index}", "MessageAttributes": {"traceparent": {
        "DataType": "String", "StringValue": f"00-{trace_id}-{span_id}-01"}}}
        for index, (trace_id, span_id) in enumerate(producers)]
    sqs.send_message_batch(QueueUrl=url, Entries=entries)
    return producers


def start_on_lambda_endpoint(daemon: Callable[..., Daemon], aws_env: dict[str, str], tmp_path: Path, queue: Queue,
                             url: str, **target: Any) -> Daemon:
    """The daemon on one queue whose Lambda target has its own `endpoint_url` (a Runtime Interface Emulator)."""
    config = build_config_file(tmp_path, concurrency=8, shutdown_timeout=5, polling={"poll_for": 20},
                               queues=[{"name": queue.name, "error_visibility_timeout": 1}],
                               targets={"default": {"type": "lambda", "endpoint_url": url, **target}})
    return daemon(["-c", str(config)], env=aws_env)


def expect_the_whole_batch_failed(proc: Daemon, sqs: Any, queue: Queue, bodies: list[str], logged: str,
                                  seen: Callable[[], list[tuple[str, str]]], timeout: float) -> None:
    """Each of `bodies` came back for a second try (`seen`: (body, ApproximateReceiveCount) of every record
    invoked), none was deleted, and the daemon logged `logged` and delivered none."""
    again = {(body, "2") for body in bodies}
    wait_until(lambda: again <= set(seen()), timeout, message=lambda: f"deliveries: {seen()}")
    assert proc.stop(timeout=30) == 0
    assert count_messages(sqs, queue.url) == len(bodies)
    log = proc.output()
    assert logged in log, log
    assert "delivered=0" in log


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

