"""A message's group by its queue's kind, and a standard queue's groups under max_concurrency_per_group."""

from __future__ import annotations

import time
from collections import deque

from workerless_gevent.delivery.groups import MAX_WAITING_MESSAGES, TOP_GROUPS, Groups
from workerless_gevent.message import Message

from .sqs_messages import make_message


def grouped(queue: str, group: str | None, index: int, body: str = "x") -> Message:
    attributes = {"MessageGroupId": group} if group is not None else {}
    return make_message(queue, message_id=f"{group}-{index}", body=body, attributes=attributes)


def test_fifo_rules_follow_the_queue_kind_not_the_attribute() -> None:
    fair = grouped("events", "tenant-a", 1)
    fifo = grouped("events.fifo", "tenant-a", 1)
    assert (fair.group_id, fair.fifo_group) == ("tenant-a", None)
    assert (fifo.group_id, fifo.fifo_group) == ("tenant-a", "tenant-a")
    assert grouped("events.fifo", None, 1).fifo_group is None


def test_one_group_goes_in_parallel_without_a_cap() -> None:
    groups = Groups(None)
    buffer = deque(grouped("events", "a", index) for index in range(5))
    taken = [groups.take(buffer, 1) for _ in range(5)]
    assert [len(messages) for messages, _, _ in taken] == [1] * 5
    assert groups.in_flight == {"a": 5} and not groups.waiting


def test_a_group_at_its_cap_waits_aside_and_the_next_group_goes() -> None:
    groups = Groups(2)
    buffer = deque([*(grouped("events", "big", index) for index in range(4)), grouped("events", "small", 0),
                    grouped("events", None, 0)])
    first = groups.take(buffer, 1)
    second = groups.take(buffer, 1)
    third = groups.take(buffer, 1)  # big-2 and big-3 are set aside on the way to small-0
    assert [message.message_id for message in first[0] + second[0] + third[0]] == ["big-0", "big-1", "small-0"]
    assert third[2] == 2 and groups.waiting_count == 2
    assert [message.message_id for message in groups.take(buffer, 1)[0]] == ["None-0"]  # no group: never capped
    assert groups.take(buffer, 1) == ([], (), 0)

    groups.finish(first[1], buffer)  # big-0 ended: the oldest waiting one of its group goes first
    assert [message.message_id for message in buffer] == ["big-2"]
    assert [row for row in groups.rows() if row.group == "big"][0].waiting == 1


def test_a_batch_counts_its_group_once() -> None:
    groups = Groups(1)
    buffer = deque(grouped("events", "a", index) for index in range(3))
    messages, counted, set_aside = groups.take(buffer, 10)
    assert len(messages) == 3 and counted == ("a",) and set_aside == 0
    assert groups.take(deque([grouped("events", "a", 9)]), 10)[2] == 1  # a second delivery of "a" waits


def test_waiting_is_bounded_and_released_at_a_stop() -> None:
    groups = Groups(1)
    buffer = deque(grouped("events", "a", index) for index in range(MAX_WAITING_MESSAGES + 2))
    groups.take(buffer, 1)
    assert groups.take(buffer, 1) == ([], (), MAX_WAITING_MESSAGES + 1) and groups.is_full()
    waiting = groups.take_waiting()
    assert len(waiting) == MAX_WAITING_MESSAGES + 1 and not groups.is_full() and groups.waiting_count == 0


def test_the_status_rows_are_the_busiest_groups() -> None:
    groups = Groups(1)
    buffer = deque(grouped("events", f"t{tenant}", index) for tenant in range(TOP_GROUPS + 5)
                   for index in range(tenant + 1))
    while groups.take(buffer, 1)[0]:
        pass
    rows = groups.rows()
    assert len(rows) == TOP_GROUPS
    assert rows[0].group == f"t{TOP_GROUPS + 4}" and rows[0].in_flight == 1 and rows[0].waiting == TOP_GROUPS + 4


def test_a_batch_takes_its_groups_older_waiting_messages_first() -> None:
    groups = Groups(1)
    buffer = deque(grouped("events", "a", index) for index in range(4))
    first, counted, _ = groups.take(buffer, 1)
    assert groups.take(buffer, 10) == ([], (), 3)  # a-1..a-3 wait for a-0's delivery
    buffer.append(grouped("events", "a", 4))
    groups.finish(counted, buffer)
    batch, _, _ = groups.take(buffer, 10)
    assert [message.message_id for message in batch] == ["a-1", "a-2", "a-3", "a-4"] and groups.waiting_count == 0


def test_a_message_waiting_near_the_receipt_limit_is_handed_back_to_be_released() -> None:
    groups = Groups(1)
    buffer = deque(grouped("events", "a", index) for index in range(3))
    for message in buffer:
        message.received_at = time.time()
    old = buffer[1]
    old.received_at = time.time() - 12 * 3600 + 200  # 200 s before SQS's limit: its visibility cannot be extended
    groups.take(buffer, 1)
    groups.take(buffer, 1)
    assert groups.take_overdue() == [old] and groups.waiting_count == 1
    assert groups.take_overdue() == []  # looked at most once a minute
