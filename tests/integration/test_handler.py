"""Outcomes become SQS actions on moto: delete, retry later, dead-letter, expire, release, heartbeat."""

from __future__ import annotations

import dataclasses
import time
from typing import Any, Callable

import gevent
import gevent.event

from tests.integration.helpers import receive_exactly
from tests.support import Queue, count_messages, count_visible, drain_bodies, wait_until
from workerless_gevent.delivery.outcomes import Settler
from workerless_gevent.filtering import parse_filters
from workerless_gevent.delivery.leases import Leases
from workerless_gevent.delivery.poller import Work
from workerless_gevent.delivery.queue_state import QueueState
from workerless_gevent.message import Message
from workerless_gevent.metrics import Registry
from workerless_gevent.delivery.queue import SqsQueue
from workerless_gevent.targets import Outcome, Result

FAILED = Outcome.failure("HTTP 500", "the app answered HTTP 500")


def wire(registry: Registry, queue: SqsQueue, dlq: SqsQueue | None = None) -> tuple[Settler, Leases]:
    queues = {queue.name: queue}
    leases = Leases(queues)
    dead_letter_queues = {queue.name: dlq} if dlq is not None else {}
    return Settler(queues, dead_letter_queues, registry, leases), leases


def receive_one(sqs: Any, queue: SqsQueue, handler: Settler, body: str = "x", **send: Any) -> Message:
    sqs.send_message(QueueUrl=queue.url, MessageBody=body, **send)
    (message,) = handler.admit(queue, receive_exactly(queue, 1))
    return message


def settled_on_sqs(queue: SqsQueue) -> bool:
    return queue.pending_count() == 0


def test_success_deletes(sqs: Any, sqs_queue: Callable[..., SqsQueue], registry: Registry) -> None:
    queue = sqs_queue()
    handler, leases = wire(registry, queue)
    message = receive_one(sqs, queue, handler)
    assert leases.in_flight() == 1
    handler.settle_message(queue, message, Outcome.success(), "default")
    wait_until(lambda: count_messages(sqs, queue.url) == 0, 10, message="not deleted")
    assert leases.in_flight() == 0
    assert (registry.total("Received"), registry.total("Succeeded")) == (1, 1)


def test_failure_hides_the_message_for_the_error_visibility_timeout(
    sqs: Any, sqs_queue: Callable[..., SqsQueue], registry: Registry
) -> None:
    queue = sqs_queue(visibility_timeout=300, error_visibility_timeout=1)
    handler, _ = wire(registry, queue)
    message = receive_one(sqs, queue, handler)
    failed_at = time.monotonic()
    handler.settle_message(queue, message, FAILED, "default")
    wait_until(lambda: count_visible(sqs, queue.url) == 1, 10, message="not visible after the error timeout")
    assert 0.5 <= time.monotonic() - failed_at < 5  # 1 s, not the receive's 300 s
    assert registry.total("Failed") == 1 and registry.failure_types["HTTP 500"][0] == 1


def test_long_failure_delay_stays_within_twelve_hours_of_the_receive(
    sqs: Any, sqs_queue: Callable[..., SqsQueue], registry: Registry
) -> None:
    """SQS rejects a visibility timeout reaching past 12 h from the receive; the message must still
    be hidden for about that long rather than keep its short receive timeout."""
    queue = sqs_queue(visibility_timeout=1, error_visibility_timeout=43200)
    handler, _ = wire(registry, queue)
    message = receive_one(sqs, queue, handler)
    handler.settle_message(queue, message, FAILED, "default")
    wait_until(lambda: settled_on_sqs(queue), 10, message="visibility change never sent")
    hidden_until = time.monotonic() + 3  # well past the receive's 1 s visibility timeout
    wait_until(lambda: time.monotonic() > hidden_until, 5)
    assert count_visible(sqs, queue.url) == 0, "the visibility change was refused, so the message came back"
    assert count_messages(sqs, queue.url) == 1


