"""The poller on moto, in process: one watcher per idle queue, prompt wake-up, strict order, stop."""

from __future__ import annotations

import random
import time
from typing import Any, Callable

import gevent
import gevent.event

from tests.integration.helpers import build_sqs_queue
from tests.support import CountingProxy, Queue, count_visible, wait_until
from tests.support.moto import build_client
from workerless_gevent.delivery.flow import TargetFlow
from workerless_gevent.delivery.outcomes import Settler
from workerless_gevent.delivery.leases import Leases
from workerless_gevent.message import Message
from workerless_gevent.metrics import Registry
from workerless_gevent.delivery.ordering import by_priority
from workerless_gevent.delivery.poller import Poller
from workerless_gevent.delivery.queue_state import QueueState
from workerless_gevent.targets import Outcome, Pause


class Rig:
    """Queues behind the counting proxy, their states, a handler and a poller, as the daemon wires them."""

    def __init__(self, proxy: CountingProxy, queues: list[Queue], poll_for: int = 2) -> None:
        self.registry = Registry()
        client = build_client("sqs", proxy.url)
        self.queues = {q.name: build_sqs_queue(client, q, self.registry.count) for q in queues}
        self.handler = Settler(self.queues, {}, self.registry, Leases(self.queues))
        self.pauses = {name: Pause() for name in self.queues}
        self.states = [QueueState(queue, 1, self.pauses[name].remaining_seconds)
                       for name, queue in self.queues.items()]
        self.stopping = gevent.event.Event()
        self.poller = Poller(self.states, by_priority, batch_size=10, poll_for_seconds=poll_for, sleep_seconds=0,
                             rng=random.Random(1), stopping=self.stopping, admit=self.handler.admit)

    def stop_poller(self) -> list[Message]:
        """As the daemon's stop: the buffers back, the receives on their way let land (a long poll ends on its own)
        and released; then none is left."""
        buffered = self.poller.stop(self.handler.release)
        self.poller.wait_for_receives((), time.monotonic(), 5.0, gevent.event.Event())
        return buffered

    def stop(self) -> None:
        self.stopping.set()
        self.poller.wake.set()
        self.handler.release(self.stop_poller())
        for queue in self.queues.values():
            queue.flush(5.0)


def long_polls(proxy: CountingProxy, name: str) -> list[Any]:
    return [r for r in proxy.pending("ReceiveMessage")
            if r.params["QueueUrl"].endswith("/" + name) and r.params.get("WaitTimeSeconds") == 2]


def test_idle_queues_get_one_watcher_each_and_wake_the_poller_at_once(
    counting_proxy: CountingProxy, sqs: Any, make_queue: Callable[..., Queue]
) -> None:
    queues = [make_queue(), make_queue(), make_queue()]
    rig = Rig(counting_proxy, queues)
    waiter = gevent.spawn(rig.poller.wait_for_work)
    try:
        wait_until(lambda: all(len(long_polls(counting_proxy, q.name)) == 1 for q in queues), 10,
                   message=lambda: f"pending: {[r.params for r in counting_proxy.pending()]}")
        assert all(state.receiving.watcher is not None and not state.receiving.is_ready for state in rig.states)
        sent = time.monotonic()
        sqs.send_message(QueueUrl=queues[2].url, MessageBody="wake")
        work = waiter.get(timeout=10)
        assert work is not None and [m.body for m in work.messages] == ["wake"]
        assert time.monotonic() - sent < 1.0
        assert work.state is rig.states[2] and work.state.receiving.is_ready
        for queue in queues:  # never two receives at once on one queue
            spans = sorted((r.started, r.ended or float("inf")) for r in counting_proxy.requests
                           if r.action == "ReceiveMessage" and r.params["QueueUrl"].endswith("/" + queue.name))
            assert all(later[0] >= earlier[1] for earlier, later in zip(spans, spans[1:])), spans
        rig.handler.settle_message(work.state.queue, work.messages[0], Outcome.success(), "default")
    finally:
        waiter.kill()
        rig.stop()


def test_strict_order_takes_the_higher_queue_first_whatever_was_buffered(
    counting_proxy: CountingProxy, sqs: Any, make_queue: Callable[..., Queue]
) -> None:
    high, low = make_queue(), make_queue()
    rig = Rig(counting_proxy, [high, low])
    sqs.send_message(QueueUrl=low.url, MessageBody="low-1")
    sqs.send_message(QueueUrl=low.url, MessageBody="low-2")
    try:
        first = rig.poller.wait_for_work()
        assert first is not None and first.messages[0].body.startswith("low-")
        assert len(rig.states[1].receiving.buffer) == 1  # the rest of that receive waits in the buffer
        sqs.send_message(QueueUrl=high.url, MessageBody="high")
        wait_until(lambda: rig.states[0].receiving.buffer or rig.states[0].receiving.is_ready, 10, message="high never arrived")
        second = rig.poller.wait_for_work()
        assert second is not None and [m.body for m in second.messages] == ["high"]
        third = rig.poller.wait_for_work()
        assert third is not None and third.messages[0].body.startswith("low-")
    finally:
        rig.stop()


def test_a_paused_target_keeps_its_queue_waiting(
    counting_proxy: CountingProxy, sqs: Any, make_queue: Callable[..., Queue]
) -> None:
    queue = make_queue()
    rig = Rig(counting_proxy, [queue])
    sqs.send_message(QueueUrl=queue.url, MessageBody="later")
    rig.pauses[queue.name].extend(1.0)
    started = time.monotonic()
    try:
        work = rig.poller.wait_for_work()
        assert work is not None and work.messages[0].body == "later"
        assert time.monotonic() - started >= 0.95
    finally:
        rig.stop()


