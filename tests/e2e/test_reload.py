"""SIGHUP to the real daemon: the configuration file read again and applied without dropping the
delivery in flight; an invalid file refused in one line; two quick SIGHUPs; SIGTERM mid-reload."""

from __future__ import annotations

import json
import signal
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Callable

import botocore.exceptions
import gevent
import gevent.event
import pytest

from tests.e2e.helpers import http_get
from tests.support import (
    Daemon,
    HttpApp,
    MotoServer,
    Queue,
    RecordedRequest,
    build_config_file,
    count_messages,
    status_url,
    wait_until,
)
from tests.e2e.test_idempotency_faults import dynamodb_error
from tests.support import CountingProxy
from tests.support.chaos import ChaosProxy, chaos_fixture  # noqa: F401 (fixture)
from tests.support.faults import FaultySqs, faulty_sqs_fixture, sqs_env_fixture  # noqa: F401 (fixtures)
from tests.support.http_app import Reply

STOP_SECONDS = 6
# The wall clock from the test's SIGTERM to the process's end also holds the signal's way in, the interpreter's
# exit and a loaded machine's scheduling, none of which the daemon's own lines show.
WALL_CLOCK_SLACK_SECONDS = 3.0


def write(tmp_path: Path, app: HttpApp, queues: list[Queue], path: str = "/v1", **top: Any) -> Path:
    """The one config file of a test, written again in place for each reload."""
    return build_config_file(tmp_path, concurrency=top.pop("concurrency", 2), shutdown_timeout=10,
                             polling={"poll_for": 1}, queues=[{"name": queue.name} for queue in queues],
                             targets={"default": {"type": "http", "url": f"{app.url}{path}"}}, **top)


class Holding:
    """Answers 200 at once, except a body of "slow" (or `slow`), held until `release` (or 60 s)."""

    def __init__(self, slow: bytes = b"slow") -> None:
        self.slow = slow
        self.release = gevent.event.Event()
        self.slow_done_at = 0.0

    def __call__(self, request: RecordedRequest) -> Reply:
        if request.body == self.slow:
            self.release.wait(60)
            self.slow_done_at = time.monotonic()
        return 200, {}, b""


def arrivals(app: HttpApp) -> dict[str, RecordedRequest]:
    return {request.body.decode(): request for request in list(app.requests)}


def test_a_reload_finishes_the_delivery_in_flight_then_serves_the_new_queue_and_target(
    daemon: Callable[..., Daemon], aws_env: dict[str, str], http_app: HttpApp, sqs: Any,
    make_queue: Callable[..., Queue], tmp_path: Path,
) -> None:
    first, added = make_queue(), make_queue()
    holding = Holding()
    http_app.respond = holding
    config = write(tmp_path, http_app, [first])
    proc = daemon(["-c", str(config)], env=aws_env)
    proc.wait_for_output("workerless started", timeout=30)
    sqs.send_message(QueueUrl=first.url, MessageBody="slow")
    http_app.wait_for_requests(1, timeout=20)

    write(tmp_path, http_app, [first, added], path="/v2")  # a new queue, and the target's url changed
    proc.send_signal(signal.SIGHUP)
    proc.wait_for_output("reload: draining", timeout=10)
    sqs.send_message(QueueUrl=added.url, MessageBody="new-queue")
    sqs.send_message(QueueUrl=first.url, MessageBody="same-queue")
    assert proc.alive() and http_app.in_flight == 1
    holding.release.set()

    wait_until(lambda: {"new-queue", "same-queue"} <= set(arrivals(http_app)), 20,
               message=lambda: f"got {list(arrivals(http_app))}; log:\n{proc.output()[-3000:]}")
    got = arrivals(http_app)
    assert got["slow"].path == "/v1"  # the delivery in flight kept its target
    assert got["new-queue"].path == got["same-queue"].path == "/v2"
    assert got["new-queue"].arrived >= holding.slow_done_at and got["same-queue"].arrived >= holding.slow_done_at
    wait_until(lambda: count_messages(sqs, first.url) + count_messages(sqs, added.url) == 0, 15,
               message="not every message was deleted")
    assert proc.wait_for_output("reload applied", timeout=5)
    assert proc.stop(timeout=20) == 0
    assert "delivered=3 failed=0" in proc.output()
    assert "Traceback" not in proc.output()


