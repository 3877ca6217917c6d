"""`workerless redrive --parallel=N`: N batches on their way at once, through real processes on moto. Send before
delete still holds with N of them (a send failing half-way loses nothing), a FIFO group still moves in order,
and --max is exact."""

from __future__ import annotations

import json
import re
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

from tests.support import CountingProxy, Daemon, ProxiedRequest, Queue, count_messages, count_visible, wait_until
from tests.support.faults import INTERNAL_ERROR, FaultySqs, faulty_sqs_fixture  # noqa: F401

BODIES = [json.dumps({"order": index}) for index in range(100)]
SUMMARY = re.compile(r"moved (\d+) of (\d+) messages from (\S+) to (\S+)")
LEFT = re.compile(r"left in (\S+): (\d+) messages \(([^)]*)\)")


def dead_letter(sqs: Any, dlq: Queue, source: Queue, bodies: list[str],
                groups: Callable[[int], str] | None = None) -> None:
    """The messages as the daemon dead-letters them (naming their source queue), 10 to a SendMessageBatch."""
    attributes = {"workerless.source_queue": {"DataType": "String", "StringValue": source.name}}
    for first in range(0, len(bodies), 10):
        entries = [{"Id": str(index), "MessageBody": body, "MessageAttributes": attributes,
                    **({"MessageGroupId": groups(first + index), "MessageDeduplicationId": f"d-{first + index}"}
                       if groups else {})}
                   for index, body in enumerate(bodies[first:first + 10])]
        assert not sqs.send_message_batch(QueueUrl=dlq.url, Entries=entries).get("Failed")


def most_at_once(requests: list[ProxiedRequest]) -> int:
    """The most of `requests` that were on their way at the same moment (an end before a start at a tie)."""
    edges = sorted([(r.started, 1) for r in requests] + [(r.ended or float("inf"), -1) for r in requests])
    most = current = 0
    for _, step in edges:
        current += step
        most = max(most, current)
    return most


def bodies_in(sqs: Any, queue: Queue) -> list[str]:
    """Receive and delete until empty: a FIFO queue hands out a group's next message only once the one before
    it is deleted, so the bodies come in each group's order."""
    bodies: list[str] = []
    while batch := sqs.receive_message(QueueUrl=queue.url, MaxNumberOfMessages=10).get("Messages", []):
        bodies.extend(message["Body"] for message in batch)
        sqs.delete_message_batch(QueueUrl=queue.url, Entries=[
            {"Id": str(index), "ReceiptHandle": message["ReceiptHandle"]} for index, message in enumerate(batch)])
    return bodies


def test_n_batches_are_on_their_way_at_once_and_never_more(
    daemon: Callable[..., Daemon], proxied_env: dict[str, str], counting_proxy: CountingProxy, sqs: Any,
    make_queue: Callable[..., Queue], tmp_path: Path,
) -> None:
    jobs, dlq = make_queue(), make_queue()
    dead_letter(sqs, dlq, jobs, BODIES)
    counting_proxy.delays["SendMessageBatch"] = 1.0  # each send held a second at the proxy
    proc = daemon(["redrive", dlq.name, "--parallel=4"], env=proxied_env, cwd=tmp_path)
    wait_until(lambda: len(counting_proxy.pending("SendMessageBatch")) == 4, 60,
               message=lambda: f"{len(counting_proxy.pending('SendMessageBatch'))} sends pending: {proc.output()}")
    assert proc.wait_exit(timeout=120) == 0, proc.output()
    assert f"moved 100 of 100 messages from {dlq.name} to {jobs.name}" in proc.output()
    sends = counting_proxy.between(0, float("inf"), "SendMessageBatch")
    assert most_at_once(sends) == 4
    assert sum(len(send.params["Entries"]) for send in sends) == 100
    # each worker's last delete goes on while it receives and sends its next batch
    deletes = counting_proxy.between(0, float("inf"), "DeleteMessageBatch")
    assert most_at_once(counting_proxy.between(0, float("inf"), "ReceiveMessage") + sends + deletes) <= 8
    assert Counter(bodies_in(sqs, jobs)) == Counter(BODIES)
    assert count_messages(sqs, dlq.url) == 0


