"""Failure table, process side: kill -9 and SIGTERM mid-delivery, a poison message, CloudWatch down,
and a bad configuration.
"""

from __future__ import annotations

import signal
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import gevent.event
import pytest

from tests.e2e.helpers import send_batch
from tests.support import (
    Daemon,
    Queue,
    RecordedRequest,
    build_config_file,
    count_messages,
    count_visible,
    drain_bodies,
    wait_until,
    write_config,
)
from tests.support.faults import (  # noqa: F401 (fixtures)
    FaultyApp,
    FaultySqs,
    Reply,
    faulty_app_fixture,
    faulty_sqs_fixture,
    sqs_env_fixture,
)
from tests.support.moto import free_port


def config_for(tmp_path: Path, app: FaultyApp, queue: Queue, concurrency: int = 4, shutdown_timeout: int = 5,
               **queue_keys: Any) -> Path:
    return build_config_file(tmp_path, concurrency=concurrency, shutdown_timeout=shutdown_timeout,
                             queues=[{"name": queue.name, "error_visibility_timeout": 1, **queue_keys}],
                             targets={"default": {"type": "http", "url": f"{app.url}/work"}})


def holding(hold: gevent.event.Event, first_only: bool = True) -> Callable[[RecordedRequest], Reply]:
    """Hold first deliveries (receive count 1) until `hold` is set, then answer 200."""
    def respond(request: RecordedRequest) -> Reply:
        if not first_only or request.headers["x-aws-sqsd-receive-count"] == "1":
            hold.wait(60)
        return 200, {}, b""
    return respond


def test_kill_9_mid_delivery_loses_nothing_a_restarted_daemon_delivers_it(
    daemon: Callable[..., Daemon], tmp_path: Path, aws_env: dict[str, str], faulty_app: FaultyApp,
    sqs: Any, make_queue: Callable[..., Queue],
) -> None:
    queue = make_queue()
    hold = gevent.event.Event()
    faulty_app.respond = holding(hold)
    config = config_for(tmp_path, faulty_app, queue, visibility_timeout=3)
    first = daemon(["-c", str(config)], env=aws_env)
    first.wait_for_output("workerless started", timeout=60)
    sqs.send_message(QueueUrl=queue.url, MessageBody="survivor")
    faulty_app.wait_for_requests(1, timeout=30)
    first.kill()  # SIGKILL: no release, no delete, no goodbye
    killed = time.monotonic()
    # Nobody heartbeats it now: SQS shows it again within one visibility timeout.
    wait_until(lambda: count_visible(sqs, queue.url) == 1, 3 + 2, interval=0.1, message="not visible again")
    print(f"visible again {time.monotonic() - killed:.1f}s after kill -9 (visibility_timeout=3)")
    second = daemon(["-c", str(config)], env=aws_env)
    wait_until(lambda: len(faulty_app.succeeded_bodies()) == 1, 30,
               message=lambda: f"not redelivered:\n{second.output()[-3000:]}")
    wait_until(lambda: count_messages(sqs, queue.url) == 0, 15, message="not deleted")
    hold.set()  # the first attempt's app handler finishes; nobody is listening any more
    assert second.stop(timeout=30) == 0
    assert first.returncode == -signal.SIGKILL
    assert count_messages(sqs, queue.url) == 0
    assert [r.body for r in faulty_app.requests] == [b"survivor", b"survivor"]
    assert [r.headers["x-aws-sqsd-receive-count"] for r in faulty_app.requests] == ["1", "2"]
    # the restarted daemon's attempt is the one that counted; the first one's answer went nowhere
    wait_until(lambda: len(faulty_app.answered) == 2, 10)
    assert faulty_app.succeeded_bodies()[0] == b"survivor"