def check_refused(daemon: Callable[..., Daemon], aws_env: dict[str, str], http_app: HttpApp, sqs: Any,
                  queue: Queue, tmp_path: Path, change: Callable[[str], str], reason: Callable[[Path], str]) -> str:
    """A reload of the file as `change` edits it is refused with `reason`, and delivering goes on as before;
    returns the daemon's log."""
    config = write(tmp_path, http_app, [queue])
    proc = daemon(["-c", str(config)], env=aws_env)
    proc.wait_for_output("workerless started", timeout=30)
    config.write_text(change(config.read_text()))
    proc.send_signal(signal.SIGHUP)
    proc.wait_for_output("reload refused", timeout=10)
    (line,) = [line for line in proc.output().splitlines() if "reload refused" in line]
    assert line.endswith(reason(config))
    sqs.send_message(QueueUrl=queue.url, MessageBody="still working")
    assert http_app.wait_for_requests(1, timeout=20)[0].body == b"still working"
    assert http_app.requests[0].path == "/v1"
    assert proc.stop(timeout=20) == 0
    assert "Traceback" not in proc.output() and "reload applied" not in proc.output()
    return proc.output()


def test_an_invalid_file_is_one_line_and_the_running_configuration_stays(
    daemon: Callable[..., Daemon], aws_env: dict[str, str], http_app: HttpApp, sqs: Any,
    make_queue: Callable[..., Queue], tmp_path: Path,
) -> None:
    check_refused(daemon, aws_env, http_app, sqs, make_queue(), tmp_path,
                  lambda text: text.replace("concurrency = 2", "concurrency = 0"),
                  lambda config: f"{config}: concurrency: must be an integer from 1 to 10000 (got 0)")


def test_two_quick_sighups_apply_the_file_and_keep_delivering(
    daemon: Callable[..., Daemon], aws_env: dict[str, str], http_app: HttpApp, sqs: Any,
    make_queue: Callable[..., Queue], tmp_path: Path,
) -> None:
    first, added = make_queue(), make_queue()
    config = write(tmp_path, http_app, [first])
    proc = daemon(["-c", str(config)], env=aws_env)
    proc.wait_for_output("workerless started", timeout=30)
    write(tmp_path, http_app, [first, added], concurrency=3)  # a global change: every queue restarts
    proc.send_signal(signal.SIGHUP)
    proc.send_signal(signal.SIGHUP)
    proc.wait_for_output("reload applied", timeout=20)
    for queue in (first, added):
        sqs.send_message(QueueUrl=queue.url, MessageBody=queue.name)
    wait_until(lambda: {first.name, added.name} <= set(arrivals(http_app)), 20,
               message=lambda: f"got {list(arrivals(http_app))}; log:\n{proc.output()[-3000:]}")
    assert proc.alive()
    assert proc.stop(timeout=20) == 0
    assert "delivered=2 failed=0" in proc.output()
    assert "Traceback" not in proc.output() and "ERROR" not in proc.output()


def test_sigterm_while_a_reload_drains_stops_cleanly(
    daemon: Callable[..., Daemon], aws_env: dict[str, str], http_app: HttpApp, sqs: Any,
    make_queue: Callable[..., Queue], tmp_path: Path,
) -> None:
    queue = make_queue()
    holding = Holding()
    http_app.respond = holding
    config = write(tmp_path, http_app, [queue])
    proc = daemon(["-c", str(config)], env=aws_env)
    proc.wait_for_output("workerless started", timeout=30)
    sqs.send_message(QueueUrl=queue.url, MessageBody="slow")
    http_app.wait_for_requests(1, timeout=20)
    write(tmp_path, http_app, [queue], path="/v2")
    proc.send_signal(signal.SIGHUP)
    proc.wait_for_output("reload: draining", timeout=10)
    proc.send_signal(signal.SIGTERM)
    proc.wait_for_output("stopping (SIGTERM)", timeout=10)
    holding.release.set()
    assert proc.wait_exit(timeout=30) == 0
    assert count_messages(sqs, queue.url) == 0  # finished within the grace period, so deleted
    assert "delivered=1 failed=0" in proc.output()
    assert "reload applied" not in proc.output() and "Traceback" not in proc.output()


