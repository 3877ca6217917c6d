"""SqsQueue against moto: receive, coalesced deletes and visibility changes, partial failures."""

from __future__ import annotations

import dataclasses
import time
from typing import Any, Callable

import gevent

from tests.integration.helpers import build_sqs_queue
from tests.support import CountingProxy, Queue, count_messages, wait_until
from tests.support.moto import build_client
from workerless_gevent.message import Message
from workerless_gevent.metrics import Registry
from workerless_gevent.delivery.queue import SqsQueue


def send(sqs: Any, queue: Queue, n: int) -> None:
    for start in range(0, n, 10):
        entries = [{"Id": str(i), "MessageBody": f"m{start + i}"} for i in range(min(10, n - start))]
        sqs.send_message_batch(QueueUrl=queue.url, Entries=entries)


def receive_all(sqs_q: SqsQueue, n: int) -> list[Message]:
    messages: list[Message] = []
    while len(messages) < n:
        batch = sqs_q.receive(10, 0)
        assert batch, f"only {len(messages)} of {n} received"
        messages.extend(batch)
    return messages


def test_receive_reads_bodies_attributes_and_counts_requests(
    sqs: Any, make_queue: Callable[..., Queue]
) -> None:
    queue, registry = make_queue(), Registry()
    sqs.send_message(QueueUrl=queue.url, MessageBody="h\u00e9llo \u2713",
                     MessageAttributes={"kind": {"DataType": "String", "StringValue": "x"}})
    sqs_q = build_sqs_queue(sqs, queue, registry.count, visibility_timeout=30)
    (message,) = sqs_q.receive(10, 0)
    assert message.body == "h\u00e9llo \u2713" and message.queue == queue.name
    assert message.receive_count == 1 and message.sent_at is not None
    assert message.string_attribute("kind") == "x"
    assert set(message.attributes) >= {"ApproximateReceiveCount", "SentTimestamp", "SenderId",
                                       "ApproximateFirstReceiveTimestamp"}
    assert sqs_q.receive(10, 0) == []  # invisible for the queue's visibility_timeout
    assert registry.total("SqsRequests", queue.name) == 2


def test_delete_batch_with_one_stale_receipt_counts_it_and_deletes_the_rest(
    sqs: Any, make_queue: Callable[..., Queue], counting_proxy: CountingProxy
) -> None:
    queue, registry = make_queue(), Registry()
    send(sqs, queue, 5)
    sqs_q = build_sqs_queue(build_client("sqs", counting_proxy.url), queue, registry.count)
    messages = receive_all(sqs_q, 5)
    stale = dataclasses.replace(messages[2], receipt_handle="not-a-receipt-handle")
    for message in messages[:2] + [stale] + messages[3:]:
        sqs_q.delete(message)
    wait_until(lambda: sqs_q.pending_count() == 0 and registry.total("StaleReceipts") == 1, 10,
               message=lambda: f"pending={sqs_q.pending_count()} totals={dict(registry.totals)}")
    wait_until(lambda: count_messages(sqs, queue.url) == 1, 10, message="deletes not applied")
    assert counting_proxy.count("DeleteMessageBatch") == 1  # coalesced into one call, stale entry not retried
    assert registry.total("StaleReceipts", queue.name) == 1
    # the message behind the stale handle is still there, untouched
    sqs.change_message_visibility(QueueUrl=queue.url, ReceiptHandle=messages[2].receipt_handle,
                                  VisibilityTimeout=0)
    assert [m["Body"] for m in sqs.receive_message(QueueUrl=queue.url)["Messages"]] == [messages[2].body]


def test_visibility_batch_with_a_stale_receipt_changes_the_rest(
    sqs: Any, make_queue: Callable[..., Queue], counting_proxy: CountingProxy
) -> None:
    queue, registry = make_queue(), Registry()
    send(sqs, queue, 3)
    sqs_q = build_sqs_queue(build_client("sqs", counting_proxy.url), queue, registry.count)
    messages = receive_all(sqs_q, 3)
    sqs_q.change_visibility(messages[0], 0)
    sqs_q.change_visibility(dataclasses.replace(messages[1], receipt_handle="stale"), 0)
    sqs_q.change_visibility(messages[2], 0)
    wait_until(lambda: registry.total("StaleReceipts") == 1, 10, message="stale handle not counted")
    attrs = sqs.get_queue_attributes(QueueUrl=queue.url, AttributeNames=["ApproximateNumberOfMessages"])
    assert attrs["Attributes"]["ApproximateNumberOfMessages"] == "2"
    assert counting_proxy.count("ChangeMessageVisibilityBatch") == 1