def test_sigterm_mid_delivery_finishes_it_releases_the_buffer_and_exits_0(
    daemon: Callable[..., Daemon], tmp_path: Path, aws_env: dict[str, str], faulty_app: FaultyApp,
    sqs: Any, make_queue: Callable[..., Queue],
) -> None:
    queue = make_queue()
    sent = [f"m{i}" for i in range(5)]
    send_batch(sqs, queue.url, sent)  # before the start: one receive buffers all five
    hold = gevent.event.Event()
    faulty_app.respond = holding(hold)
    config = config_for(tmp_path, faulty_app, queue, concurrency=1, shutdown_timeout=20, visibility_timeout=300)
    proc = daemon(["-c", str(config)], env=aws_env)
    (request,) = faulty_app.wait_for_requests(1, timeout=60)
    proc.send_signal(signal.SIGTERM)
    proc.wait_for_output("stopping (SIGTERM)", timeout=10)
    # the four buffered messages are released at once (their visibility timeout is 300 s)
    wait_until(lambda: count_visible(sqs, queue.url) == 4, 10, interval=0.1, message="buffer not released")
    assert proc.alive()  # still waiting for the delivery in flight
    hold.set()
    assert proc.wait_exit(timeout=30) == 0
    assert faulty_app.succeeded_bodies() == [request.body]
    assert count_messages(sqs, queue.url) == 4  # the delivered one is deleted, nothing else is
    left = drain_bodies(sqs, queue.url)
    assert sorted(left) == sorted(set(sent) - {request.body.decode()})
    assert len(faulty_app.requests) == 1
    assert "delivered=1 failed=0" in proc.output()


def test_sigterm_with_a_delivery_outlasting_the_grace_period_releases_it(
    daemon: Callable[..., Daemon], tmp_path: Path, aws_env: dict[str, str], faulty_app: FaultyApp,
    sqs: Any, make_queue: Callable[..., Queue],
) -> None:
    queue = make_queue()
    hold = gevent.event.Event()
    faulty_app.respond = holding(hold)
    config = config_for(tmp_path, faulty_app, queue, shutdown_timeout=2, visibility_timeout=300)
    proc = daemon(["-c", str(config)], env=aws_env)
    proc.wait_for_output("workerless started", timeout=60)
    sqs.send_message(QueueUrl=queue.url, MessageBody="too slow")
    faulty_app.wait_for_requests(1, timeout=30)
    stopped = time.monotonic()
    proc.send_signal(signal.SIGTERM)
    assert proc.wait_exit(timeout=20) == 0
    assert time.monotonic() - stopped < 2 + 6  # grace period, then kill, release and flush
    assert "still running after the grace period; releasing them" in proc.output()
    assert count_visible(sqs, queue.url) == 1  # released at once, not after 300 s
    hold.set()
    assert drain_bodies(sqs, queue.url) == ["too slow"]
    assert count_messages(sqs, queue.url) == 0
    assert faulty_app.succeeded_bodies() in ([], [b"too slow"])  # answered after the daemon hung up
    assert len(faulty_app.requests) == 1


def test_poison_message_goes_to_the_dead_letter_queue_byte_identical_after_max_retries(
    daemon: Callable[..., Daemon], tmp_path: Path, aws_env: dict[str, str], faulty_app: FaultyApp,
    sqs: Any, make_queue: Callable[..., Queue],
) -> None:
    queue, dlq = make_queue(), make_queue()
    poison = "☠ poison \u202eRTL\u202c {\"not\": json \t\r\n 😀 " + "é" * 1000
    faulty_app.respond = lambda request: (500, {}, b"boom") if request.body == poison.encode() else (200, {}, b"")
    config = config_for(tmp_path, faulty_app, queue, max_retries=3, dead_letter_queue=dlq.name)
    proc = daemon(["-c", str(config)], env=aws_env)
    proc.wait_for_output("workerless started", timeout=60)
    attributes = {"tenant": {"DataType": "String", "StringValue": "acme ☃"},
                  "blob": {"DataType": "Binary", "BinaryValue": b"\x00\xff\x01"}}
    sqs.send_message(QueueUrl=queue.url, MessageBody=poison, MessageAttributes=attributes)
    sqs.send_message(QueueUrl=queue.url, MessageBody="fine")
    wait_until(lambda: count_messages(sqs, dlq.url) == 1 and count_messages(sqs, queue.url) == 0, 30,
               message=lambda: proc.output()[-3000:])
    assert proc.stop(timeout=30) == 0
    assert count_messages(sqs, queue.url) == 0
    (message,) = sqs.receive_message(QueueUrl=dlq.url, MaxNumberOfMessages=10, MessageAttributeNames=["All"],
                                     WaitTimeSeconds=0)["Messages"]
    assert message["Body"] == poison  # byte-identical
    got = message["MessageAttributes"]
    assert got["tenant"]["StringValue"] == "acme ☃"
    assert got["blob"]["BinaryValue"] == b"\x00\xff\x01"
    assert got["workerless.source_queue"]["StringValue"] == queue.name
    assert got["workerless.receive_count"] == {"DataType": "Number", "StringValue": "3"}
    assert "HTTP 500" in got["workerless.error"]["StringValue"]
    sqs.delete_message(QueueUrl=dlq.url, ReceiptHandle=message["ReceiptHandle"])
    assert count_messages(sqs, dlq.url) == 0
    attempts = [r for r in faulty_app.requests if r.body == poison.encode()]
    assert [r.headers["x-aws-sqsd-receive-count"] for r in attempts] == ["1", "2", "3"]
    assert faulty_app.succeeded_bodies() == [b"fine"]
    assert "dead-lettered to" in proc.output()


