"""Chaos through the real bin/workerless: AWS endpoints that fail a share of every call kind.

A `ChaosProxy` (tests/support/chaos.py) sits between the daemon and moto (AWS_ENDPOINT_URL) or the
Lambda stand-in (AWS_ENDPOINT_URL_LAMBDA) and answers a seeded share of the calls with throttles,
500/503s, connection resets before or after forwarding, and stalls. The tests send messages
straight to moto, let the daemon deliver them to a recording app on 127.0.0.1, and then check,
from moto and the app (never through the proxy), that nothing was lost, how many deliveries were
duplicated, and that the daemon neither hammered nor flooded the log while SQS was down.
"""

from __future__ import annotations

import random
import re
import signal
import time
from collections import Counter
from collections.abc import Callable, Iterator
from datetime import datetime
from pathlib import Path
from typing import Any

import gevent
import gevent.event
import pytest
from prometheus_client.parser import text_string_to_metric_families

from tests.e2e.helpers import http_get, send_batch
from tests.support.config_file import EVERY_MINUTE_CRON
from tests.support import (
    Daemon,
    FakeLambda,
    MotoServer,
    Queue,
    build_config_file,
    count_messages,
    receive_all,
    status_url,
    wait_until,
)
from tests.support.chaos import (
    KINDS,
    SQS_RUNTIME_ACTIONS,
    ChaosProxy,
    chaos_fixture,  # noqa: F401 (fixture)
    print_summary,
)
from tests.support.faults import FaultyApp, faulty_app_fixture, metric_total  # noqa: F401 (fixtures)
from tests.support.http_app import RecordedRequest, Reply
from workerless_gevent.delivery.watchers import MAX_BACKOFF_SECONDS

SEED = 20240607
LOG_LINE = re.compile(r"^(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3}) (\w+) (.*)$")


def depth(sqs: Any, queue: Queue) -> tuple[int, int]:
    """(ApproximateNumberOfMessages, ...NotVisible), read straight from moto."""
    attributes = sqs.get_queue_attributes(
        QueueUrl=queue.url, AttributeNames=["ApproximateNumberOfMessages", "ApproximateNumberOfMessagesNotVisible"],
    )["Attributes"]
    return int(attributes["ApproximateNumberOfMessages"]), int(attributes["ApproximateNumberOfMessagesNotVisible"])


def log_lines(proc: Daemon, since: float, until: float, needle: str = "") -> list[str]:
    """The daemon's log lines stamped within [since, until] (time.time()) that contain `needle`."""
    found = []
    for line in proc.output().splitlines():
        match = LOG_LINE.match(line)
        if not match:
            continue
        stamp = datetime.strptime(match.group(1), "%Y-%m-%d %H:%M:%S,%f").timestamp()
        if since <= stamp <= until and needle in line:
            found.append(line)
    return found


def warnings_and_errors(proc: Daemon) -> Counter[str]:
    """WARNING/ERROR lines by their text with numbers and ids blanked, to print what happened."""
    seen: Counter[str] = Counter()
    for line in proc.output().splitlines():
        match = LOG_LINE.match(line)
        if match and match.group(2) in ("WARNING", "ERROR", "CRITICAL"):
            seen[re.sub(r"\d+(\.\d+)?|message=\S+|queue=\S+", "#", match.group(3))[:160]] += 1
    return seen


# ---------------------------------------------------------------- (a) 2,000 messages, 20 % SQS faults


class Ledger:
    """The app's judge: a seeded share of bodies fail their first attempt (a visibility change
    follows), a smaller one their first two (dead-lettered, then delivered from the dead-letter
    queue). Decided per body, so the outcome does not depend on arrival order."""

    def __init__(self, seed: int, fail_once: float, fail_twice: float) -> None:
        self.seed = seed
        self.fail_once = fail_once
        self.fail_twice = fail_twice
        self.attempts: Counter[bytes] = Counter()

    def failures_planned(self, body: bytes) -> int:
        draw = random.Random(f"{self.seed}:{body!r}").random()
        return 2 if draw < self.fail_twice else 1 if draw < self.fail_twice + self.fail_once else 0

    def respond(self, request: RecordedRequest) -> Reply:
        self.attempts[request.body] += 1
        if self.attempts[request.body] <= self.failures_planned(request.body):
            return 500, {}, b"planned failure"
        return 200, {}, b""