def test_each_fifo_group_moves_in_order_with_ten_batches_at_once(
    daemon: Callable[..., Daemon], proxied_env: dict[str, str], counting_proxy: CountingProxy, sqs: Any,
    make_queue: Callable[..., Queue], tmp_path: Path,
) -> None:
    orders, dlq = make_queue(fifo=True), make_queue(fifo=True)
    bodies = [f"order {index}" for index in range(120)]
    # 8 groups of 15 in a row: a batch of 10 holds one group, or the end of one and the start of the next
    dead_letter(sqs, dlq, orders, bodies, groups=lambda index: f"group-{index // 15}")
    counting_proxy.delays["SendMessageBatch"] = 0.3  # so batches of different groups overlap
    proc = daemon(["redrive", dlq.name, "--parallel=10"], env=proxied_env, cwd=tmp_path)
    assert proc.wait_exit(timeout=120) == 0, proc.output()
    assert f"moved 120 of 120 messages from {dlq.name} to {orders.name}" in proc.output()
    sends = counting_proxy.between(0, float("inf"), "SendMessageBatch")
    assert most_at_once(sends) > 1  # groups really moved side by side
    for send in sends:  # a batch's messages in the order received: each group's in sequence
        numbers = [int(entry["MessageBody"].split()[1]) for entry in send.params["Entries"]]
        assert numbers == sorted(numbers), numbers
    moved = bodies_in(sqs, orders)
    assert Counter(moved) == Counter(bodies)
    for group in range(8):
        sequence = [int(body.split()[1]) for body in moved if int(body.split()[1]) // 15 == group]
        assert sequence == list(range(group * 15, group * 15 + 15)), (group, sequence)
    assert count_messages(sqs, dlq.url) == 0


def test_sends_failing_half_way_with_ten_batches_at_once_lose_nothing(
    daemon: Callable[..., Daemon], aws_env: dict[str, str], faulty_sqs: FaultySqs, sqs: Any,
    make_queue: Callable[..., Queue], tmp_path: Path,
) -> None:
    jobs, dlq = make_queue(), make_queue()
    dead_letter(sqs, dlq, jobs, BODIES)
    sends: list[int] = []

    def fourth_send_on_fails(action: str, params: dict[str, Any]) -> Any:
        if action != "SendMessageBatch":
            return None
        sends.append(len(params["Entries"]))
        return INTERNAL_ERROR if len(sends) > 3 else None  # every attempt after the first three, retries too

    faulty_sqs.fault = fourth_send_on_fails
    proc = daemon(["redrive", dlq.name, "--parallel=10"], env={**aws_env, "AWS_ENDPOINT_URL": faulty_sqs.url},
                  cwd=tmp_path)
    assert proc.wait_exit(timeout=120) == 1, proc.output()
    faulty_sqs.heal()
    output = proc.output()
    (summary,) = SUMMARY.findall(output)
    moved = int(summary[0])
    assert moved == sum(sends[:3]) and summary[2:] == (dlq.name, jobs.name), output
    (line,) = [line for line in output.splitlines() if line.startswith("workerless redrive:")]
    assert f"cannot send to {jobs.name}: InternalError" in line, line
    (left,) = LEFT.findall(line)
    left_ids = left[2].split(", ")
    assert left[0] == dlq.name and int(left[1]) == len(left_ids) > 0
    # every message in exactly one queue, and all of the dead-letter queue's visible again at once
    assert count_visible(sqs, dlq.url) == count_messages(sqs, dlq.url) == len(BODIES) - moved
    in_jobs, left_in_dlq = bodies_in(sqs, jobs), bodies_in(sqs, dlq)
    assert len(in_jobs) == moved
    assert Counter(in_jobs + left_in_dlq) == Counter(BODIES)


def test_max_is_exact_with_ten_batches_at_once(
    daemon: Callable[..., Daemon], proxied_env: dict[str, str], counting_proxy: CountingProxy, sqs: Any,
    make_queue: Callable[..., Queue], tmp_path: Path,
) -> None:
    jobs, dlq = make_queue(), make_queue()
    dead_letter(sqs, dlq, jobs, BODIES)
    proc = daemon(["redrive", dlq.name, "--parallel=10", "--max=37"], env=proxied_env, cwd=tmp_path)
    assert proc.wait_exit(timeout=120) == 0, proc.output()
    assert f"moved 37 of 37 messages from {dlq.name} to {jobs.name}" in proc.output()
    receives = counting_proxy.between(0, float("inf"), "ReceiveMessage")
    assert sum(int(receive.params["MaxNumberOfMessages"]) for receive in receives) == 37  # never asked for more
    assert not counting_proxy.between(0, float("inf"), "ChangeMessageVisibilityBatch")  # nothing to give back
    assert count_messages(sqs, jobs.url) == 37
    assert count_visible(sqs, dlq.url) == count_messages(sqs, dlq.url) == 63  # the rest visible, untouched