def test_cloudwatch_unavailable_leaves_deliveries_unaffected(
    daemon: Callable[..., Daemon], tmp_path: Path, aws_env: dict[str, str], faulty_app: FaultyApp,
    sqs: Any, make_queue: Callable[..., Queue],
) -> None:
    queue = make_queue()
    dead = f"http://127.0.0.1:{free_port()}"  # nothing listens there: connection refused
    config = config_for(tmp_path, faulty_app, queue)
    proc = daemon(["-c", str(config), "--name=faults-cloudwatch", "--metrics-interval=1"],
                  env={**aws_env, "AWS_ENDPOINT_URL_CLOUDWATCH": dead})
    proc.wait_for_output("workerless started", timeout=60)
    sent = [f"metric-{i}" for i in range(30)]
    send_batch(sqs, queue.url, sent[:15])
    proc.wait_for_output("CloudWatch flush failed", timeout=30)
    send_batch(sqs, queue.url, sent[15:])  # still delivering while every flush fails
    wait_until(lambda: len(faulty_app.succeeded_bodies()) == 30, 30, message=lambda: proc.output()[-3000:])
    wait_until(lambda: count_messages(sqs, queue.url) == 0, 15, message="not deleted")
    stopping = time.monotonic()
    assert proc.stop(timeout=30) == 0
    assert time.monotonic() - stopping < 10  # the final flush is bounded too
    assert count_messages(sqs, queue.url) == 0
    assert sorted(faulty_app.succeeded_bodies()) == sorted(body.encode() for body in sent)
    assert len(faulty_app.requests) == 30
    assert "outcome=failure" not in proc.output()


QUEUE_AND_TARGET = '[[queues]]\nname = "q"\n[targets.default]\ntype = "http"\nurl = "http://127.0.0.1:9/"\n'
PERIODIC = '[periodic]\nfile = "cron.yaml"\nqueue = "q"\n'
BAD_CONFIGS = {  # case -> (TOML, cron.yaml or None, expected in the one line)
    "invalid-toml": ("concurrency = = 3\n", None, "invalid TOML"),
    "unknown-key": ("concurency = 3\n" + QUEUE_AND_TARGET, None, "concurency: unknown key"),
    "weight-string": (QUEUE_AND_TARGET.replace('"q"\n', '"q"\nweight = "5"\n', 1), None,
                      "queues[0].weight: must be an integer"),
    "cron-invalid-yaml": (QUEUE_AND_TARGET + PERIODIC, "version: 1\ncron:\n - name: [unclosed\n   url: /x\n",
                          "invalid YAML"),
    "cron-bad-schedule": (QUEUE_AND_TARGET + PERIODIC,
                          'version: 1\ncron:\n - name: job\n   url: /x\n   schedule: "every minute"\n', "schedule"),
}


@pytest.mark.parametrize("case", sorted(BAD_CONFIGS))
def test_bad_config_is_one_line_and_exit_2_without_touching_aws(
    case: str, daemon: Callable[..., Daemon], tmp_path: Path, sqs_env: dict[str, str], faulty_sqs: FaultySqs,
) -> None:
    toml, cron, expected = BAD_CONFIGS[case]
    config = write_config(tmp_path, toml)
    if cron is not None:
        (tmp_path / "cron.yaml").write_text(cron)
    proc = daemon(["-c", str(config)], env=sqs_env)
    assert proc.wait_exit(timeout=30) == 2
    lines = proc.output().strip().splitlines()
    assert len(lines) == 1, lines
    assert expected in lines[0] and "Traceback" not in lines[0]
    assert str(tmp_path) in lines[0]  # names the file (the TOML or the cron.yaml)
    assert faulty_sqs.requests == []
