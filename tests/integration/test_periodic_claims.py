"""Claims on moto's DynamoDB and cron messages on moto's SQS: several schedulers, one message per slot."""

from __future__ import annotations

import random
from collections import Counter
from collections.abc import Callable
from datetime import datetime, timedelta, timezone
from typing import Any

import gevent
import gevent.event
import gevent.lock

from tests.integration.helpers import build_sqs_queue
from tests.support import MotoServer, Queue, receive_all
from workerless_gevent.periodic.claims import Claims
from workerless_gevent.config.cron import PeriodicTask
from workerless_gevent.periodic.scheduler import Scheduler
from workerless_gevent.delivery.queue import SqsQueue

EVERY_MINUTE = PeriodicTask(name="tick", url="/cron/tick", schedule="* * * * *")
EVERY_FIVE = PeriodicTask(name="five", url="/cron/five", schedule="*/5 * * * *")
START = datetime(2024, 5, 1, 12, 0, 30, tzinfo=timezone.utc)


def sqs_queue(sqs: Any, queue: Queue) -> SqsQueue:
    return build_sqs_queue(sqs, queue, lambda queue_name, metric: None)


MOTO_WRITES = gevent.lock.Semaphore()


def claims(moto_server: MotoServer, table: str, owner: str) -> Claims:
    """Claims on moto, whose conditional PutItem is not atomic across its server threads (two racers
    both win a slot now and then on a busy machine; DynamoDB itself never lets them): the racers' writes
    reach moto one at a time, while the race between the schedulers stays as it is."""
    client = moto_server.client("dynamodb")
    client.meta.events.register("before-call.dynamodb.PutItem", lambda **kwargs: MOTO_WRITES.acquire() and None)  # None: go on with the call
    for event in ("after-call.dynamodb.PutItem", "after-call-error.dynamodb.PutItem"):
        client.meta.events.register(event, lambda **kwargs: MOTO_WRITES.release())
    return Claims(client, table, owner)


def receive_cron_messages(sqs: Any, url: str) -> list[dict[str, Any]]:
    """Every message on the queue, with the system attributes a FIFO send sets."""
    return receive_all(sqs, url, VisibilityTimeout=60, MessageSystemAttributeNames=["All"])


def attribute(message: dict[str, Any], name: str) -> str:
    return str(message["MessageAttributes"][name]["StringValue"])


def fixed_clock(moment: list[datetime]) -> Callable[[], float]:
    return lambda: moment[0].timestamp()


def test_racing_instances_create_the_table_once(moto_server: MotoServer, claims_table: str) -> None:
    stopping = gevent.event.Event()
    racers = [claims(moto_server, claims_table, f"instance-{i}") for i in range(3)]
    jobs = [gevent.spawn(racer.wait_for_table, stopping) for racer in racers]
    gevent.joinall(jobs, timeout=30, raise_error=True)
    assert [job.value for job in jobs] == [True, True, True]
    dynamodb = moto_server.client("dynamodb")
    table = dynamodb.describe_table(TableName=claims_table)["Table"]
    assert table["TableStatus"] == "ACTIVE"
    assert table["KeySchema"] == [{"AttributeName": "slot", "KeyType": "HASH"}]
    assert table["BillingModeSummary"]["BillingMode"] == "PAY_PER_REQUEST"
    ttl = dynamodb.describe_time_to_live(TableName=claims_table)["TimeToLiveDescription"]
    assert (ttl["TimeToLiveStatus"], ttl["AttributeName"]) == ("ENABLED", "expires_at")