def test_stop_cancels_watchers_and_hands_back_the_buffer(
    counting_proxy: CountingProxy, sqs: Any, make_queue: Callable[..., Queue]
) -> None:
    busy, idle = make_queue(), make_queue()
    rig = Rig(counting_proxy, [idle, busy])  # idle first: it is received from, found empty and watched
    for body in ("a", "b", "c"):
        sqs.send_message(QueueUrl=busy.url, MessageBody=body)
    work = rig.poller.wait_for_work()
    assert work is not None
    assert rig.states[0].receiving.watcher is not None and not rig.states[0].receiving.is_ready
    waiter = gevent.spawn(rig.poller.wait_for_work)
    rig.stopping.set()
    rig.poller.wake.set()
    assert waiter.get(timeout=5) is None  # stopping ends the wait for work
    buffered = rig.stop_poller()
    assert sorted(m.body for m in buffered) == sorted({"a", "b", "c"} - {work.messages[0].body})
    assert all(state.receiving.watcher is None for state in rig.states)
    rig.handler.release(buffered)
    rig.queues[busy.name].flush(5.0)
    wait_until(lambda: count_visible(sqs, busy.url) == 2, 5, message="buffer not released")



def short_receives(proxy: CountingProxy, name: str) -> int:
    return sum(1 for r in proxy.requests if r.action == "ReceiveMessage"
               and r.params["QueueUrl"].endswith("/" + name) and not r.params.get("WaitTimeSeconds"))


def test_the_next_receive_starts_before_the_buffer_runs_dry_only_for_slots_that_want_it(
    counting_proxy: CountingProxy, sqs: Any, make_queue: Callable[..., Queue]
) -> None:
    queue = make_queue()
    for start in (0, 10, 20):
        sqs.send_message_batch(QueueUrl=queue.url, Entries=[
            {"Id": str(i), "MessageBody": f"m{start + i}"} for i in range(10)])
    rig = Rig(counting_proxy, [queue])
    state = rig.states[0]
    try:
        # one free slot, no delivery has ended yet: one receive, and the 9 left wait in the buffer
        assert rig.poller.wait_for_work(free_slots=1) is not None
        assert (state.receiving.receives, short_receives(counting_proxy, queue.name), len(state.receiving.buffer)) == (0, 1, 9)
        # 12 free slots want more than the 8 left after this take: the next receive goes out now
        assert rig.poller.wait_for_work(free_slots=12) is not None
        assert state.receiving.receives == 1  # started at once (receives are spawned as they are decided)
        wait_until(lambda: short_receives(counting_proxy, queue.name) == 2 and len(state.receiving.buffer) == 18, 10,
                   message=lambda: f"{short_receives(counting_proxy, queue.name)} receives, {len(state.receiving.buffer)} held")
        # deliveries that ended moments apart make busy slots count as soon free, at that pace
        for _ in range(3):
            work = rig.poller.wait_for_work(free_slots=1)
            assert work is not None
            rig.poller.finish(work, set())
        assert rig.poller.finish_interval < 0.5 and state.receiving.receive_seconds > 0
        rig.poller.finish_interval = state.receiving.receive_seconds / 40  # 40 deliveries end per receive round trip
        assert rig.poller.wait_for_work(free_slots=1, busy_slots=49) is not None  # 14 held, ~40 soon wanted
        # as many receives as cover the 40 (Little's law), as far as the receive width allows
        assert state.receiving.receives >= 2
        wait_until(lambda: short_receives(counting_proxy, queue.name) >= 3, 10, message="no receive ahead")
        # and none while nothing is expected to free up
        rig.poller.finish_interval = float("inf")
        wait_until(lambda: state.receiving.receives == 0, 10)
        assert rig.poller.wait_for_work(free_slots=1, busy_slots=49) is not None
        assert state.receiving.receives == 0 and len(state.receiving.buffer) > 0
    finally:
        rig.stop()


def test_a_rate_limited_queue_is_received_for_at_its_rate_not_for_every_free_slot(
    counting_proxy: CountingProxy, sqs: Any, make_queue: Callable[..., Queue]
) -> None:
    queue = make_queue()
    for start in range(0, 100, 10):
        sqs.send_message_batch(QueueUrl=queue.url, Entries=[{"Id": str(i), "MessageBody": str(start + i)}
                                                             for i in range(10)])
    rig = Rig(counting_proxy, [queue])
    (state,) = rig.states
    state.flow = TargetFlow("app", ceiling=50, rate=4)  # 4 deliveries a second, bursts of 4
    try:
        taken = []
        for _ in range(8):  # two seconds of deliveries at the rate, with 50 slots free
            work = rig.poller.wait_for_work(free_slots=50)
            assert work is not None
            taken.append(work)
            rig.poller.finish(work, set())
        wait_until(lambda: state.receiving.receives == 0, 10, message="receives still on their way")
        held = len(state.receiving.buffer) + len(taken)
        print(f"rate 4/s, 50 free slots: {len(taken)} taken, {len(state.receiving.buffer)} buffered")
        # One receive of 10 at a time covers a rate of 4/s; received for the 50 free slots it would be 50.
        assert held <= 20, held
    finally:
        rig.handler.release([m for work in taken for m in work.messages])
        rig.stop()
