"""FIFO queues through the real daemon: each group in order, one at a time, even after a failure."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Callable

from tests.support import Daemon, HttpApp, Queue, RecordedRequest, build_config_file, count_messages, wait_until


def fifo_config(tmp_path: Path, app: HttpApp, queue: Queue) -> Path:
    return build_config_file(tmp_path, concurrency=4, polling={"poll_for": 20},
                             queues=[{"name": queue.name, "error_visibility_timeout": 1}],
                             targets={"default": {"type": "http", "url": f"{app.url}/work"}})


def send_groups(sqs: Any, queue: Queue, groups: dict[str, int]) -> None:
    entries = [{"Id": f"{group}-{i}", "MessageBody": f"{group}-{i}", "MessageGroupId": group,
                "MessageDeduplicationId": f"{group}-{i}"}
               for i in range(1, max(groups.values()) + 1) for group in groups if i <= groups[group]]
    for start in range(0, len(entries), 10):
        assert not sqs.send_message_batch(QueueUrl=queue.url, Entries=entries[start:start + 10]).get("Failed")


def of_group(requests: list[RecordedRequest], group: str) -> list[RecordedRequest]:
    return [request for request in requests if request.body.decode().startswith(group + "-")]


def test_fifo_groups_are_delivered_in_order_one_at_a_time(
    daemon: Callable[..., Daemon], aws_env: dict[str, str], http_app: HttpApp,
    sqs: Any, make_queue: Callable[..., Queue], tmp_path: Path,
) -> None:
    queue = make_queue(fifo=True)
    http_app.delay = 0.1
    send_groups(sqs, queue, {"g1": 5, "g2": 5})
    proc = daemon(["-c", str(fifo_config(tmp_path, http_app, queue))], env=aws_env)
    wait_until(lambda: count_messages(sqs, queue.url) == 0, 60,
               message=lambda: f"delivered: {[r.body for r in http_app.requests]}")
    assert proc.stop(timeout=30) == 0

    for group in ("g1", "g2"):
        requests = of_group(http_app.requests, group)
        assert [r.body.decode() for r in requests] == [f"{group}-{i}" for i in range(1, 6)]
        starts = [r.arrived for r in requests]
        # one at a time: each starts only after the previous one's 0.1 s answer
        assert all(later - earlier >= 0.09 for earlier, later in zip(starts, starts[1:])), starts
    assert len(http_app.requests) == 10


def test_fifo_failure_holds_back_the_rest_of_its_group(
    daemon: Callable[..., Daemon], aws_env: dict[str, str], http_app: HttpApp,
    sqs: Any, make_queue: Callable[..., Queue], tmp_path: Path,
) -> None:
    queue = make_queue(fifo=True)
    failed_once: list[bytes] = []

    def fail_g1_2_once(request: RecordedRequest) -> tuple[int, dict[str, str], bytes]:
        if request.body == b"g1-2" and not failed_once:
            failed_once.append(request.body)
            return 500, {}, b""
        return 200, {}, b""

    http_app.respond = fail_g1_2_once
    send_groups(sqs, queue, {"g1": 5, "g2": 3})
    proc = daemon(["-c", str(fifo_config(tmp_path, http_app, queue))], env=aws_env)
    wait_until(lambda: count_messages(sqs, queue.url) == 0, 60,
               message=lambda: f"delivered: {[r.body for r in http_app.requests]}")
    assert proc.stop(timeout=30) == 0

    g1 = of_group(http_app.requests, "g1")
    assert [r.body.decode() for r in g1] == ["g1-1", "g1-2", "g1-2", "g1-3", "g1-4", "g1-5"]
    assert [r.headers["x-aws-sqsd-receive-count"] for r in g1[1:3]] == ["1", "2"]
    assert [r.body.decode() for r in of_group(http_app.requests, "g2")] == ["g2-1", "g2-2", "g2-3"]
    assert "delivered=8 failed=1" in proc.output()
