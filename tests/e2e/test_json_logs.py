"""JSON log lines carry the fields of their record (queue, message_id, target, outcome), so logs can be
searched by message without parsing the text."""

from __future__ import annotations

import json
from typing import Any, Callable

from tests.support import Daemon, HttpApp, Queue, wait_until


def json_records(output: str) -> list[dict[str, Any]]:
    records = []
    for line in output.splitlines():
        try:
            record = json.loads(line)
        except ValueError:
            continue
        if isinstance(record, dict):
            records.append(record)
    return records


def test_a_failed_delivery_is_logged_with_its_queue_message_target_and_outcome(
    daemon: Callable[..., Daemon], aws_env: dict[str, str], http_app: HttpApp, sqs: Any,
    make_queue: Callable[..., Queue],
) -> None:
    queue = make_queue()
    http_app.set_status(500)
    sent = sqs.send_message(QueueUrl=queue.url, MessageBody="fails")["MessageId"]
    proc = daemon([f"--queues={queue.name}", f"--http={http_app.url}/work", "--concurrency=1",
                   "--log-format=json"], env=aws_env)

    def failures() -> list[dict[str, Any]]:
        return [r for r in json_records(proc.output()) if r.get("outcome") == "failure"]

    wait_until(lambda: failures(), 30, message=lambda: proc.output()[-2000:])
    assert proc.stop(timeout=30) == 0
    record = failures()[0]
    assert record["level"] == "WARNING" and record["logger"] == "workerless_gevent.delivery.outcomes"
    assert (record["queue"], record["message_id"], record["target"]) == (queue.name, sent, "default")
    assert record["error_type"] and record["receive_count"] == 1
    assert f"message={sent}" in record["message"]  # the text stays as it was
    started = [r for r in json_records(proc.output()) if "workerless started" in r["message"]]
    assert len(started) == 1 and "queue" not in started[0]  # only the fields a record was given