def feed(sqs: Any, queue: Queue, bodies: list[str], app: FaultyApp, outstanding: int) -> None:
    """Send `bodies` straight to moto in batches of 10, keeping at most `outstanding` not yet
    answered 2xx: moto's SQS costs O(queue depth) per call, so a deep queue would slow it to a crawl."""
    for first in range(0, len(bodies), 10):
        wait_until(lambda: first - len(set(app.succeeded_bodies())) < outstanding, 120, interval=0.05,
                   message=lambda: f"the daemon stopped making progress at {len(set(app.succeeded_bodies()))}")
        send_batch(sqs, queue.url, bodies[first:first + 10])


@pytest.mark.slow
def test_2000_messages_through_20_percent_sqs_faults_lose_nothing(
    daemon: Callable[..., Daemon], tmp_path: Path, aws_env: dict[str, str], chaos: ChaosProxy,
    faulty_app: FaultyApp, sqs: Any, make_queue: Callable[..., Queue],
) -> None:
    total = 2000
    main = make_queue(VisibilityTimeout=30)
    dead_letters = make_queue(VisibilityTimeout=30)
    ledger = Ledger(SEED, fail_once=0.08, fail_twice=0.02)
    faulty_app.respond = ledger.respond
    env = {**aws_env, "AWS_ENDPOINT_URL": chaos.url}
    target = {"default": {"type": "http", "url": f"{faulty_app.url}/work"}}
    main_config = build_config_file(
        tmp_path, name="main.toml", concurrency=20, shutdown_timeout=10, polling={"poll_for": 2},
        queues=[{"name": main.name, "visibility_timeout": 30, "error_visibility_timeout": 1, "max_retries": 2,
                 "dead_letter_queue": dead_letters.name}],
        targets=target, tables={"status": {"listen": "127.0.0.1:0"}})
    dlq_config = build_config_file(
        tmp_path, name="dlq.toml", concurrency=4, shutdown_timeout=10, polling={"poll_for": 2},
        queues=[{"name": dead_letters.name, "visibility_timeout": 30, "error_visibility_timeout": 1}],
        targets=target, tables={"status": {"listen": "127.0.0.1:0"}})
    # Start-up calls (GetQueueUrl, GetQueueAttributes) go through clean; every call a running daemon
    # makes gets 20 % faults of every kind, stalls of 1-2 s.
    chaos.set(share=0.2, kinds=KINDS, actions=SQS_RUNTIME_ACTIONS, stall=(1.0, 2.0))
    proc = daemon(["-c", str(main_config)], env=env)
    dlq_proc = daemon(["-c", str(dlq_config), "--log-level=DEBUG"], env=env)  # its log explains a failure
    url, dlq_url = status_url(proc, timeout=60), status_url(dlq_proc, timeout=60)
    proc.wait_for_output("workerless started", timeout=60)
    dlq_proc.wait_for_output("workerless started", timeout=60)

    bodies = [f"chaos-{n:04d}" for n in range(total)]
    started = time.monotonic()
    feeder = gevent.spawn(feed, sqs, main, bodies, faulty_app, 100)
    expected = {body.encode() for body in bodies}
    wait_until(lambda: feeder.dead and expected <= set(faulty_app.succeeded_bodies()), 240, interval=0.2,
               message=lambda: f"{sorted(expected - set(faulty_app.succeeded_bodies()))[:10]} never answered 2xx; "
                               f"feeder {feeder.exception!r}; main {depth(sqs, main)}, dead letters "
                               f"{depth(sqs, dead_letters)}; main log:\n{proc.output()[-3000:]}\n"
                               f"dead-letter daemon log:\n{dlq_proc.output()[-6000:]}")
    feeder.get()
    delivered_after = time.monotonic() - started
    # Deletes still being retried must land, and anything whose delete was given up comes back after
    # its 30 s visibility timeout, is delivered again (a duplicate) and deleted then.
    wait_until(lambda: depth(sqs, main) == (0, 0) and depth(sqs, dead_letters) == (0, 0), 60, interval=0.5,
               message=lambda: f"main {depth(sqs, main)}, dead letters {depth(sqs, dead_letters)} left; "
                               f"log:\n{proc.output()[-3000:]}")
    emptied_after = time.monotonic() - started
    metrics = {name: metric_total(url, name) + metric_total(dlq_url, name) for name in (
        "workerless_succeeded_total", "workerless_failed_total", "workerless_dead_lettered_total",
        "workerless_sqs_requests_total", "workerless_stale_receipts_total", "workerless_delete_failed_total",
        "workerless_visibility_failed_total", "workerless_internal_errors_total")}
    assert proc.alive() and dlq_proc.alive()
    proc.send_signal(signal.SIGTERM)
    dlq_proc.send_signal(signal.SIGTERM)
    assert proc.wait_exit(30) == 0
    assert dlq_proc.wait_exit(30) == 0

    succeeded = Counter(faulty_app.succeeded_bodies())
    lost = expected - set(succeeded)
    duplicates = {body: n for body, n in succeeded.items() if n > 1}
    planned = Counter(ledger.failures_planned(body) for body in expected)
    print(f"\n{total} messages: all answered 2xx after {delivered_after:.1f}s, queues empty after "
          f"{emptied_after:.1f}s; planned app failures {dict(planned)}; deliveries {len(faulty_app.requests)}")
    print(f"lost {len(lost)}, duplicates {len(duplicates)} bodies ({sum(duplicates.values()) - len(duplicates)} "
          f"extra 2xx deliveries): {sorted(duplicates.items())[:20]}")
    for body in sorted(duplicates)[:10]:  # each delivery of a duplicated body: when, from where, how
        print(f"  {body.decode()}:", [(round(arrived - started, 1), request.headers.get("x-aws-sqsd-queue"),
                                       request.headers.get("x-aws-sqsd-receive-count"), status)
                                      for request, status, arrived in list(faulty_app.answered)
                                      if request.body == body])
    print_summary("proxy", chaos)
    print(f"daemon metrics: {metrics}")
    for name, each in (("main", proc), ("dead letters", dlq_proc)):
        print(f"{name} daemon warnings/errors: {dict(warnings_and_errors(each).most_common(12))}")
    assert not lost, sorted(lost)[:20]
    assert depth(sqs, main) == (0, 0) and depth(sqs, dead_letters) == (0, 0)
    assert set(succeeded) == expected  # nothing the test did not send
    # every call kind really was faulted, with every kind of fault
    for action in ("ReceiveMessage", "DeleteMessageBatch", "ChangeMessageVisibilityBatch", "SendMessage"):
        assert chaos.faults(action) > 0, (action, chaos.summary())
    for kind in KINDS:
        assert chaos.faults(kind=kind) > 0, (kind, chaos.summary())
    # Duplicates. The daemon retries a failed delete until it lands (moto takes a second delete of a
    # handle it already deleted), so a delivery is repeated only when
    # - a SendMessage to the dead-letter queue took effect but its answer was reset (`reset_after`):
    #   botocore sends it again, so the dead-letter queue holds two copies, each delivered once;
    # - a delete was given up after its retries (workerless_delete_failed_total): the message comes
    #   back after its 30 s visibility timeout and is delivered again;
    # - a visibility extension (heartbeat) was given up (workerless_visibility_failed_total), so a
    #   message still held could expire and be received again.
    # Nothing else may duplicate: a reset ReceiveMessage only hides its messages for 30 s, a failed
    # retry-delay change only delays a retry, and deliveries take milliseconds, far below the timeout.
    # Those sources are rare (about 60 sends get ~1.7 `reset_after` at 20 % x 1/7; a settlement is
    # given up only after every retry until its deadline failed): runs so far had 1-5 duplicates
    # (0.05-0.25 %), so the total must also stay under 1 % of the messages.
    extra = sum(duplicates.values()) - len(duplicates)
    explained = (chaos.faults("SendMessage", "reset_after") + int(metrics["workerless_delete_failed_total"])
                 + int(metrics["workerless_visibility_failed_total"]))
    print(f"duplicates: {len(duplicates)} messages, {extra} extra deliveries, {explained} explained by the sources "
          f"above; unexplained: {max(0, extra - explained)}")
    assert len(duplicates) <= DUPLICATE_SHARE * total, (len(duplicates), sorted(duplicates)[:20])


