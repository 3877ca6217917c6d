"""delivery/outcomes.py pure parts: retry backoff and dead-letter attributes."""

from __future__ import annotations

import time
from typing import Any

import pytest

from tests.unit.sqs_messages import binary_attribute, make_message, raw_message, string_attribute
from workerless_gevent.config.model import QueueConfig
from workerless_gevent.delivery.dead_letters import dead_letter_attributes
from workerless_gevent.delivery.leases import Leases
from workerless_gevent.delivery.outcomes import Settler, retry_delay_seconds
from workerless_gevent.delivery.queue import SqsQueue
from workerless_gevent.message import Message
from workerless_gevent.metrics import Registry
from workerless_gevent.rules import MAX_VISIBILITY_SECONDS
from workerless_gevent.targets import Outcome, Result

FAILURE = Outcome.failure("HTTP 500", "the app answered HTTP 500")


def queue(**fields: Any) -> SqsQueue:
    return SqsQueue(None, QueueConfig(name="payments", **fields), "url", "arn", lambda q, n: None)


def test_cap_is_sqs_maximum_visibility() -> None:
    assert MAX_VISIBILITY_SECONDS == 43200


@pytest.mark.parametrize("receives", [1, 2, 5, 30])
def test_constant_backoff_is_the_error_visibility_timeout(receives: int) -> None:
    payments = queue(error_visibility_timeout=7, backoff="constant")
    assert retry_delay_seconds(payments, receives) == 7


@pytest.mark.parametrize(
    ("receives", "seconds"),
    [(1, 2), (2, 4), (3, 8), (4, 16), (10, 1024), (15, 32768), (16, 43200), (21, 43200), (1000, 43200)],
)
def test_exponential_backoff_doubles_per_receive_and_is_capped(receives: int, seconds: int) -> None:
    payments = queue(error_visibility_timeout=2, backoff="exponential")
    assert retry_delay_seconds(payments, receives) == seconds


def test_exponential_backoff_of_zero_stays_zero() -> None:
    payments = queue(error_visibility_timeout=0, backoff="exponential")
    assert retry_delay_seconds(payments, 9) == 0


def test_large_constant_timeout_is_kept() -> None:
    payments = queue(error_visibility_timeout=43200, backoff="constant")
    assert retry_delay_seconds(payments, 3) == 43200


def test_exponential_backoff_never_exceeds_the_cap() -> None:
    for base in (1, 3, 600, 43200):
        payments = queue(error_visibility_timeout=base, backoff="exponential")
        delays = [retry_delay_seconds(payments, n) for n in range(1, 60)]
        assert delays == sorted(delays)
        assert max(delays) <= MAX_VISIBILITY_SECONDS
        assert delays[0] == base


def test_dead_letter_attributes_keep_originals_and_add_ours() -> None:
    message = make_message(receive_count=10, message_attributes={
        "color": string_attribute("red"),
        "size": string_attribute("3.5", "Number"),
        "blob": binary_attribute(b"\x00\x01"),
    })
    assert dead_letter_attributes("payments", message, FAILURE) == {
        "color": {"DataType": "String", "StringValue": "red"},
        "size": {"DataType": "Number", "StringValue": "3.5"},
        "blob": {"DataType": "Binary", "BinaryValue": b"\x00\x01"},
        "workerless.source_queue": {"DataType": "String", "StringValue": "payments"},
        "workerless.receive_count": {"DataType": "Number", "StringValue": "10"},
        "workerless.error": {"DataType": "String", "StringValue": "HTTP 500: the app answered HTTP 500"},
    }


def test_dead_letter_attributes_drop_list_values_sqs_cannot_send() -> None:
    message = make_message(message_attributes={
        "color": {"StringValue": "red", "StringListValues": [], "BinaryListValues": [], "DataType": "String"},
    })
    assert dead_letter_attributes("payments", message, FAILURE)["color"] == {"DataType": "String", "StringValue": "red"}


@pytest.mark.parametrize(
    ("originals", "ours"),
    [
        (0, ["workerless.source_queue", "workerless.receive_count", "workerless.error"]),
        (7, ["workerless.source_queue", "workerless.receive_count", "workerless.error"]),
        (8, ["workerless.source_queue", "workerless.receive_count"]),
        (9, ["workerless.source_queue"]),
        (10, []),
    ],
)
def test_dead_letter_attributes_stay_within_ten(originals: int, ours: list[str]) -> None:
    attributes = {f"a{i}": string_attribute(str(i)) for i in range(originals)}
    result = dead_letter_attributes("payments", make_message(message_attributes=attributes), FAILURE)
    assert len(result) <= 10
    assert [name for name in result if name.startswith("workerless.")] == ours
    assert all(result[f"a{i}"] == {"DataType": "String", "StringValue": str(i)} for i in range(originals))


def test_dead_letter_error_is_truncated_to_1000_characters() -> None:
    outcome = Outcome.failure("FunctionError:Unhandled", "x" * 5000)
    text = dead_letter_attributes("payments", make_message(), outcome)["workerless.error"]["StringValue"]
    assert len(text) == 1000
    assert text.startswith("FunctionError:Unhandled: xxx")


def test_dead_letter_error_without_details_says_failure() -> None:
    outcome = Outcome(Result.FAILURE)
    text = dead_letter_attributes("payments", make_message(), outcome)["workerless.error"]["StringValue"]
    assert text == "failure"


def test_exponential_backoff_doubles_on_the_tries_max_retries_counts_not_on_the_receives() -> None:
    """A message released ten times behind a poison one (receives that did not deliver it) fails at its 11th
    receive: its first counted try waits the error visibility timeout, not 2 x 2^10 s."""
    payments = queue(error_visibility_timeout=2, backoff="exponential")
    settler = Settler({"payments": payments}, {}, Registry(), Leases({"payments": payments}))
    message = Message.from_sqs("payments", raw_message(receive_count=11), received_at=time.time(),
                               visible_until=time.monotonic() + 30)
    for _ in range(10):
        settler.note_undelivered(message)
    assert settler.decide(payments, message, Outcome.failure("Boom", "failed"), "default") == ("retry", 2)
    settler.counts.note_undelivered(make_message())  # another message's receives change nothing of its own
    assert settler.decide(payments, message, Outcome.failure("Boom", "failed again"), "default") == ("retry", 2)
