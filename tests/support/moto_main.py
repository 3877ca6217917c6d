"""moto's server with its SQS state guarded; run as `python -P moto_main.py -H HOST -p PORT`.

(-P keeps this folder off sys.path: its moto.py is not moto.)

moto 5.2 serves each request on its own thread but its SQS backend takes no lock: two
concurrent ReceiveMessage calls can both see a message as visible and both hand it out, and a
receive that copies `pending_message_groups` while a delete changes it fails with "Set changed
size during iteration" (checked by experiment: 8 threads receiving 1,500 messages in process
were handed 2 duplicates). Real SQS does neither on this scale, and the tests count duplicates,
so every SQS backend call runs under one lock here. A long poll waits outside the lock and tries
again, as moto's own loop does, so other calls go on meanwhile.

Its receive was the slowest part of every test that keeps a backlog: for each message it hands
out, moto checks the retention period through `get_queue_attributes`, which works out every
attribute, the three approximate counts included (each a pass over the whole queue reading the
clock per message through datetime arithmetic). A receive of 10 from a queue of 700 took about
1 s (measured in process: 98 % of it in that check), so a daemon at concurrency 4 drained
three such queues at 14 messages a second. Here the check reads the queue's retention period
directly, and the SQS models read the clock with `time.time()`: the same answers, a receive
in milliseconds.

Its request recorder (which the tests read Lambda invocations from) writes an entry and then its
newline in two writes: two concurrent requests could share a line. Recording takes a lock too.
"""

from __future__ import annotations

import functools
import logging
import sys
import threading
import time
from typing import Any, Callable

import moto.sqs.models as sqs_models
from moto.dynamodb.models import DynamoDBBackend
from moto.moto_api._internal.recorder.models import Recorder
from moto.server import main
from moto.sqs.models import SQSBackend

GUARD = threading.RLock()
CALLS = threading.local()  # depth: inside a logged call
CALLS_LOG = logging.getLogger("sqs-calls")
POLL_SECONDS = 0.05  # the shortest wait between two tries of a long poll that found nothing


def guarded(method: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(method)
    def call(*args: Any, **kwargs: Any) -> Any:
        with GUARD:
            return logged(method, args, kwargs)
    return call


def logged(method: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    """Call `method`, logging it when it is a request's own call (not one backend method calling another).

    The log is moto.log, which a failing test prints from its start on (tests/conftest.py).
    """
    if getattr(CALLS, "depth", 0) or method.__name__ == "get_queue":  # moto's responses look the queue up first
        return method(*args, **kwargs)
    CALLS.depth = 1
    queue = next((arg for arg in args[1:2] if isinstance(arg, str)), "")
    try:
        result = method(*args, **kwargs)
    except Exception as error:
        CALLS_LOG.info("sqs %s %s -> %s", method.__name__, queue, type(error).__name__)
        raise
    finally:
        CALLS.depth = 0
    CALLS_LOG.info("sqs %s %s", method.__name__, queue)
    return result


def guarded_receive(receive: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(receive)
    def call(self: SQSBackend, queue_name: str, count: int, wait_seconds_timeout: int,
             visibility_timeout: int, message_attribute_names: list[str] | None = None) -> Any:
        started = time.monotonic()
        try:
            CALLS.depth = 1
            messages = receive_soon(receive, self, queue_name, count, wait_seconds_timeout, visibility_timeout,
                                    message_attribute_names)
        except Exception as error:
            CALLS_LOG.info("sqs receive_message %s -> %s", queue_name, type(error).__name__)
            raise
        finally:
            CALLS.depth = 0
        CALLS_LOG.info("sqs receive_message %s wait=%s -> %d messages after %.2fs", queue_name,
                       wait_seconds_timeout, len(messages), time.monotonic() - started)
        return messages
    return call


def receive_soon(receive: Callable[..., Any], backend: SQSBackend, queue_name: str, count: int,
                 wait_seconds_timeout: int, visibility_timeout: int, message_attribute_names: list[str] | None) -> Any:
    """A long poll that waits outside the guard and tries again, as moto's own loop does."""
    deadline = time.monotonic() + (wait_seconds_timeout or 0)
    while True:
        started = time.monotonic()
        with GUARD:
            messages = receive(backend, queue_name, count, 0, visibility_timeout, message_attribute_names)
            queue = backend.get_queue(queue_name)
        left = deadline - time.monotonic()
        if messages or left <= 0:
            return messages
        queue.wait_for_messages(min(1.0, left))  # wakes when a message is sent
        spent = time.monotonic() - started
        if spent < POLL_SECONDS:  # visible messages none of which may be handed out (FIFO groups)
            time.sleep(min(POLL_SECONDS - spent, max(0.0, deadline - time.monotonic())))


for name, member in list(vars(SQSBackend).items()):
    if callable(member) and not name.startswith("_") and name != "receive_message":
        setattr(SQSBackend, name, guarded(member))
SQSBackend.receive_message = guarded_receive(SQSBackend.receive_message)  # type: ignore[method-assign]

# Nor does its DynamoDB backend: a conditional update reads the item, checks the condition and writes it back
# without a lock, so two daemons raising their fleet shares at once could both pass a `version = :v`
# condition. DynamoDB itself applies each item's writes one at a time; here every call runs alone.
TABLES = threading.RLock()


def alone(method: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(method)
    def call(*args: Any, **kwargs: Any) -> Any:
        with TABLES:
            return method(*args, **kwargs)
    return call


for name, member in list(vars(DynamoDBBackend).items()):
    if callable(member) and not name.startswith("_"):
        setattr(DynamoDBBackend, name, alone(member))


def unix_time(dt: Any = None) -> float:
    """moto.core.utils.unix_time without building two datetimes to read the clock."""
    return time.time() if dt is None else _unix_time(dt)


def unix_time_millis(dt: Any = None) -> float:
    return unix_time(dt) * 1000.0


def retained(self: SQSBackend, queue_name: str, message: Any) -> bool:
    """moto's retention check, reading the one attribute it needs instead of all of them."""
    retention_seconds = self.get_queue(queue_name).message_retention_period
    return bool(retention_seconds + message.sent_timestamp / 1000 > unix_time())


def is_visible(self: Any) -> bool:
    """moto's `Message.visible` is `now > visible_at`, which on its own clock (datetime, microseconds) is true
    a moment after a visibility change to 0. On the millisecond clock above the two readings are often the same
    millisecond: the released message read as invisible and stayed marked in flight, which closed its FIFO group
    until a receive's scan reached it, so a later message of the group was handed out first (a CI failure of
    test_fifo_reliability: G-3, G-4 before G-2). SQS makes a message visible when its timeout ends: `>=`."""
    return bool(unix_time_millis() >= self.visible_at)


_unix_time = sqs_models.unix_time
sqs_models.unix_time = unix_time
sqs_models.unix_time_millis = unix_time_millis
sqs_models.Message.visible = property(is_visible)  # type: ignore[assignment]
SQSBackend.is_message_valid_based_on_retention_period = guarded(retained)  # type: ignore[method-assign]
RECORDING = threading.Lock()
_record_request = Recorder._record_request


def record_request_alone(self: Recorder, *args: Any, **kwargs: Any) -> None:
    with RECORDING:
        _record_request(self, *args, **kwargs)


Recorder._record_request = record_request_alone  # type: ignore[method-assign]

if __name__ == "__main__":
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("%(asctime)s %(message)s"))
    CALLS_LOG.addHandler(handler)
    CALLS_LOG.setLevel(logging.INFO)
    CALLS_LOG.propagate = False
    main()