DUPLICATE_SHARE = 0.01


# ---------------------------------------------------------------- (b) a 30 s outage of SQS, idle


OUTAGE_SECONDS = 30.0
MAX_REQUESTS_PER_SECOND_PER_QUEUE = 2.0
MAX_LOG_LINES_PER_QUEUE = 5  # during the outage, at INFO: a warning when it starts, not one per retry
# From heal() and the send to the message answered 2xx: a receive back-off under way ends within
# MAX_BACKOFF_SECONDS, then one receive (and the wire's retries of it while the budget lasts) and the POST.
RECOVERY_SECONDS = MAX_BACKOFF_SECONDS + 5.0


def metric_by_queue(url: str, name: str) -> dict[str, float]:
    """Sample `name` of the daemon's /metrics page by its queue label."""
    status, _, text = http_get(f"{url}/metrics")
    assert status == 200, status
    return {sample.labels.get("queue", ""): sample.value
            for family in text_string_to_metric_families(text) for sample in family.samples if sample.name == name}


def hold(seconds: float, check: Callable[[], None]) -> None:
    """Keep the current state for `seconds` (the scenario's length), checking `check()` all along."""
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        check()
        gevent.sleep(min(0.5, max(0.0, end - time.monotonic())))


@pytest.mark.slow
@pytest.mark.parametrize("refuse", [False, True], ids=["every-request-500", "connections-refused"])
def test_a_30s_sqs_outage_on_an_idle_daemon_is_neither_hammered_nor_flooded_and_heals_alone(
    refuse: bool, daemon: Callable[..., Daemon], tmp_path: Path, aws_env: dict[str, str], chaos: ChaosProxy,
    faulty_app: FaultyApp, sqs: Any, make_queue: Callable[..., Queue],
) -> None:
    queues = [make_queue(), make_queue()]
    config = build_config_file(
        tmp_path, concurrency=10, shutdown_timeout=5, polling={"poll_for": 5},
        queues=[{"name": queue.name, "error_visibility_timeout": 1} for queue in queues],
        targets={"default": {"type": "http", "url": f"{faulty_app.url}/work"}},
        tables={"status": {"listen": "127.0.0.1:0"}})
    proc = daemon(["-c", str(config), "--log-level=INFO"], env={**aws_env, "AWS_ENDPOINT_URL": chaos.url})
    url = status_url(proc, timeout=60)
    for queue in queues:  # it works before the outage, and then both queues are idle, long-polling
        sqs.send_message(QueueUrl=queue.url, MessageBody=f"before {queue.name}")
    wait_until(lambda: len(faulty_app.succeeded_bodies()) == 2, 30, message=lambda: proc.output()[-3000:])
    wait_until(lambda: all(count_messages(sqs, queue.url) == 0 for queue in queues), 15, message="not deleted")
    wait_until(lambda: not any(r.action != "ReceiveMessage" for r in chaos.pending()), 10, message="batches pending")

    before = metric_by_queue(url, "workerless_sqs_requests_total")
    went_down, went_down_at = time.monotonic(), time.time()
    chaos.outage(refuse=refuse)

    def alive() -> None:
        assert proc.alive(), proc.output()[-3000:]

    hold(OUTAGE_SECONDS, alive)
    during = metric_by_queue(url, "workerless_sqs_requests_total")
    came_back, came_back_at = time.monotonic(), time.time()
    chaos.heal()
    sent_at = time.monotonic()
    for queue in queues:
        sqs.send_message(QueueUrl=queue.url, MessageBody=f"after {queue.name}")
    after = {f"after {queue.name}".encode() for queue in queues}
    recovered = wait_until(lambda: after <= set(faulty_app.succeeded_bodies()) and time.monotonic(), 60, interval=0.05,
                           message=lambda: f"not delivered after healing:\n{proc.output()[-3000:]}")
    seconds_to_recover = recovered - sent_at

    seen = chaos.by_queue(went_down, came_back)
    counted = {queue.name: during.get(queue.name, 0) - before.get(queue.name, 0) for queue in queues}
    lines = {queue.name: log_lines(proc, went_down_at, came_back_at, queue.name) for queue in queues}
    every_line = log_lines(proc, went_down_at, came_back_at)
    print(f"\noutage ({'refused' if refuse else '500'}) {came_back - went_down:.1f}s: requests the proxy saw "
          f"{dict(seen)}, receives the daemon counted {counted}; {len(every_line)} log lines, per queue "
          f"{ {name: len(found) for name, found in lines.items()} }; recovered {seconds_to_recover:.1f}s after healing")
    for line in every_line[:20]:
        print("  |", line[:300])
    for queue in queues:  # when each receive reached the proxy, in seconds from the outage's start
        print(f"  {queue.name} requests at", [round(r.started - went_down, 1) for r in list(chaos.requests)
                                              if r.queue == queue.name and r.started >= went_down],
              f"(healed at {came_back - went_down:.1f})")
    assert proc.alive()
    assert proc.stop(timeout=30) == 0
    limit = MAX_REQUESTS_PER_SECOND_PER_QUEUE * (came_back - went_down)
    for queue in queues:
        # What reached SQS (the proxy), and what the daemon says it tried (the only count when the
        # port is closed: a refused connection reaches no process).
        assert seen[queue.name] <= limit, (queue.name, seen, limit)
        assert counted[queue.name] <= limit, (queue.name, counted, limit)
        assert counted[queue.name] >= 1, counted  # it did keep trying
        assert len(lines[queue.name]) <= MAX_LOG_LINES_PER_QUEUE, lines[queue.name]
    if refuse:
        assert sum(seen.values()) == 0, seen  # nothing got through a closed port
    else:
        assert all(seen[queue.name] >= 1 for queue in queues), seen
    assert seconds_to_recover <= RECOVERY_SECONDS, (
        f"delivered {seconds_to_recover:.1f}s after healing; log:\n{proc.output()[-3000:]}")
    assert sorted(faulty_app.succeeded_bodies()) == sorted(
        [f"before {q.name}".encode() for q in queues] + list(after))