def test_a_removed_queue_is_no_longer_received_from_and_the_order_follows_the_file(
    daemon: Callable[..., Daemon], aws_env: dict[str, str], http_app: HttpApp, sqs: Any,
    make_queue: Callable[..., Queue], tmp_path: Path,
) -> None:
    kept, removed, moved = make_queue(), make_queue(), make_queue()
    status = {"status": {"listen": "127.0.0.1:0"}}
    config = write(tmp_path, http_app, [kept, removed, moved], tables=status)
    proc = daemon(["-c", str(config)], env=aws_env)
    url = status_url(proc, timeout=30)
    sqs.send_message(QueueUrl=removed.url, MessageBody="before")
    http_app.wait_for_requests(1, timeout=20)
    write(tmp_path, http_app, [moved, kept], tables=status)  # `removed` goes, `moved` comes first
    proc.send_signal(signal.SIGHUP)
    proc.wait_for_output("reload applied", timeout=20)  # after the removed queue's last long poll ended
    assert [queue["name"] for queue in json.loads(http_get(url + "/status")[2])["queues"]] == [moved.name, kept.name]
    sqs.send_message(QueueUrl=removed.url, MessageBody="after")
    for queue in (kept, moved):
        sqs.send_message(QueueUrl=queue.url, MessageBody=queue.name)
    wait_until(lambda: {kept.name, moved.name} <= set(arrivals(http_app)), 20,
               message=lambda: f"got {list(arrivals(http_app))}; log:\n{proc.output()[-3000:]}")
    assert proc.stop(timeout=20) == 0
    assert "after" not in arrivals(http_app)
    (left,) = sqs.receive_message(QueueUrl=removed.url, MessageSystemAttributeNames=["All"],
                                  WaitTimeSeconds=1)["Messages"]
    assert left["Body"] == "after" and left["Attributes"]["ApproximateReceiveCount"] == "1"  # nobody took it before
    assert "reload applied: removed=" in proc.output() and "queue order changed" in proc.output()


def test_turning_on_large_payloads_needs_a_restart_and_the_running_configuration_stays(
    daemon: Callable[..., Daemon], aws_env: dict[str, str], http_app: HttpApp, sqs: Any,
    make_queue: Callable[..., Queue], tmp_path: Path,
) -> None:
    queue = make_queue()
    check_refused(daemon, aws_env, http_app, sqs, queue, tmp_path,
                  lambda text: text.replace(f'name = "{queue.name}"', f'name = "{queue.name}"\nlarge_payloads = true'),
                  lambda config: f"queue {queue.name}: large_payloads needs a restart (the daemon started without an "
                                 "S3 client)")



def test_a_sighup_while_starting_is_held_and_the_file_read_again_once_running(
    daemon: Callable[..., Daemon], aws_env: dict[str, str], http_app: HttpApp, sqs: Any,
    make_queue: Callable[..., Queue], tmp_path: Path, chaos: ChaosProxy,
) -> None:
    queue = make_queue()
    config = write(tmp_path, http_app, [queue])
    chaos.set(share=1.0, kinds=("stall",), actions=("GetQueueUrl",), stall=(2.0, 2.0), times=1)
    proc = daemon(["-c", str(config)], env={**aws_env, "AWS_ENDPOINT_URL": chaos.url})
    wait_until(lambda: chaos.faults("GetQueueUrl") == 1, 20, message="the start-up never asked for the queue")
    write(tmp_path, http_app, [queue], path="/v2")
    proc.send_signal(signal.SIGHUP)  # while start-up waits for the queue's url (held 2 s)
    assert "workerless started" not in proc.output()
    proc.wait_for_output("SIGHUP while starting", timeout=30)
    proc.wait_for_output(f"reading {config} again", timeout=10)
    sqs.send_message(QueueUrl=queue.url, MessageBody="after")
    http_app.wait_for_requests(1, timeout=20)
    assert [request.path for request in http_app.requests] == ["/v2"]
    assert proc.alive()