def test_deletes_are_coalesced_ten_per_call(
    sqs: Any, make_queue: Callable[..., Queue], counting_proxy: CountingProxy
) -> None:
    queue, registry = make_queue(), Registry()
    send(sqs, queue, 25)
    sqs_q = build_sqs_queue(build_client("sqs", counting_proxy.url), queue, registry.count)
    for message in receive_all(sqs_q, 25):
        sqs_q.delete(message)
    wait_until(lambda: count_messages(sqs, queue.url) == 0, 10, message="not all deleted")
    entries = [len(r.params["Entries"]) for r in counting_proxy.between(0, float("inf"), "DeleteMessageBatch")]
    assert sorted(entries, reverse=True) == [10, 10, 5]


def test_heartbeat_entries_of_settled_messages_are_dropped(
    sqs: Any, make_queue: Callable[..., Queue], counting_proxy: CountingProxy
) -> None:
    queue, registry = make_queue(), Registry()
    send(sqs, queue, 1)
    sqs_q = build_sqs_queue(build_client("sqs", counting_proxy.url), queue, registry.count)
    (message,) = receive_all(sqs_q, 1)
    sqs_q.change_visibility(message, 60, is_heartbeat=True)
    message.settled = True  # as Settler.delete marks it, before the heartbeat batch goes out
    sqs_q.delete(message)
    wait_until(lambda: count_messages(sqs, queue.url) == 0, 10, message="not deleted")
    sqs_q.flush(5.0)
    assert counting_proxy.count("ChangeMessageVisibilityBatch") == 0


def test_flush_at_stop_waits_for_a_batch_already_on_its_way(
    sqs: Any, make_queue: Callable[..., Queue], counting_proxy: CountingProxy
) -> None:
    """Stopping flushes pending deletes; a batch the background flusher is sending must not be
    abandoned, and the ones still pending go out beside it (deletes may be several calls at once)."""
    queue, registry = make_queue(), Registry()
    send(sqs, queue, 5)
    sqs_q = build_sqs_queue(build_client("sqs", counting_proxy.url), queue, registry.count)
    messages = receive_all(sqs_q, 5)
    counting_proxy.delays["DeleteMessageBatch"] = 0.5
    for message in messages[:3]:
        sqs_q.delete(message)
    wait_until(lambda: counting_proxy.count("DeleteMessageBatch") == 1, 10, message="flusher never sent")
    for message in messages[3:]:
        sqs_q.delete(message)  # pending while the first batch is on its way
    stopper = gevent.spawn(sqs_q.flush, 5.0)  # as the stop does
    stopper.join(timeout=10)
    assert stopper.successful()
    assert sqs_q.pending_count() == 0
    calls = counting_proxy.between(0, float("inf"), "DeleteMessageBatch")
    assert [len(call.params["Entries"]) for call in calls] == [3, 2]
    assert all(call.ended is not None for call in calls), "flush returned before a batch had its answer"
    wait_until(lambda: count_messages(sqs, queue.url) == 0, 10,
               message=lambda: f"{count_messages(sqs, queue.url)} deletes lost at flush")


def test_a_delete_made_while_stopping_is_flushed_without_waiting_for_the_flush_timeout(
    sqs: Any, make_queue: Callable[..., Queue]
) -> None:
    """At stop the last delivery's delete comes after the first flush: its call must not leave the
    flusher waiting for a wake-up (it did, until the join timed out, on half of the stops)."""
    queue, registry = make_queue(), Registry()
    send(sqs, queue, 1)
    sqs_q = build_sqs_queue(sqs, queue, registry.count)
    (message,) = receive_all(sqs_q, 1)
    sqs_q.flush(5.0)  # the stop's first flush: nothing pending yet, the batchers now send at once
    sqs_q.delete(message)  # the delivery still running at the stop ends
    started = time.monotonic()
    sqs_q.flush(5.0)
    assert time.monotonic() - started < 2.0  # the flush may wait 5
    assert sqs_q.pending_count() == 0
    wait_until(lambda: count_messages(sqs, queue.url) == 0, 10, message="the last delete was lost")


def test_deletes_go_out_several_calls_at_once_when_each_takes_a_round_trip(
    sqs: Any, make_queue: Callable[..., Queue], counting_proxy: CountingProxy
) -> None:
    """On a real network one call at a time caps a queue at 10 deletes per round trip."""
    queue, registry = make_queue(), Registry()
    send(sqs, queue, 40)
    sqs_q = build_sqs_queue(build_client("sqs", counting_proxy.url), queue, registry.count)
    messages = receive_all(sqs_q, 40)
    counting_proxy.delays["DeleteMessageBatch"] = 0.5
    for message in messages:
        sqs_q.delete(message)
    wait_until(lambda: count_messages(sqs, queue.url) == 0, 10, message="not all deleted")
    calls = counting_proxy.between(0, float("inf"), "DeleteMessageBatch")
    assert sorted(len(call.params["Entries"]) for call in calls) == [10, 10, 10, 10]
    overlapping = max(sum(1 for other in calls if other.started < call.started + 0.4 and call.started < other.started + 0.4)
                      for call in calls)
    assert overlapping == 4, [round(call.started - calls[0].started, 2) for call in calls]