@pytest.mark.slow
def test_a_30s_sqs_outage_with_deletes_waiting_is_neither_hammered_nor_flooded_and_loses_nothing(
    daemon: Callable[..., Daemon], tmp_path: Path, aws_env: dict[str, str], chaos: ChaosProxy,
    faulty_app: FaultyApp, sqs: Any, make_queue: Callable[..., Queue],
) -> None:
    """The outage begins while the app holds ten deliveries; it answers them 200 at once, so every queue has
    deletes waiting for SQS through the outage, until their messages are visible again (20 s) and they are
    given up. Afterwards each of those is delivered again and deleted: nothing lost."""
    queues = [make_queue(), make_queue()]
    config = build_config_file(
        tmp_path, concurrency=10, shutdown_timeout=5, polling={"poll_for": 5},
        queues=[{"name": queue.name, "visibility_timeout": 20} for queue in queues],
        targets={"default": {"type": "http", "url": f"{faulty_app.url}/work"}},
        tables={"status": {"listen": "127.0.0.1:0"}})
    release = gevent.event.Event()

    def respond(request: RecordedRequest) -> Reply:
        release.wait(60)
        return 200, {}, b""

    faulty_app.respond = respond
    proc = daemon(["-c", str(config), "--log-level=INFO"], env={**aws_env, "AWS_ENDPOINT_URL": chaos.url})
    url = status_url(proc, timeout=60)
    bodies = {f"{queue.name} {i}".encode() for queue in queues for i in range(5)}
    for body in sorted(bodies):
        sqs.send_message(QueueUrl=next(q.url for q in queues if body.startswith(q.name.encode())), MessageBody=body.decode())
    wait_until(lambda: faulty_app.in_flight == 10, 30, message=lambda: proc.output()[-3000:])

    went_down, went_down_at = time.monotonic(), time.time()
    chaos.outage()
    release.set()  # ten 200s, and their deletes meet the outage

    def alive() -> None:
        assert proc.alive(), proc.output()[-3000:]

    hold(OUTAGE_SECONDS, alive)
    came_back, came_back_at = time.monotonic(), time.time()
    chaos.heal()
    wait_until(lambda: all(count_messages(sqs, queue.url) == 0 for queue in queues), 60, interval=0.2,
               message=lambda: f"not drained after healing:\n{proc.output()[-3000:]}")

    seen = chaos.by_queue(went_down, came_back)
    lines = {queue.name: log_lines(proc, went_down_at, came_back_at, queue.name) for queue in queues}
    given_up = metric_by_queue(url, "workerless_delete_failed_total")
    print(f"\nbusy outage {came_back - went_down:.1f}s: requests the proxy saw {dict(seen)}; log lines per queue "
          f"{ {name: len(found) for name, found in lines.items()} }; deletes given up {given_up}")
    for found in lines.values():
        for line in found:
            print("  |", line[:300])
    assert proc.stop(timeout=30) == 0
    limit = MAX_REQUESTS_PER_SECOND_PER_QUEUE * (came_back - went_down)
    for queue in queues:
        assert seen[queue.name] <= limit, (queue.name, seen, limit)
        assert len(lines[queue.name]) <= MAX_LOG_LINES_PER_QUEUE, lines[queue.name]
        assert given_up.get(queue.name) == 5, given_up  # each delete given up at its message's deadline, counted
        assert any("gave up on delete of 5 messages" in line for line in lines[queue.name]), lines[queue.name]
    # Each was answered 200 before the outage, its delete given up, and answered 200 again after it.
    answered = Counter(faulty_app.succeeded_bodies())
    assert set(answered) == bodies and min(answered.values()) >= 2, answered