def test_slots_that_would_wait_for_a_connection_are_warned_of_at_start_and_at_a_reload(
    daemon: Callable[..., Daemon], aws_env: dict[str, str], http_app: HttpApp, sqs: Any,
    make_queue: Callable[..., Queue], tmp_path: Path,
) -> None:
    queue = make_queue()

    def config(concurrency: int) -> Path:
        return build_config_file(tmp_path, concurrency=concurrency, shutdown_timeout=10, queues=[{"name": queue.name}],
                                 targets={"default": {"type": "http", "url": f"{http_app.url}/v1",
                                                      "max_connections": 2}})

    proc = daemon(["-c", str(config(3))], env=aws_env)
    proc.wait_for_output("workerless started", timeout=30)
    proc.wait_for_output("target default: max_connections = 2 is below the 3 deliveries that can reach it at once",
                         timeout=10)
    config(4)
    proc.send_signal(signal.SIGHUP)
    proc.wait_for_output("reload applied", timeout=20)
    assert "reload: target default: max_connections = 2 is below the 4 deliveries" in proc.output(), proc.output()
    sqs.send_message(QueueUrl=queue.url, MessageBody="after")  # the warning stops nothing
    wait_until(lambda: "after" in arrivals(http_app), 20, message=lambda: proc.output()[-3000:])
    assert proc.stop(timeout=20) == 0


KEY_HEADER = "x-workerless-idempotency-key"


def with_key(tmp_path: Path, app: HttpApp, queue: Queue, idempotency: dict[str, Any] | None,
             key: str | None = "body:order.id", name: str | None = None) -> Path:
    """The file of the idempotency reloads: `queue` with `key` (None: none), [idempotency] as given (None: not
    written, so the defaults apply while a queue has a key), the top-level `name` if given."""
    path = build_config_file(tmp_path, concurrency=2, shutdown_timeout=10, polling={"poll_for": 1},
                             queues=[{"name": queue.name, "idempotency_key": key}],
                             targets={"default": {"type": "http", "url": f"{app.url}/v1"}},
                             tables={"idempotency": idempotency} if idempotency is not None else None)
    if name is not None:  # build_config_file's own `name` is the file's
        path.write_text(f"name = {json.dumps(name)}\n" + path.read_text())
    return path


def order(order_id: str, note: str) -> str:
    return json.dumps({"order": {"id": order_id}, "note": note})


def notes(app: HttpApp) -> list[str]:
    return [json.loads(request.body)["note"] for request in list(app.requests)]


def key_states(moto_server: MotoServer, table: str, queue: Queue) -> dict[str, str]:
    """The queue's keys in `table` and their states (nothing while the table does not exist)."""
    try:
        found = moto_server.client("dynamodb").scan(TableName=table, ConsistentRead=True)["Items"]
    except botocore.exceptions.ClientError:
        return {}
    prefix = f"idempotency/{queue.name}/"
    return {item["slot"]["S"][len(prefix):]: item["state"]["S"] for item in found
            if item["slot"]["S"].startswith(prefix)}


@pytest.fixture
def next_table(moto_server: MotoServer, claims_table: str) -> Iterator[str]:
    """A second fresh table name, deleted afterwards if anything created it."""
    name = claims_table + "-next"
    yield name
    try:
        moto_server.client("dynamodb").delete_table(TableName=name)
    except botocore.exceptions.ClientError as error:
        assert error.response["Error"]["Code"] == "ResourceNotFoundException"


