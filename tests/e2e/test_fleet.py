"""A fleet of real daemons on the same three queues loses nothing while it shrinks, crashes and grows.

Three daemons share 3,000 messages; mid-run one is SIGKILLed, one SIGTERMed and a fourth started.
Each daemon posts to its own app (its own port), so every delivery is known by who made it. At the
end: every message was delivered and deleted (the queues are empty, and the daemon deletes only
after a 2xx), none is lost, and a message delivered twice is one the killed daemon was delivering
when it died, or had delivered so shortly before that its delete may not have gone out. Periodic
tasks, claimed in a DynamoDB table the fleet shares, are sent once per slot."""

from __future__ import annotations

import re
import signal
import time
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import gevent
import pytest

from tests.e2e.helpers import send_batch
from tests.support import (Daemon, HttpApp, MotoServer, Queue, RecordedRequest, build_config_file, count_messages,
                           receive_all, wait_until)
from tests.support.config_file import EVERY_MINUTE_CRON
from tests.support.http_app import Reply

MESSAGES = 3000
CONCURRENCY = 8
# moto's SQS slows down with the depth of a queue (a receive takes ~0.8 s at 1,000 messages deep), so
# the messages are fed as they are taken, at most this many not yet delivered per queue.
MAX_WAITING = 60
HOLD_SECONDS = 0.05  # each delivery takes this long, so a daemon always has some in flight
VISIBILITY_SECONDS = 10  # what the killed daemon held comes back this long after its last heartbeat
# A delivery the killed daemon finished this shortly before the SIGKILL may still have had its delete
# in a batch (50 ms) or on the wire to moto, busy with four daemons on a loaded machine: SQS delivers it
# again, as it should. Well under the visibility timeout: a daemon that held deletes back would fail.
DELETE_WINDOW_SECONDS = 1.5
SLOT = re.compile(r"periodic task=tick slot=(\S+) sent to queue=")


@pytest.fixture
def apps() -> Iterator[list[HttpApp]]:
    """One app per daemon, each on its own port: a delivery's port says which daemon made it."""
    made = [HttpApp() for _ in range(4)]
    for app in made:
        app.delay = HOLD_SECONDS
        app.start()
    yield made
    for app in made:
        app.stop()


def fleet_config(tmp_path: Path, index: int, app: HttpApp, queues: list[Queue], claims_table: str) -> Path:
    if not (tmp_path / "cron.yaml").exists():
        (tmp_path / "cron.yaml").write_text(EVERY_MINUTE_CRON)
    return build_config_file(
        tmp_path, name=f"daemon-{index}.toml", concurrency=CONCURRENCY, shutdown_timeout=15,
        queues=[{"name": queue.name, "visibility_timeout": VISIBILITY_SECONDS} for queue in queues],
        targets={"default": {"type": "http", "url": f"{app.url}/"}},
        tables={"periodic": {"file": "cron.yaml", "queue": queues[0].name, "claims_table": claims_table}})


def feed(sqs: Any, queue: Queue, bodies: list[str], delivered: set[str]) -> None:
    """Send `bodies` in batches of 10, keeping at most MAX_WAITING of them sent and not yet delivered."""
    oldest = 0  # the first body sent and not delivered yet

    def waiting(sent: int) -> int:
        nonlocal oldest
        while oldest < sent and bodies[oldest] in delivered:
            oldest += 1
        return sum(1 for body in bodies[oldest:sent] if body not in delivered)

    for start in range(0, len(bodies), 10):
        wait_until(lambda: waiting(start) < MAX_WAITING, 60, interval=0.02, message=f"{queue.name}: stalled")
        send_batch(sqs, queue.url, bodies[start:start + 10])


def work_bodies(app: HttpApp) -> list[str]:
    return [r.body.decode() for r in list(app.requests) if "x-aws-sqsd-taskname" not in r.headers]