# ---------------------------------------------------------------- (c) Lambda, CloudWatch and DynamoDB faults


DYNAMODB_ACTIONS = ("DescribeTable", "CreateTable", "DescribeTimeToLive", "UpdateTimeToLive", "PutItem")
LAMBDA_KINDS = ("throttle", "error", "reset", "reset_after")


@pytest.fixture
def lambda_chaos(fake_lambda: FakeLambda) -> Iterator[ChaosProxy]:
    """A ChaosProxy in front of the Lambda stand-in (aim AWS_ENDPOINT_URL_LAMBDA at it)."""
    proxy = ChaosProxy(fake_lambda.url, seed=SEED + 1)
    proxy.up()
    yield proxy
    proxy.stop()


def invoked_bodies(proxy: ChaosProxy) -> Counter[str]:
    """Bodies of the Invoke calls whose success reached the daemon (answered 200, not reset)."""
    found: Counter[str] = Counter()
    for request in list(proxy.requests):
        if request.action == "Invoke" and request.status == 200 and request.fault in (None, "stall"):
            found.update(record["body"] for record in (request.params.get("Payload") or {}).get("Records", []))
    return found


def cron_slots(app: FaultyApp) -> set[str]:
    """The `task@time` slots the app answered 2xx."""
    return {f"{request.headers['x-aws-sqsd-taskname']}@{request.headers['x-aws-sqsd-scheduled-at']}"
            for request, status, _ in list(app.answered) if 200 <= status < 300
            and "x-aws-sqsd-taskname" in request.headers}