def test_retry_outcome_hides_for_retry_after_and_counts_throttled(
    sqs: Any, sqs_queue: Callable[..., SqsQueue], registry: Registry
) -> None:
    queue = sqs_queue(error_visibility_timeout=600)
    handler, _ = wire(registry, queue)
    message = receive_one(sqs, queue, handler)
    handler.settle_message(queue, message, Outcome(Result.RETRY, "HTTP 429", "slow down", 1.2), "default")
    retried_at = time.monotonic()
    wait_until(lambda: count_visible(sqs, queue.url) == 1, 10, message="not visible after Retry-After")
    assert 1.0 <= time.monotonic() - retried_at < 5  # ceil(1.2) = 2 s, not the error timeout of 600 s
    assert (registry.total("Throttled"), registry.total("Failed")) == (1, 0)


def test_dead_letter_after_max_retries_keeps_body_and_attributes(
    sqs: Any, make_queue: Callable[..., Queue], sqs_queue: Callable[..., SqsQueue], registry: Registry
) -> None:
    dlq_queue = make_queue()
    queue = sqs_queue(max_retries=1, dead_letter_queue=dlq_queue.name)
    dlq = sqs_queue(dlq_queue)
    handler, _ = wire(registry, queue, dlq)
    attributes = {"a": {"DataType": "String", "StringValue": "1"}}
    message = receive_one(sqs, queue, handler, "p\u00f6ison\r\n", MessageAttributes=attributes)
    handler.settle_message(queue, message, FAILED, "default")
    wait_until(lambda: count_messages(sqs, queue.url) == 0, 10, message="source not deleted")
    (dead,) = sqs.receive_message(QueueUrl=dlq_queue.url, MessageAttributeNames=["All"])["Messages"]
    assert dead["Body"] == "p\u00f6ison\r\n"
    assert dead["MessageAttributes"] == {
        "a": {"DataType": "String", "StringValue": "1"},
        "workerless.source_queue": {"DataType": "String", "StringValue": queue.name},
        "workerless.receive_count": {"DataType": "Number", "StringValue": "1"},
        "workerless.error": {"DataType": "String", "StringValue": "HTTP 500: the app answered HTTP 500"},
    }
    assert registry.total("DeadLettered", queue.name) == 1


def test_dead_letter_with_nine_attributes_stays_within_the_limit_of_ten(
    sqs: Any, make_queue: Callable[..., Queue], sqs_queue: Callable[..., SqsQueue], registry: Registry
) -> None:
    dlq_queue = make_queue()
    queue = sqs_queue(max_retries=1, dead_letter_queue=dlq_queue.name)
    handler, _ = wire(registry, queue, sqs_queue(dlq_queue))
    attributes = {f"k{i}": {"DataType": "String", "StringValue": str(i)} for i in range(9)}
    message = receive_one(sqs, queue, handler, MessageAttributes=attributes)
    handler.settle_message(queue, message, FAILED, "default")
    wait_until(lambda: count_messages(sqs, dlq_queue.url) == 1, 10, message="not dead-lettered")
    (dead,) = sqs.receive_message(QueueUrl=dlq_queue.url, MessageAttributeNames=["All"])["Messages"]
    assert set(dead["MessageAttributes"]) == {*attributes, "workerless.source_queue"}
    wait_until(lambda: count_messages(sqs, queue.url) == 0, 10, message="source not deleted")


def test_dead_letter_queue_gone_keeps_the_message_for_a_retry(
    sqs: Any, make_queue: Callable[..., Queue], sqs_queue: Callable[..., SqsQueue], registry: Registry
) -> None:
    dlq_queue = make_queue()
    queue = sqs_queue(max_retries=1, dead_letter_queue=dlq_queue.name, error_visibility_timeout=1)
    handler, _ = wire(registry, queue, sqs_queue(dlq_queue))
    message = receive_one(sqs, queue, handler, "keep me")
    sqs.delete_queue(QueueUrl=dlq_queue.url)
    handler.settle_message(queue, message, FAILED, "default")
    wait_until(lambda: count_visible(sqs, queue.url) == 1, 10, message="message lost or never retried")
    assert drain_bodies(sqs, queue.url) == ["keep me"]
    assert registry.total("DeadLettered") == 0