@pytest.mark.timeout(240)
def test_a_fleet_that_crashes_shrinks_and_grows_loses_nothing(
    daemon: Callable[..., Daemon], aws_env: dict[str, str], apps: list[HttpApp], sqs: Any,
    make_queue: Callable[..., Queue], claims_table: str, moto_server: MotoServer, tmp_path: Path,
) -> None:
    queues = [make_queue() for _ in range(3)]
    bodies = [f"fleet-{n:04d}" for n in range(MESSAGES)]
    delivered: set[str] = set()

    def record(request: RecordedRequest) -> Reply:
        if "x-aws-sqsd-taskname" not in request.headers:
            delivered.add(request.body.decode())
        return 200, {}, b""

    for app in apps:
        app.respond = record
    configs = [fleet_config(tmp_path, index, app, queues, claims_table) for index, app in enumerate(apps)]
    killed, stopped, survivor = (daemon(["-c", str(configs[index])], env=aws_env) for index in range(3))
    killed_app = apps[0]
    began = time.monotonic()
    feeders = [gevent.spawn(feed, sqs, queue, bodies[index::3], delivered) for index, queue in enumerate(queues)]

    wait_until(lambda: len(delivered) >= MESSAGES // 3 and killed_app.in_flight > 0, 60, interval=0.005,
               message=lambda: f"{len(delivered)} delivered; in flight at the first daemon: {killed_app.in_flight}")
    killed.process.kill()
    killed_at = time.monotonic()
    in_flight_at_kill = killed_app.in_flight
    stopped.send_signal(signal.SIGTERM)
    late = daemon(["-c", str(configs[3])], env=aws_env)
    delivered_at_kill = len(delivered)
    assert killed.wait_exit(timeout=10) == -signal.SIGKILL
    assert stopped.wait_exit(timeout=30) == 0

    wait_until(lambda: len(delivered) == MESSAGES, 120, interval=0.1,
               message=lambda: f"{len(delivered)}/{MESSAGES} delivered; feeders {[f.dead for f in feeders]}")
    gevent.joinall(feeders, raise_error=True)
    # Deleted, not merely delivered: a message whose delete is lost comes back and is counted left here.
    wait_until(lambda: all(count_messages(sqs, q.url) == 0 for q in queues), 60, interval=0.2,
               message=lambda: f"left {[count_messages(sqs, q.url) for q in queues]}")
    finished_at = time.monotonic()
    sent_at_drain = {slot for proc in (killed, stopped, survivor, late) for slot in SLOT.findall(proc.output())}
    for proc in (survivor, late):
        assert proc.stop(timeout=30) == 0
    # A minute may turn between the drain and the stops: that slot is sent, and the stop releases it.
    left = {m["MessageAttributes"]["beanstalk.sqsd.scheduled_time"]["StringValue"]
            for m in receive_all(sqs, queues[0].url, VisibilityTimeout=60)
            if "beanstalk.sqsd.scheduled_time" in m.get("MessageAttributes", {})}

    # Nothing lost, nothing foreign.
    counts = Counter(body for app in apps for body in work_bodies(app))
    assert set(counts) == set(bodies)
    # A duplicate is a message the killed daemon was delivering at the kill, or had just delivered.
    answered_before_kill = {r.body.decode(): killed_at - killed_app.answered_at.get(id(r), killed_at)
                            for r in list(killed_app.requests)}  # when the app answered, however late its sleep
    recent = {body for body, before in answered_before_kill.items() if before <= DELETE_WINDOW_SECONDS}
    duplicates = {body: times for body, times in counts.items() if times > 1}
    assert set(duplicates) <= recent, sorted(set(duplicates) - recent)[:20]
    gaps = sorted(round(answered_before_kill[body], 3) for body in duplicates)
    assert all(times == 2 for times in duplicates.values()), duplicates
    by_daemon = [len(work_bodies(app)) for app in apps]
    assert by_daemon[3] > 0  # the late one took work

    # Periodic: every slot sent by exactly one daemon of the fleet, and claimed once in the table.
    sent = Counter(slot for proc in (killed, stopped, survivor, late) for slot in SLOT.findall(proc.output()))
    assert sent and set(sent.values()) == {1}, sent
    claims = moto_server.client("dynamodb").scan(TableName=claims_table)["Items"]
    assert sorted(item["slot"]["S"] for item in claims) == sorted(f"tick@{slot}" for slot in sent)
    cron = Counter(r.headers["x-aws-sqsd-scheduled-at"] for app in apps for r in list(app.requests)
                   if "x-aws-sqsd-taskname" in r.headers)
    assert set(cron) <= set(sent), (cron, sent)
    # every slot sent was delivered, or (sent after the drain) is still on its queue; none is in both
    assert set(sent) - set(cron) <= left and not left & (sent_at_drain | set(cron)), (cron, sent, left, sent_at_drain)
    print(f"\nfleet: {MESSAGES} messages in {finished_at - began:.1f}s; by daemon {by_daemon} "
          f"(killed, stopped, survivor, late); {delivered_at_kill} delivered at the kill, the killed daemon "
          f"had {in_flight_at_kill} deliveries in flight and {len(recent)} answered in the last "
          f"{DELETE_WINDOW_SECONDS:g}s; duplicates {len(duplicates)}, answered this long before the kill "
          f"(negative: in flight): {gaps}; periodic slots {dict(sent)}, "
          f"deliveries {dict(cron)}")
