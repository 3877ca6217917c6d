"""`workerless stats` and `workerless redrive` as an operator runs them: the real CLI on moto."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from tests.support import REPO_ROOT, Queue, count_messages, receive_all, write_config
from tests.support.faults import INTERNAL_ERROR, FaultySqs, faulty_sqs_fixture  # noqa: F401

WORKERLESS = REPO_ROOT / "bin" / "workerless"
OWN = {"tenant": {"DataType": "String", "StringValue": "acme"},
       "priority": {"DataType": "Number", "StringValue": "7"},
       "blob": {"DataType": "Binary", "BinaryValue": b"\x00\xffraw"}}
ANNOTATIONS = {"workerless.receive_count": {"DataType": "Number", "StringValue": "10"},
               "workerless.error": {"DataType": "String", "StringValue": "HTTP 500: boom"}}
BODIES = [json.dumps({"order": index, "text": "caf\u00e9 \u2603"}) for index in range(25)]


def cli(args: list[str], env: dict[str, str], cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, str(WORKERLESS), *args], env=env, cwd=cwd, capture_output=True,
                          text=True, timeout=120, stdin=subprocess.DEVNULL)


def dead_letter(sqs: Any, dlq: Queue, bodies: list[str], source: str | None,
                groups: Callable[[int], str] | None = None) -> dict[str, str]:
    """Messages as the daemon dead-letters them: own attributes plus its annotations (or none of ours, as
    SQS's redrive policy moves them); body -> message id."""
    annotations = {**ANNOTATIONS, "workerless.source_queue": {"DataType": "String", "StringValue": source}} \
        if source else {}
    ids = {}
    for index, body in enumerate(bodies):
        fifo = {"MessageGroupId": groups(index), "MessageDeduplicationId": f"d-{index}"} if groups else {}
        ids[body] = sqs.send_message(QueueUrl=dlq.url, MessageBody=body, MessageAttributes={**OWN, **annotations},
                                     **fifo)["MessageId"]
    return ids


def own_of(message: dict[str, Any]) -> dict[str, Any]:
    return {name: {key: value[key] for key in ("DataType", "StringValue", "BinaryValue") if key in value}
            for name, value in message.get("MessageAttributes", {}).items()}


def identity_of(message_id: str) -> dict[str, Any]:
    """What redrive adds: the id an `idempotency_key = "message_id"` reads, the same for every copy it sends."""
    return {"workerless.message_id": {"DataType": "String", "StringValue": message_id}}


def everything(sqs: Any, queue: Queue) -> list[dict[str, Any]]:
    return receive_all(sqs, queue.url, MessageSystemAttributeNames=["All"],
                       VisibilityTimeout=120)


def drain(sqs: Any, queue: Queue) -> list[dict[str, Any]]:
    """Receive and delete until empty: a FIFO queue hands out a group's next message only once the one before
    it is deleted."""
    messages: list[dict[str, Any]] = []
    while batch := sqs.receive_message(QueueUrl=queue.url, MaxNumberOfMessages=10, MessageAttributeNames=["All"],
                                       MessageSystemAttributeNames=["All"]).get("Messages", []):
        messages.extend(batch)
        sqs.delete_message_batch(QueueUrl=queue.url, Entries=[
            {"Id": str(index), "ReceiptHandle": message["ReceiptHandle"]} for index, message in enumerate(batch)])
    return messages


def test_redrive_moves_every_message_back_intact_and_leaves_nothing(
    sqs: Any, make_queue: Callable[..., Queue], aws_env: dict[str, str], tmp_path: Path,
) -> None:
    jobs, dlq = make_queue(), make_queue()
    ids = dead_letter(sqs, dlq, BODIES, jobs.name)
    done = cli(["redrive", dlq.name], aws_env, tmp_path)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == [f"moved 25 of 25 messages from {dlq.name} to {jobs.name}"]
    # a line per 10 % off a terminal, with the rate so far
    assert re.fullmatch(r"moved 25 of 25 messages \(100 %, [\d,]+ msg/s\)", done.stderr.splitlines()[-1]), done.stderr
    moved = everything(sqs, jobs)
    assert sorted(message["Body"] for message in moved) == sorted(BODIES)
    for message in moved:  # own attributes intact, annotations dropped, the dead letter's id carried as its identity
        assert own_of(message) == {**OWN, **identity_of(ids[message["Body"]])}
    assert count_messages(sqs, dlq.url) == 0


def test_dry_run_shows_the_first_messages_and_moves_nothing(
    sqs: Any, make_queue: Callable[..., Queue], aws_env: dict[str, str], tmp_path: Path,
) -> None:
    jobs, dlq = make_queue(), make_queue()
    dead_letter(sqs, dlq, BODIES, jobs.name)
    done = cli(["redrive", dlq.url, "--dry-run"], aws_env, tmp_path)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0] == f"dry run: 25 messages in {dlq.name} (approximate), nothing moved; the first 10:"
    assert len(lines) == 11 and all(f" -> {jobs.name}: body " in line for line in lines[1:])
    assert "attributes: blob, priority, tenant" in lines[1]
    assert count_messages(sqs, jobs.url) == 0
    left = everything(sqs, dlq)
    assert sorted(message["Body"] for message in left) == sorted(BODIES)
    assert all(own_of(message)["workerless.source_queue"]["StringValue"] == jobs.name for message in left)