def test_message_older_than_retention_is_deleted_undelivered(
    sqs: Any, sqs_queue: Callable[..., SqsQueue], registry: Registry
) -> None:
    queue = sqs_queue(retention_period=60)
    handler, leases = wire(registry, queue)
    sqs.send_message(QueueUrl=queue.url, MessageBody="stale")
    sqs.send_message(QueueUrl=queue.url, MessageBody="fresh")
    messages = receive_exactly(queue, 2)
    # as if SQS had accepted "stale" 70 s ago (moto cannot age a message for us)
    old = str(int((time.time() - 70) * 1000))
    aged = [dataclasses.replace(m, attributes={**m.attributes, "SentTimestamp": old}) if m.body == "stale" else m
            for m in messages]
    admitted = handler.admit(queue, aged)
    assert [m.body for m in admitted] == ["fresh"]
    assert leases.in_flight() == 1
    wait_until(lambda: count_messages(sqs, queue.url) == 1, 10, message="expired message not deleted")
    assert registry.total("Expired", queue.name) == 1


def test_release_makes_messages_visible_at_once(
    sqs: Any, sqs_queue: Callable[..., SqsQueue], registry: Registry
) -> None:
    queue = sqs_queue(visibility_timeout=300)
    handler, leases = wire(registry, queue)
    for body in ("a", "b"):
        sqs.send_message(QueueUrl=queue.url, MessageBody=body)
    messages = handler.admit(queue, receive_exactly(queue, 2))
    assert count_visible(sqs, queue.url) == 0
    handler.release(messages)
    wait_until(lambda: count_visible(sqs, queue.url) == 2, 5, message="not released")
    assert leases.in_flight() == 0


def test_heartbeat_keeps_a_slow_delivery_invisible_then_lets_go(
    sqs: Any, sqs_queue: Callable[..., SqsQueue], registry: Registry
) -> None:
    queue = sqs_queue(visibility_timeout=2)
    handler, leases = wire(registry, queue)
    message = receive_one(sqs, queue, handler)
    stopped = gevent.event.Event()
    beating = gevent.spawn(leases.run, stopped)
    try:
        until = time.monotonic() + 5  # more than twice the 2 s visibility timeout
        while time.monotonic() < until:
            assert count_visible(sqs, queue.url) == 0, "heartbeat let the message reappear"
            gevent.sleep(0.1)
        leases.limit([message], 0)  # the delivery's hard deadline has passed: stop extending
        wait_until(lambda: count_visible(sqs, queue.url) == 1, 10, message="never let go after the deadline")
    finally:
        stopped.set()
        beating.join(timeout=5)


def test_a_message_no_filter_matches_is_deleted_undelivered_and_counted(
    sqs: Any, sqs_queue: Callable[..., SqsQueue], registry: Registry
) -> None:
    queue = sqs_queue(filter=parse_filters(['{"body": {"kind": ["order"]}}']))
    handler, leases = wire(registry, queue)
    for body in ('{"kind": "order"}', '{"kind": "audit"}', "plain"):
        sqs.send_message(QueueUrl=queue.url, MessageBody=body)
    admitted = handler.admit(queue, receive_exactly(queue, 3))
    assert [m.body for m in admitted] == ['{"kind": "order"}'] and leases.in_flight() == 1
    wait_until(lambda: count_messages(sqs, queue.url) == 1, 10, message="filtered messages not deleted")
    assert registry.total("Filtered", queue.name) == 2


def test_overloads_are_retried_after_the_error_visibility_and_do_not_count_toward_max_retries(
    sqs: Any, make_queue: Callable[..., Queue], sqs_queue: Callable[..., SqsQueue], registry: Registry
) -> None:
    dlq_queue = make_queue()
    queue = sqs_queue(max_retries=1, error_visibility_timeout=0, dead_letter_queue=dlq_queue.name)
    handler, _ = wire(registry, queue, sqs_queue(dlq_queue))
    busy = Outcome.overloaded("HTTP 429", "the app answered HTTP 429 without Retry-After")
    sqs.send_message(QueueUrl=queue.url, MessageBody="x")
    for receive in range(1, 12):
        (message,) = handler.admit(queue, receive_exactly(queue, 1))
        assert message.receive_count == receive
        handler.settle_message(queue, message, busy, "default")
        if receive <= 10:  # ten overloads are free: back on the queue, never dead-lettered
            wait_until(lambda: queue.pending_count() == 0, 10, message="visibility change not sent")
            assert count_messages(sqs, dlq_queue.url) == 0
    # the eleventh counts as a failure, and with max_retries = 1 (11 receives, 10 of them free) it goes
    wait_until(lambda: count_messages(sqs, dlq_queue.url) == 1, 10, message="not dead-lettered after 11 overloads")
    assert (registry.total("Throttled", queue.name), registry.total("Failed", queue.name)) == (10, 1)


