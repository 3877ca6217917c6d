"""`workerless redrive` SIGKILLed between its SendMessageBatch and its DeleteMessageBatch, then run again: real
processes on moto. The batch in hand is sent twice and nothing is lost; a `message_id` key downstream turns the
second copies into deletes without a POST."""

from __future__ import annotations

import json
import re
import signal
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tests.support import (CountingProxy, Daemon, HttpApp, MotoServer, Queue, build_config_file, count_messages,
                           receive_all, wait_until)

BODIES = [json.dumps({"order": index}) for index in range(25)]
KEY_HEADER = "x-workerless-idempotency-key"
ORIGINAL_ID = "workerless.message_id"
DUPLICATE = re.compile(r"key=(\S+) already delivered: deleted as a duplicate")


def dead_letter(sqs: Any, dlq: Queue, source: Queue) -> dict[str, str]:
    """The messages as the daemon dead-letters them (naming their source queue); body -> dead letter's id."""
    ids = {}
    for body in BODIES:
        ids[body] = sqs.send_message(QueueUrl=dlq.url, MessageBody=body, MessageAttributes={
            "workerless.source_queue": {"DataType": "String", "StringValue": source.name}})["MessageId"]
    return ids


@dataclass(frozen=True)
class Crash:
    receipts: list[str]  # of the delete the killed run never made
    sent: set[str]  # the dead letters' ids of the copies it sent (workerless.message_id)


def redrive_killed_after_its_send(daemon: Callable[..., Daemon], proxied_env: dict[str, str],
                                  counting_proxy: CountingProxy, sqs: Any, dlq: Queue, jobs: Queue,
                                  tmp_path: Path) -> Crash:
    """A first redrive sends its first batch, its delete is held at the proxy, and it is SIGKILLed there. With
    --max=10 that batch is all it receives, so it is the one batch in hand when the run dies."""
    counting_proxy.delays["DeleteMessageBatch"] = 600.0  # never reaches moto: the proxy stops first
    first = daemon(["redrive", dlq.name, "--max=10"], env=proxied_env, cwd=tmp_path)
    held = wait_until(lambda: counting_proxy.pending("DeleteMessageBatch"), 60,
                      message=lambda: f"no delete on its way: {first.output()[-2000:]}")
    sent = len(held[0].params["Entries"])
    wait_until(lambda: count_messages(sqs, jobs.url) == sent, 10,
               message=lambda: f"{count_messages(sqs, jobs.url)} copies in {jobs.name}, {sent} sent")
    first.send_signal(signal.SIGKILL)
    assert first.wait_exit(timeout=10) == -signal.SIGKILL
    assert count_messages(sqs, dlq.url) == len(BODIES)  # the copies are in both queues
    (send,) = counting_proxy.between(0, float("inf"), "SendMessageBatch")
    return Crash([entry["ReceiptHandle"] for entry in held[0].params["Entries"]],
                 {entry["MessageAttributes"][ORIGINAL_ID]["StringValue"] for entry in send.params["Entries"]})


def redrive_again(daemon: Callable[..., Daemon], aws_env: dict[str, str], sqs: Any, dlq: Queue,
                  receipts: list[str], tmp_path: Path) -> None:
    """The killed run's batch is visible again (as after redrive's 300 s visibility timeout, cut short with its
    own receipt handles), and a second redrive runs to its end."""
    entries = [{"Id": str(index), "ReceiptHandle": receipt, "VisibilityTimeout": 0}
               for index, receipt in enumerate(receipts)]
    assert not sqs.change_message_visibility_batch(QueueUrl=dlq.url, Entries=entries).get("Failed")
    second = daemon(["redrive", dlq.name], env=aws_env, cwd=tmp_path)
    assert second.wait_exit(timeout=120) == 0, second.output()
    assert f"moved {len(BODIES)} of {len(BODIES)} messages from {dlq.name}" in second.output(), second.output()
    assert count_messages(sqs, dlq.url) == 0


def test_a_redrive_killed_between_its_send_and_its_delete_loses_nothing_and_sends_that_batch_twice(
    daemon: Callable[..., Daemon], aws_env: dict[str, str], proxied_env: dict[str, str],
    counting_proxy: CountingProxy, sqs: Any, make_queue: Callable[..., Queue], tmp_path: Path,
) -> None:
    jobs, dlq = make_queue(), make_queue()
    ids = dead_letter(sqs, dlq, jobs)
    crash = redrive_killed_after_its_send(daemon, proxied_env, counting_proxy, sqs, dlq, jobs, tmp_path)
    redrive_again(daemon, aws_env, sqs, dlq, crash.receipts, tmp_path)
    assert counting_proxy.pending("DeleteMessageBatch")  # the killed run's delete never landed
    moved = receive_all(sqs, jobs.url, VisibilityTimeout=120)
    copies = Counter(message["Body"] for message in moved)
    assert set(copies) == set(BODIES)  # every message at least once
    assert {ids[body] for body, count in copies.items() if count == 2} == crash.sent  # the batch in hand, twice
    assert sum(copies.values()) == len(BODIES) + len(crash.sent)
    for message in moved:  # both copies carry the dead letter's id
        assert message["MessageAttributes"][ORIGINAL_ID]["StringValue"] == ids[message["Body"]]


def test_a_message_id_key_delivers_each_redriven_message_once_and_deletes_the_second_copies(
    daemon: Callable[..., Daemon], aws_env: dict[str, str], proxied_env: dict[str, str],
    counting_proxy: CountingProxy, http_app: HttpApp, sqs: Any, make_queue: Callable[..., Queue],
    moto_server: MotoServer, claims_table: str, tmp_path: Path,
) -> None:
    jobs, dlq = make_queue(), make_queue()
    ids = dead_letter(sqs, dlq, jobs)
    crash = redrive_killed_after_its_send(daemon, proxied_env, counting_proxy, sqs, dlq, jobs, tmp_path)
    redrive_again(daemon, aws_env, sqs, dlq, crash.receipts, tmp_path)
    assert count_messages(sqs, jobs.url) == len(BODIES) + len(crash.sent)
    config = build_config_file(tmp_path, concurrency=4, shutdown_timeout=10,
                               queues=[{"name": jobs.name, "idempotency_key": "message_id",
                                        "visibility_timeout": 5}],
                               targets={"default": {"type": "http", "url": f"{http_app.url}/work"}},
                               tables={"idempotency": {"table": claims_table}})
    proc = daemon(["-c", str(config)], env=aws_env)
    wait_until(lambda: count_messages(sqs, jobs.url) == 0, 90,
               message=lambda: f"{count_messages(sqs, jobs.url)} left: {proc.output()[-3000:]}")
    wait_until(lambda: set(DUPLICATE.findall(proc.output())) == crash.sent, 10, message=proc.output)
    assert proc.stop(timeout=30) == 0
    assert Counter(request.body.decode() for request in http_app.requests) == Counter(BODIES)  # each once
    assert sorted(request.headers[KEY_HEADER] for request in http_app.requests) == sorted(ids.values())