def test_without_a_source_attribute_redrive_needs_to_and_max_stops_early(
    sqs: Any, make_queue: Callable[..., Queue], aws_env: dict[str, str], tmp_path: Path,
) -> None:
    dlq = make_queue()
    policy = json.dumps({"deadLetterTargetArn": dlq.arn, "maxReceiveCount": "3"})
    source, other = make_queue(RedrivePolicy=policy), make_queue()
    dead_letter(sqs, dlq, BODIES, None)  # as SQS's own redrive policy moves them: no annotations
    done = cli(["redrive", dlq.name], aws_env, tmp_path)
    assert done.returncode == 2
    (line,) = done.stderr.splitlines()
    assert "has no workerless.source_queue: give --to=QUEUE" in line and f": {source.name});" in line, line
    assert count_messages(sqs, dlq.url) == 25  # the batch in hand went back at once
    done = cli(["redrive", dlq.name, f"--to={other.name}", "--max=7"], aws_env, tmp_path)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == [f"moved 7 of 7 messages from {dlq.name} to {other.name}"]
    assert (count_messages(sqs, other.url), count_messages(sqs, dlq.url), count_messages(sqs, source.url)) == (7, 18, 0)


def test_a_fifo_queue_keeps_its_groups_and_order_with_the_original_id_as_deduplication_id(
    sqs: Any, make_queue: Callable[..., Queue], aws_env: dict[str, str], tmp_path: Path,
) -> None:
    orders, dlq = make_queue(fifo=True), make_queue(fifo=True)
    bodies = [f"order {index}" for index in range(12)]
    ids = dead_letter(sqs, dlq, bodies, orders.name, groups=lambda index: f"group-{index % 3}")
    done = cli(["redrive", dlq.name], aws_env, tmp_path)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == [f"moved 12 of 12 messages from {dlq.name} to {orders.name}"]
    moved = drain(sqs, orders)
    assert sorted(message["Body"] for message in moved) == sorted(bodies)
    for message in moved:
        index = int(message["Body"].split()[1])
        assert message["Attributes"]["MessageGroupId"] == f"group-{index % 3}"
        assert message["Attributes"]["MessageDeduplicationId"] == ids[message["Body"]]
        assert own_of(message) == {**OWN, **identity_of(ids[message["Body"]])}
    for group in range(3):  # each group in its original order (FIFO hands a group out in order)
        sequence = [int(m["Body"].split()[1]) for m in moved if m["Attributes"]["MessageGroupId"] == f"group-{group}"]
        assert sequence == list(range(group, 12, 3))
    assert count_messages(sqs, dlq.url) == 0


def test_a_send_that_fails_half_way_loses_nothing(
    sqs: Any, make_queue: Callable[..., Queue], aws_env: dict[str, str], faulty_sqs: FaultySqs, tmp_path: Path,
) -> None:
    jobs, dlq = make_queue(), make_queue()
    dead_letter(sqs, dlq, BODIES, jobs.name)
    sends: list[str] = []

    def second_send_on_fails(action: str, params: dict[str, Any]) -> Any:
        if action != "SendMessageBatch":
            return None
        sends.append(action)
        return INTERNAL_ERROR if len(sends) > 1 else None  # every attempt after the first batch, retries too

    faulty_sqs.fault = second_send_on_fails
    done = cli(["redrive", dlq.name, "--parallel=1"], {**aws_env, "AWS_ENDPOINT_URL": faulty_sqs.url}, tmp_path)
    assert done.returncode == 1, done.stderr
    assert done.stdout.splitlines() == [f"moved 10 of 25 messages from {dlq.name} to {jobs.name}"]
    (line,) = [line for line in done.stderr.splitlines() if line.startswith("workerless redrive:")]
    assert f"cannot send to {jobs.name}: InternalError" in line and f"left in {dlq.name}: 10 messages (" in line
    assert len(sends) == 1 + 5  # the first batch, then the second tried 5 times (standard retries)
    faulty_sqs.heal()
    in_jobs, in_dlq = everything(sqs, jobs), everything(sqs, dlq)  # the unsent batch is visible again at once
    assert (len(in_jobs), len(in_dlq)) == (10, 15)
    assert sorted(message["Body"] for message in in_jobs + in_dlq) == sorted(BODIES)