def test_a_dead_letter_copy_that_fails_keeps_the_message_for_its_retry_delay(
    sqs: Any, make_queue: Callable[..., Queue], sqs_queue: Callable[..., SqsQueue], registry: Registry
) -> None:
    dlq_queue = make_queue()
    queue = sqs_queue(max_retries=1, error_visibility_timeout=300, dead_letter_queue=dlq_queue.name)
    handler, _ = wire(registry, queue, sqs_queue(dlq_queue))
    message = receive_one(sqs, queue, handler)
    sqs.delete_queue(QueueUrl=dlq_queue.url)  # the copy cannot be made
    handler.settle_message(queue, message, FAILED, "default")
    wait_until(lambda: queue.pending_count() == 0, 10, message="visibility change not sent")
    assert count_messages(sqs, queue.url) == 1 and count_visible(sqs, queue.url) == 0  # kept, hidden for 300 s
    assert registry.total("DeadLettered", queue.name) == 0 and registry.total("Failed", queue.name) == 1


def test_the_poller_hears_of_a_work_s_end_once_even_when_a_bug_abandons_it_after_settling(
    sqs: Any, sqs_queue: Callable[..., SqsQueue], registry: Registry
) -> None:
    queue = sqs_queue()
    finished: list[tuple[int, bool]] = []
    leases = Leases({queue.name: queue})
    settler = Settler({queue.name: queue}, {}, registry, leases,
                      finish=lambda work, groups, overloaded: finished.append((len(work.messages), overloaded)) or [])
    sqs.send_message(QueueUrl=queue.url, MessageBody="x")
    messages = settler.admit(queue, receive_exactly(queue, 1))
    work = Work(QueueState(queue, 1, lambda: 0.0), messages)
    settler.settle(work, [Outcome.overloaded("HTTP 429", "busy")], "default")
    settler.abandon(work)  # as after an error past the settling
    assert finished == [(1, True)]
    settler.settle(Work(QueueState(queue, 1, lambda: 0.0), []), [Outcome.success()], "default")  # a bad count
    assert finished == [(1, True), (0, False)]


def test_a_target_that_gives_too_few_outcomes_fails_every_message_instead_of_forgetting_one(
    sqs: Any, sqs_queue: Callable[..., SqsQueue], registry: Registry
) -> None:
    queue = sqs_queue(visibility_timeout=300, error_visibility_timeout=300)
    handler, leases = wire(registry, queue)
    for body in ("a", "b"):
        sqs.send_message(QueueUrl=queue.url, MessageBody=body)
    messages = handler.admit(queue, receive_exactly(queue, 2))
    handler.settle(Work(QueueState(queue, 2, lambda: 0.0), messages), [Outcome.success()], "default")
    wait_until(lambda: queue.pending_count() == 0, 10, message="visibility changes not sent")
    assert leases.in_flight() == 0 and all(message.settled for message in messages)
    assert count_messages(sqs, queue.url) == 2  # both kept for a retry, neither deleted on one answer
    assert registry.total("Failed", queue.name) == 2


def test_a_delivery_abandoned_after_a_bug_counts_toward_max_retries_and_its_group_mates_do_not(
    sqs: Any, make_queue: Callable[..., Queue], sqs_queue: Callable[..., SqsQueue], registry: Registry
) -> None:
    """A bug that follows one message must not release it forever uncounted (it would never be dead-lettered);
    the FIFO group-mates released behind it were never started, and their receive does not count."""
    queue = sqs_queue(make_queue(fifo=True))
    handler, _ = wire(registry, queue)
    for index in range(2):
        sqs.send_message(QueueUrl=queue.url, MessageBody=f"m{index}", MessageGroupId="g",
                         MessageDeduplicationId=f"d{index}")
    first, second = handler.admit(queue, receive_exactly(queue, 2))
    state = QueueState(queue, 1, lambda: 0.0)
    state.receiving.buffer.append(second)
    handler.finish = lambda work, groups, overloaded: [second] if "g" in groups else []
    handler.abandon(Work(state, [first]))  # as the slot does when the target raised
    assert (handler.counts.counted(first), handler.counts.counted(second)) == (1, 0)
    wait_until(lambda: queue.pending_count() == 0, 10, message="releases not sent")
    assert count_visible(sqs, queue.url) == 2