@pytest.mark.parametrize("name", [None, "reload-test"], ids=["wire", "botocore-session"])
def test_a_reload_that_adds_idempotency_claims_from_the_next_receive_in_a_table_it_makes(
    daemon: Callable[..., Daemon], aws_env: dict[str, str], http_app: HttpApp, sqs: Any,
    make_queue: Callable[..., Queue], moto_server: MotoServer, claims_table: str, tmp_path: Path, name: str | None,
) -> None:
    """No claim before the reload (nothing remembers A-0); A-1, first delivered after it, is remembered in the
    table the reload made, and its copy is deleted without reaching the app. With `name` (CloudWatch) the daemon
    runs on botocore's session, which builds the reload's DynamoDB client; without, on the wire alone."""
    queue = make_queue()
    proc = daemon(["-c", str(with_key(tmp_path, http_app, queue, None, key=None, name=name))], env=aws_env)
    proc.wait_for_output("workerless started", timeout=30)
    sqs.send_message(QueueUrl=queue.url, MessageBody=order("A-0", "before"))
    http_app.wait_for_requests(1, timeout=20)
    with_key(tmp_path, http_app, queue, {"table": claims_table, "expires_after": 600}, name=name)
    proc.send_signal(signal.SIGHUP)
    proc.wait_for_output("reload applied", timeout=20)
    sqs.send_message(QueueUrl=queue.url, MessageBody=order("A-1", "first"))
    wait_until(lambda: key_states(moto_server, claims_table, queue) == {"A-1": "completed"}, 30,
               message=lambda: f"items: {key_states(moto_server, claims_table, queue)}; log:\n{proc.output()[-3000:]}")
    sqs.send_message(QueueUrl=queue.url, MessageBody=order("A-1", "a copy"))
    proc.wait_for_output("already delivered: deleted as a duplicate", timeout=30)
    wait_until(lambda: count_messages(sqs, queue.url) == 0, 20, message="the copy was not deleted")
    assert proc.stop(timeout=20) == 0
    assert notes(http_app) == ["before", "first"]
    assert [request.headers.get(KEY_HEADER) for request in http_app.requests] == [None, "A-1"]
    assert "reload applied: restarted=" + queue.name + " [idempotency] changed" in proc.output()
    assert "only a restart" not in proc.output() and "Traceback" not in proc.output()


def test_a_reload_that_removes_the_key_stops_claiming_once_the_claimed_delivery_completed(
    daemon: Callable[..., Daemon], aws_env: dict[str, str], http_app: HttpApp, sqs: Any,
    make_queue: Callable[..., Queue], moto_server: MotoServer, claims_table: str, tmp_path: Path,
) -> None:
    """The key and [idempotency] go while S-1 is delivered under its claim: S-1 still completes in the table,
    then copies of it and new messages reach the app unclaimed."""
    queue = make_queue()
    slow = order("S-1", "slow")
    holding = Holding(slow.encode())
    http_app.respond = holding
    proc = daemon(["-c", str(with_key(tmp_path, http_app, queue, {"table": claims_table}))], env=aws_env)
    proc.wait_for_output("workerless started", timeout=30)
    sqs.send_message(QueueUrl=queue.url, MessageBody=slow)
    http_app.wait_for_requests(1, timeout=30)
    assert key_states(moto_server, claims_table, queue) == {"S-1": "in_progress"}
    with_key(tmp_path, http_app, queue, None, key=None)
    proc.send_signal(signal.SIGHUP)
    proc.wait_for_output("reload: draining", timeout=10)
    holding.release.set()
    proc.wait_for_output("reload applied", timeout=20)
    assert key_states(moto_server, claims_table, queue) == {"S-1": "completed"}  # written before the reload ended
    sqs.send_message(QueueUrl=queue.url, MessageBody=order("S-1", "a copy"))
    sqs.send_message(QueueUrl=queue.url, MessageBody=order("N-1", "new"))
    wait_until(lambda: len(http_app.requests) == 3 and count_messages(sqs, queue.url) == 0, 30,
               message=lambda: f"got {notes(http_app)}; log:\n{proc.output()[-3000:]}")
    assert proc.stop(timeout=20) == 0
    assert sorted(notes(http_app)[1:]) == ["a copy", "new"]
    assert all(KEY_HEADER not in request.headers for request in http_app.requests[1:])
    assert key_states(moto_server, claims_table, queue) == {"S-1": "completed"}  # nothing claimed since
    assert "reload applied: restarted=" + queue.name + " [idempotency] changed" in proc.output()
    assert "only a restart" not in proc.output() and "Traceback" not in proc.output()