def test_stats_json_reads_known_depths(
    sqs: Any, make_queue: Callable[..., Queue], aws_env: dict[str, str], tmp_path: Path,
) -> None:
    ours, theirs = make_queue(), make_queue()
    policy = json.dumps({"deadLetterTargetArn": theirs.arn, "maxReceiveCount": "5"})
    jobs, payments, plain = make_queue(), make_queue(RedrivePolicy=policy), make_queue()
    for index in range(5):
        sqs.send_message(QueueUrl=jobs.url, MessageBody=f"job {index}")
    sqs.send_message(QueueUrl=jobs.url, MessageBody="later", DelaySeconds=600)
    sqs.receive_message(QueueUrl=jobs.url, MaxNumberOfMessages=2, VisibilityTimeout=600)
    for queue, count in ((ours, 4), (theirs, 2), (payments, 1)):
        for index in range(count):
            sqs.send_message(QueueUrl=queue.url, MessageBody=str(index))
    config = write_config(tmp_path, f"""
[[queues]]
name = "{jobs.name}"
dead_letter_queue = "{ours.name}"

[[queues]]
name = "{payments.name}"

[[queues]]
name = "{plain.name}"

[targets.default]
type = "http"
url = "http://127.0.0.1:9/"
""")
    done = cli(["stats", "-c", str(config), "--json"], aws_env, tmp_path)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == [
        {"queue": jobs.name, "visible": 3, "in_flight": 2, "delayed": 1, "dead_letter_queue": ours.name,
         "dead_letter_visible": 4},
        {"queue": payments.name, "visible": 1, "in_flight": 0, "delayed": 0, "dead_letter_queue": theirs.name,
         "dead_letter_visible": 2},
        {"queue": plain.name, "visible": 0, "in_flight": 0, "delayed": 0, "dead_letter_queue": None,
         "dead_letter_visible": None},
    ]
    done = cli(["stats", f"--queues={jobs.name},{plain.name}"], aws_env, tmp_path)  # no target needed
    assert done.returncode == 0, done.stderr
    header, first, second = done.stdout.splitlines()
    assert header.split() == ["queue", "visible", "in", "flight", "delayed", "dead-letter", "queue", "dlq", "visible"]
    assert first.split() == [jobs.name, "3", "2", "1", "-", "-"] and second.split() == [plain.name, "0", "0", "0", "-", "-"]
    done = cli(["stats", "--queues=no-such-queue-here"], aws_env, tmp_path)
    assert done.returncode == 2 and done.stderr.startswith("workerless stats: queue no-such-queue-here: ")


def test_bad_redrive_options_are_one_line_before_any_aws_call(
    aws_env: dict[str, str], faulty_sqs: FaultySqs, tmp_path: Path,
) -> None:
    env = {**aws_env, "AWS_ENDPOINT_URL": faulty_sqs.url}
    cases = [(["--max=0"], '--max: must be a whole number greater than 0 (got "0")'),
             (["--rate=fast"], '--rate: must be a number greater than 0 (got "fast")'),
             (["--to=dlq-1"], '--to: is the dead-letter queue itself (got "dlq-1")'),
             (["--parallel=0"], '--parallel: must be a whole number from 1 to 100 (got "0")'),
             (["--parallel=101"], '--parallel: must be a whole number from 1 to 100 (got "101")'),
             (["--parallel=two"], '--parallel: must be a whole number from 1 to 100 (got "two")')]
    for args, line in cases:
        done = cli(["redrive", "dlq-1", *args], env, tmp_path)
        assert (done.returncode, done.stderr.splitlines(), done.stdout) == (2, [line], "")
    assert faulty_sqs.requests == []