def claimed_slots(moto_server: MotoServer, table: str) -> set[str]:
    """Slots claimed in the claims table, read straight from moto."""
    try:
        items = moto_server.client("dynamodb").scan(TableName=table)["Items"]
    except Exception as error:  # noqa: BLE001 - not created yet
        if "ResourceNotFoundException" in str(error):
            return set()
        raise
    return {item["slot"]["S"] for item in items}


def periodic_tables(tmp_path: Path, queue: Queue, claims_table: str) -> dict[str, dict[str, Any]]:
    (tmp_path / "cron.yaml").write_text(EVERY_MINUTE_CRON)
    return {"periodic": {"file": "cron.yaml", "queue": queue.name, "claims_table": claims_table}}


@pytest.mark.slow
def test_lambda_cloudwatch_and_dynamodb_faults_lose_nothing_and_the_daemon_stays_healthy(
    daemon: Callable[..., Daemon], tmp_path: Path, aws_env: dict[str, str], chaos: ChaosProxy,
    lambda_chaos: ChaosProxy, faulty_app: FaultyApp, fake_lambda: FakeLambda, sqs: Any,
    make_queue: Callable[..., Queue], claims_table: str, moto_server: MotoServer,
) -> None:
    total = 1000
    work, cron = make_queue(VisibilityTimeout=30), make_queue(VisibilityTimeout=30)
    name = f"chaos{SEED}"
    config = build_config_file(
        tmp_path, concurrency=8, shutdown_timeout=10, polling={"poll_for": 2},
        queues=[{"name": work.name, "target": "fn", "visibility_timeout": 30, "error_visibility_timeout": 1},
                {"name": cron.name, "target": "app", "visibility_timeout": 30, "error_visibility_timeout": 1}],
        targets={"fn": {"type": "lambda", "function": "fn-fake", "batch_size": 10, "timeout": 30},
                 "app": {"type": "http", "url": f"{faulty_app.url}/"}},
        tables={"metrics": {"interval": 1}, "status": {"listen": "127.0.0.1:0"},
                **periodic_tables(tmp_path, cron, claims_table)})
    config.write_text(f"name = \"{name}\"\n" + config.read_text())  # `name` is build_config_file's file name
    # SQS stays clean here; every other call kind fails 20 % of the time (30 % for DynamoDB, whose
    # few calls would otherwise often all go through), in every way.
    chaos.set(share=0.2, kinds=("throttle", "error", "reset", "reset_after", "stall"), actions=("PutMetricData",),
              stall=(0.5, 1.5))
    chaos.set(share=0.3, kinds=("throttle", "error", "reset", "reset_after", "stall"), actions=DYNAMODB_ACTIONS,
              stall=(0.5, 1.5))
    # 1,000 messages in batches of 10 make at least 100 Invoke calls; with this seed every kind of
    # fault has come up by the 63rd (the proxy draws per action, whatever the interleaving).
    lambda_chaos.set(share=0.2, kinds=LAMBDA_KINDS, actions=("Invoke",))
    env = {**aws_env, "AWS_ENDPOINT_URL": chaos.url, "AWS_ENDPOINT_URL_LAMBDA": lambda_chaos.url}
    proc = daemon(["-c", str(config)], env=env)
    url = status_url(proc, timeout=60)
    proc.wait_for_output("workerless started", timeout=60)
    bodies = [f"fn-{n:04d}" for n in range(total)]
    for first in range(0, total, 100):
        send_batch(sqs, work.url, bodies[first:first + 100])

    seen_when_done: dict[str, set[str]] = {}

    def done() -> bool:
        claimed = seen_when_done["claimed"] = claimed_slots(moto_server, claims_table)
        return (set(bodies) <= set(invoked_bodies(lambda_chaos)) and bool(claimed) and claimed <= cron_slots(faulty_app)
                and chaos.faults("PutMetricData") >= 2 and count_messages(sqs, work.url) == 0
                and count_messages(sqs, cron.url) == 0)

    wait_until(done, 120, interval=0.5, message=lambda: (
        f"missing bodies {len(set(bodies) - set(invoked_bodies(lambda_chaos)))}, claimed "
        f"{claimed_slots(moto_server, claims_table)}, cron delivered {cron_slots(faulty_app)}, "
        f"proxy {chaos.summary()}; log:\n{proc.output()[-4000:]}"))
    claimed_when_done = seen_when_done["claimed"]  # the set done() saw, not a second read a slot may follow
    status, _, text = http_get(f"{url}/healthz")
    invoked = invoked_bodies(lambda_chaos)
    put_metrics = [r for r in list(chaos.requests) if r.action == "PutMetricData"]
    first_fault = min(r.started for r in put_metrics if r.fault)
    recovered_flushes = [r for r in put_metrics if r.started > first_fault and r.status == 200 and r.fault is None]
    # Filtered by namespace: moto is shared by the session, and an unfiltered listing is one page of 500.
    ours = moto_server.client("cloudwatch").list_metrics(Namespace=f"Workerless-{name}")["Metrics"]
    print(f"\n{total} messages through Invoke: {sum(invoked.values())} successful records "
          f"({sum(1 for n in invoked.values() if n > 1)} bodies invoked twice), {len(fake_lambda.invocations)} "
          f"invocations reached the function; cron slots delivered {sorted(cron_slots(faulty_app))}")
    print_summary("moto proxy", chaos)
    print_summary("lambda proxy", lambda_chaos)
    print(f"warnings/errors: {dict(warnings_and_errors(proc).most_common(12))}")
    assert (status, text) == (200, "ok\n")
    assert proc.alive()
    assert proc.stop(timeout=30) == 0
    assert set(invoked) == set(bodies)
    assert count_messages(sqs, work.url) == 0
    # A minute may turn between the drain and the stop: its slot is claimed and sent, and the stop releases it.
    left = {f"{m['MessageAttributes']['beanstalk.sqsd.task_name']['StringValue']}@"
            f"{m['MessageAttributes']['beanstalk.sqsd.scheduled_time']['StringValue']}"
            for m in receive_all(sqs, cron.url, VisibilityTimeout=60)}
    claimed = claimed_slots(moto_server, claims_table)
    assert left <= claimed - claimed_when_done, (left, claimed, claimed_when_done)  # nothing older left behind
    for kind in LAMBDA_KINDS:
        assert lambda_chaos.faults("Invoke", kind) >= 1, lambda_chaos.summary()
    assert recovered_flushes, "no PutMetricData went through after the first failed one"
    assert ours, f"no metric in the namespace Workerless-{name}"
    assert sum(chaos.faults(action) for action in DYNAMODB_ACTIONS) >= 1, chaos.summary()
    # every slot claimed in DynamoDB was sent and delivered (or, claimed after the drain, is still on its queue):
    # a claim without a send is a lost slot
    assert claimed <= cron_slots(faulty_app) | left, (claimed, cron_slots(faulty_app), left)