def test_a_reload_that_changes_the_table_claims_in_the_new_one_and_finishes_claims_in_the_old(
    daemon: Callable[..., Daemon], aws_env: dict[str, str], http_app: HttpApp, sqs: Any,
    make_queue: Callable[..., Queue], moto_server: MotoServer, claims_table: str, next_table: str,
    tmp_path: Path,
) -> None:
    """S-1, claimed in the first table when the reload names another, completes there; the new table (made by
    the reload) has never seen S-1, so its next copy is delivered and remembered there, and the copy after that
    is deleted as a duplicate."""
    queue = make_queue()
    slow = order("S-1", "slow")
    holding = Holding(slow.encode())
    http_app.respond = holding
    proc = daemon(["-c", str(with_key(tmp_path, http_app, queue, {"table": claims_table}))], env=aws_env)
    proc.wait_for_output("workerless started", timeout=30)
    sqs.send_message(QueueUrl=queue.url, MessageBody=slow)
    http_app.wait_for_requests(1, timeout=30)
    with_key(tmp_path, http_app, queue, {"table": next_table})
    proc.send_signal(signal.SIGHUP)
    proc.wait_for_output("reload: draining", timeout=10)
    holding.release.set()
    proc.wait_for_output("reload applied", timeout=20)
    assert key_states(moto_server, claims_table, queue) == {"S-1": "completed"}
    sqs.send_message(QueueUrl=queue.url, MessageBody=order("S-1", "a copy"))
    wait_until(lambda: key_states(moto_server, next_table, queue) == {"S-1": "completed"}, 30,
               message=lambda: f"got {notes(http_app)}; log:\n{proc.output()[-3000:]}")
    sqs.send_message(QueueUrl=queue.url, MessageBody=order("S-1", "another copy"))
    proc.wait_for_output("already delivered: deleted as a duplicate", timeout=30)
    wait_until(lambda: count_messages(sqs, queue.url) == 0, 20, message="the last copy was not deleted")
    assert proc.stop(timeout=20) == 0
    assert notes(http_app) == ["slow", "a copy"]
    assert key_states(moto_server, claims_table, queue) == {"S-1": "completed"}
    assert "only a restart" not in proc.output() and "Traceback" not in proc.output()


def test_a_tracing_change_refuses_the_whole_reload_in_one_error_line(
    daemon: Callable[..., Daemon], aws_env: dict[str, str], http_app: HttpApp, sqs: Any,
    make_queue: Callable[..., Queue], tmp_path: Path,
) -> None:
    """[tracing] is built once, at start: the concurrency and the target's url changed in the same file are not
    applied either."""
    def change(text: str) -> str:
        edited = text.replace("concurrency = 2", "concurrency = 3").replace("/v1", "/v2")
        return edited + '[tracing]\nexporter = "otlp"\n'

    output = check_refused(daemon, aws_env, http_app, sqs, make_queue(), tmp_path, change,
                           lambda config: f"{config}: [tracing] changed, and only a restart applies it")
    (error,) = [line for line in output.splitlines() if " ERROR " in line]
    assert "reload refused, the running configuration stays" in error
    assert "concurrency=3" not in output  # not even its warning: nothing of the file was taken