def test_two_schedulers_racing_on_each_slot_send_one_message(
    moto_server: MotoServer, sqs: Any, make_queue: Callable[..., Queue], claims_table: str
) -> None:
    queue = make_queue()
    now = [START]
    racers = []
    for owner in ("a", "b"):
        racer_claims = claims(moto_server, claims_table, owner)
        assert racer_claims.wait_for_table(gevent.event.Event())
        racers.append(Scheduler((EVERY_MINUTE, EVERY_FIVE), sqs_queue(sqs, queue), False, racer_claims,
                                fixed_clock(now), random.Random(7)))
    for _ in range(20):
        now[0] += timedelta(minutes=1)
        jobs = [gevent.spawn(racer.tick, now[0]) for racer in racers]
        gevent.joinall(jobs, timeout=30, raise_error=True)
    messages = receive_cron_messages(sqs, queue.url)
    slots = Counter((attribute(m, "beanstalk.sqsd.task_name"), attribute(m, "beanstalk.sqsd.scheduled_time"))
                    for m in messages)
    # 12:00:30 + 20 minutes: every minute 12:01..12:20 and every five 12:05..12:20, plus the catch-up of 12:00
    assert len(slots) == 20 + 4 + 2 and set(slots.values()) == {1}, slots
    assert ("tick", "2024-05-01T12:00:00Z") in slots and ("five", "2024-05-01T12:00:00Z") in slots
    assert all(attribute(m, "beanstalk.sqsd.path") == f"/cron/{attribute(m, 'beanstalk.sqsd.task_name')}"
               for m in messages)
    assert {m["Body"] for m in messages} == {"elasticbeanstalk scheduled job"}
    items = moto_server.client("dynamodb").scan(TableName=claims_table)["Items"]
    assert sorted(item["slot"]["S"] for item in items) == sorted(f"{name}@{time}" for name, time in slots)
    wins = Counter(item["owner"]["S"] for item in items)
    assert set(wins) <= {"a", "b"}
    print(f"race: {len(slots)} slots, {len(messages)} messages, claims won by owner {dict(wins)}")


def test_a_restart_sends_a_missed_slot_once(
    moto_server: MotoServer, sqs: Any, make_queue: Callable[..., Queue], claims_table: str
) -> None:
    queue = make_queue()
    noon = PeriodicTask(name="noon", url="/noon", schedule="0 12 * * *")
    now = [datetime(2024, 5, 1, 12, 1, 10, tzinfo=timezone.utc)]
    for owner in ("first-start", "restarted", "another-instance"):
        scheduler_claims = claims(moto_server, claims_table, owner)
        assert scheduler_claims.wait_for_table(gevent.event.Event())
        scheduler = Scheduler((noon,), sqs_queue(sqs, queue), False, scheduler_claims, fixed_clock(now),
                              random.Random(1))
        scheduler.tick(now[0])
        now[0] += timedelta(seconds=40)
    messages = receive_cron_messages(sqs, queue.url)
    assert [attribute(m, "beanstalk.sqsd.scheduled_time") for m in messages] == ["2024-05-01T12:00:00Z"]
    # Missed by more than 5 minutes: too late to be worth sending.
    late = Scheduler((noon,), sqs_queue(sqs, queue), False, claims(moto_server, claims_table, "late"),
                     fixed_clock([datetime(2024, 5, 1, 12, 5, 1, tzinfo=timezone.utc)]), random.Random(1))
    assert late.pending == {}


def test_fifo_queue_gets_group_and_deduplication_ids(
    sqs: Any, make_queue: Callable[..., Queue]
) -> None:
    queue = make_queue(fifo=True)
    now = [START]
    # Two instances without a claims table: SQS's deduplication still drops the second send of a slot.
    schedulers = [Scheduler((EVERY_MINUTE,), sqs_queue(sqs, queue), True, None, fixed_clock(now), random.Random(1))
                  for _ in range(2)]
    now[0] += timedelta(minutes=1)
    for scheduler in schedulers:
        scheduler.tick(now[0])
    (message,) = receive_cron_messages(sqs, queue.url)
    assert message["Attributes"]["MessageGroupId"] == "tick"
    assert len(message["Attributes"]["MessageDeduplicationId"]) == 64
    assert attribute(message, "beanstalk.sqsd.scheduled_time") == "2024-05-01T12:01:00Z"