def test_a_claim_that_took_effect_but_whose_answer_was_lost_still_sends_the_slot(
    daemon: Callable[..., Daemon], tmp_path: Path, aws_env: dict[str, str], chaos: ChaosProxy,
    faulty_app: FaultyApp, make_queue: Callable[..., Queue], claims_table: str, moto_server: MotoServer,
) -> None:
    """The nasty case on DynamoDB: PutItem writes the claim, the answer is reset, botocore retries,
    and the retry's ConditionalCheckFailedException must not be read as another instance's claim."""
    cron = make_queue()
    config = build_config_file(
        tmp_path, concurrency=2, shutdown_timeout=5, queues=[{"name": cron.name}],
        targets={"default": {"type": "http", "url": f"{faulty_app.url}/"}},
        tables=periodic_tables(tmp_path, cron, claims_table))
    chaos.set(share=1.0, kinds=("reset_after",), actions=("PutItem",), times=1)
    proc = daemon(["-c", str(config)], env={**aws_env, "AWS_ENDPOINT_URL": chaos.url})
    claimed = wait_until(lambda: claimed_slots(moto_server, claims_table), 30,
                         message=lambda: f"nothing claimed:\n{proc.output()[-3000:]}")
    assert chaos.faults("PutItem", "reset_after") == 1
    wait_until(lambda: claimed <= cron_slots(faulty_app), 20,
               message=lambda: f"claimed {claimed} but delivered {cron_slots(faulty_app)}; PutItem calls "
                               f"{chaos.seen['PutItem']}; log:\n{proc.output()[-3000:]}")
    assert proc.stop(timeout=20) == 0
