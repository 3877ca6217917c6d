"""redrive's Quota: --max reserved before each receive, --rate one schedule for every worker."""

from __future__ import annotations

from workerless_gevent.commands.quota import Quota


class FakeTime:
    def __init__(self) -> None:
        self.now = 100.0
        self.slept: list[float] = []

    def clock(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.slept.append(seconds)
        self.now += seconds


def test_max_is_reserved_before_the_receives_and_what_they_did_not_bring_is_free_again() -> None:
    time = FakeTime()
    quota = Quota(25, None, time.clock, time.sleep)
    assert [quota.take() for _ in range(5)] == [10, 10, 5, 0, 0]
    quota.give_back(4)  # a receive that asked for 10 brought 6
    assert [quota.take(), quota.take()] == [4, 0]
    assert time.slept == []


def test_without_max_every_receive_may_ask_for_ten() -> None:
    time = FakeTime()
    quota = Quota(None, None, time.clock, time.sleep)
    assert {quota.take() for _ in range(100)} == {10}


def test_rate_gives_every_batch_its_slot_on_one_schedule() -> None:
    time = FakeTime()
    quota = Quota(None, 20.0, time.clock, time.sleep)
    ready = []
    for _ in range(6):  # six workers asking one after another: each waits for its batch's last slot
        assert quota.take() == 10
        ready.append(round(time.now - 100.0, 6))
    assert ready == [0.5, 1.0, 1.5, 2.0, 2.5, 3.0]  # 60 messages in 3 s: 20 a second


def test_a_rate_under_ten_makes_batches_of_a_second_at_most() -> None:
    time = FakeTime()
    quota = Quota(7, 3.0, time.clock, time.sleep)
    assert [quota.take(), quota.take(), quota.take(), quota.take()] == [3, 3, 1, 0]
    assert round(time.now - 100.0, 6) == round(7 / 3, 6)


def test_slots_given_back_bring_later_batches_forward_and_never_past_the_rate() -> None:
    time = FakeTime()
    quota = Quota(None, 10.0, time.clock, time.sleep)
    assert quota.take() == 10  # ready at 1 s
    quota.give_back(7)  # brought 3
    assert quota.take() == 10  # 13 slots: ready at 1.3 s, 13 messages sent by then
    assert round(time.now - 100.0, 6) == 1.3