def test_sigterm_while_a_reload_waits_for_a_queue_that_never_resolves_exits_within_its_deadline(
    daemon: Callable[..., Daemon], aws_env: dict[str, str], counting_proxy: CountingProxy, http_app: HttpApp,
    sqs: Any, make_queue: Callable[..., Queue], tmp_path: Path,
) -> None:
    """SIGHUP adds a queue whose GetQueueUrl is never answered; SIGTERM meanwhile abandons the reload (one line,
    the running configuration stays) and the stop keeps its one deadline: exit within shutdown_timeout + 1 s."""
    running, added = make_queue(), make_queue()
    path = build_config_file(tmp_path, concurrency=2, shutdown_timeout=STOP_SECONDS, polling={"poll_for": 1},
                             queues=[{"name": running.name}],
                             targets={"default": {"type": "http", "url": f"{http_app.url}/v1"}})
    proc = daemon(["-c", str(path)], env={**aws_env, "AWS_ENDPOINT_URL": counting_proxy.url})
    proc.wait_for_output("workerless started", timeout=30)
    unanswered = counting_proxy.hold(lambda action, params: action == "GetQueueUrl"
                                     and params.get("QueueName") == added.name)
    try:
        build_config_file(tmp_path, concurrency=2, shutdown_timeout=STOP_SECONDS, polling={"poll_for": 1},
                          queues=[{"name": running.name}, {"name": added.name}],
                          targets={"default": {"type": "http", "url": f"{http_app.url}/v1"}})
        proc.send_signal(signal.SIGHUP)
        wait_until(lambda: counting_proxy.pending("GetQueueUrl"), 20, message=proc.output)
        sqs.send_message(QueueUrl=running.url, MessageBody="during the reload")
        http_app.wait_for_requests(1, timeout=20)  # the running configuration keeps delivering meanwhile
        signalled = time.monotonic()
        proc.send_signal(signal.SIGTERM)
        assert proc.wait_exit(timeout=STOP_SECONDS + 1 + WALL_CLOCK_SLACK_SECONDS) == 0
        exited_after = time.monotonic() - signalled
    finally:
        unanswered.set()
    print(f"exit {exited_after:.2f}s after SIGTERM with shutdown_timeout = {STOP_SECONDS}")
    assert exited_after <= STOP_SECONDS + 1 + WALL_CLOCK_SLACK_SECONDS
    output = proc.output()
    assert output.count("stop requested during a reload: the reload is abandoned, the running configuration "
                        "stays") == 1, output
    assert "reload applied" not in output and "Traceback" not in output


def test_a_reload_off_a_failing_table_does_not_wait_for_its_completions(
    daemon: Callable[..., Daemon], sqs_env: dict[str, str], faulty_sqs: FaultySqs, http_app: HttpApp, sqs: Any,
    make_queue: Callable[..., Queue], moto_server: MotoServer, claims_table: str, next_table: str, tmp_path: Path,
) -> None:
    """S-1 succeeds while its table refuses every `completed` write (retried until its visibility ends, 60 s);
    a reload then names another table: it takes over at once, not once S-1's completion gives up, and the keyed
    queue claims in it meanwhile. S-1's write lands in its own table once that answers again, then S-1 is
    deleted."""
    queue = make_queue(VisibilityTimeout=60)

    def old_table_writes(action: str, params: dict[str, Any]) -> Reply | None:
        if action == "BatchWriteItem" and claims_table in params.get("RequestItems", {}):
            return dynamodb_error("InternalServerError", "Internal server error")
        return None

    faulty_sqs.fault = old_table_writes
    proc = daemon(["-c", str(with_key(tmp_path, http_app, queue, {"table": claims_table}))], env=sqs_env)
    proc.wait_for_output("workerless started", timeout=30)
    sqs.send_message(QueueUrl=queue.url, MessageBody=order("S-1", "first"))
    http_app.wait_for_requests(1, timeout=30)
    wait_until(lambda: faulty_sqs.faulted_count("BatchWriteItem") >= 1, 30, message=proc.output)
    with_key(tmp_path, http_app, queue, {"table": next_table})
    proc.send_signal(signal.SIGHUP)
    proc.wait_for_output("reload applied", timeout=20)
    sqs.send_message(QueueUrl=queue.url, MessageBody=order("N-1", "new"))
    wait_until(lambda: key_states(moto_server, next_table, queue) == {"N-1": "completed"}, 30,
               message=lambda: f"got {notes(http_app)}; log:\n{proc.output()[-3000:]}")
    faulty_sqs.fault = None
    wait_until(lambda: count_messages(sqs, queue.url) == 0, 40, message=proc.output)
    assert key_states(moto_server, claims_table, queue) == {"S-1": "completed"}
    assert proc.stop(timeout=20) == 0
    assert notes(http_app) == ["first", "new"]
    assert "Traceback" not in proc.output()
