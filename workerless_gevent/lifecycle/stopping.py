"""The stop's one deadline, `shutdown_timeout` after the first stop signal: SIGTERM to exit takes at most that
(and the process's own end, well under a second), whatever is stalled downstream. The deliveries and the receives
on their way get the deadline less the last flushes' share; the releases, the `completed` writes, the deletes
and visibility changes, the metrics and the spans then share what remains, each within its own cap too."""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Callable, Sequence

import gevent
import gevent.event

from ..delivery.queue import SqsQueue
from ..logs import fields
from ..message import Message
from ..supervision import log_greenlet_failure
from .engine import Engine

logger = logging.getLogger(__name__)

# The last flushes' share of the budget: a healthy round trip to SQS, DynamoDB, CloudWatch or the collector takes
# milliseconds, and these seconds leave room for a few slow ones. The delete flush had 3 s after the grace period
# before there was one deadline; a small budget gives a quarter of itself instead (1.5 s of 6 s).
FLUSH_SHARE_SECONDS = 3.0
FLUSH_SHARE_FRACTION = 0.25
COMPLETIONS_SHARE = 0.5  # of the flushes' share, first: the `completed` writes, whose deletes follow them
KILL_SECONDS = 2.0  # for the slots still running at the cut to end
BACKGROUND_JOIN_SECONDS = 3.0  # for the background loops to end once the stop is done
SAY_SECONDS = 0.25  # past the deadline, for the metrics and spans cut at it to say what they left


def flush_share(timeout_seconds: float) -> float:
    return min(FLUSH_SHARE_SECONDS, timeout_seconds * FLUSH_SHARE_FRACTION)


class StopDeadline:
    """Times (time.monotonic()) of one stop: `cut` ends the deliveries and the wait for receives, `deadline` the
    flushes. Set once, at the first stop signal: a repeated one (Heroku sends SIGTERM again) does not move them."""

    def __init__(self, requested_at: float, timeout_seconds: float) -> None:
        self.requested_at = requested_at
        self.flush_seconds = flush_share(timeout_seconds)
        self.deadline = requested_at + timeout_seconds
        self.cut = self.deadline - self.flush_seconds

    @property
    def completions_until(self) -> float:
        """The `completed` writes (and the releases) end here, leaving the rest of the share to the deletes."""
        return self.deadline - self.flush_seconds * (1 - COMPLETIONS_SHARE)

    def force(self, now: float) -> None:
        """A second stop signal: the deliveries and receives are cut now, the flushes get at most their share."""
        self.cut = min(self.cut, now)
        self.deadline = min(self.deadline, now + self.flush_seconds)

    def remaining(self, until: float | None = None, cap: float = math.inf, now: float | None = None) -> float:
        """Seconds from `now` to `until` (the deadline by default), within `cap`; never below 0."""
        now = time.monotonic() if now is None else now
        return max(0.0, min(cap, (self.deadline if until is None else until) - now))


class Stop:
    """One stop of the daemon, each step within its `StopDeadline`."""

    def __init__(self, engine: Engine, deadline: StopDeadline, forced: gevent.event.Event,
                 final_flushes: Sequence[Callable[[float], None]]) -> None:
        self.engine = engine
        self.deadline = deadline
        self.forced = forced  # a second signal: no more waiting for deliveries or receives
        self.final_flushes = final_flushes  # metrics and spans: each takes the seconds it may use
        self.released = 0  # buffered, or brought back by receives that landed during the stop
        self.releases: list[tuple[gevent.Greenlet, list[Message]]] = []

    def run(self) -> None:
        """Release the buffers at once (and what receives on their way bring, as it lands), give deliveries and
        receives until the cut, release the rest; then the last writes, flushes, metrics and spans."""
        engine, deadline = self.engine, self.deadline
        engine.fleet.wind_down()
        engine.stop_gates()
        engine.stop_receiving(self.release)
        for queue in self.queues():
            queue.drain()  # the releases and the last deletes go out at once, not in fuller batches
        self.wait_for_deliveries()
        self.wait_for_receives()
        background = [gevent.spawn(engine.fleet.leave)]  # nothing runs under the shares any more
        background += [gevent.spawn(flush, deadline.remaining()) for flush in self.final_flushes]
        # the last successes' `completed` writes, which their deletes wait for (a reload's predecessors' too)
        # and the claims retried in place, given up at the stop: their releases go out with the last flush
        retries: list[gevent.Greenlet] = []
        for idempotency in [*engine.replaced_idempotency, engine.idempotency]:
            if idempotency is not None:
                idempotency.completions.drain(deadline.remaining(deadline.completions_until))
                retries += list(idempotency.pending.retries)
        gevent.joinall([*retries, *(greenlet for greenlet, _ in self.releases)],
                       timeout=deadline.remaining(deadline.completions_until))
        gevent.joinall([gevent.spawn(queue.flush, deadline.remaining()) for queue in self.queues()])
        self.name_unreleased()
        gevent.joinall(background, timeout=deadline.remaining() + SAY_SECONDS)

    def release(self, messages: list[Message]) -> None:
        """Received, never to be delivered now: visible again at once, and counted for the stop's last line."""
        self.released += len(messages)
        self.spawn_release(lambda: self.engine.settler.release(messages), messages)

    def spawn_release(self, release: Callable[[], None], messages: list[Message]) -> None:
        # Its own greenlet: giving the messages' idempotency claims up comes first and waits on DynamoDB, seconds
        # if it stalls, and neither the stop's steps nor a receive landing meanwhile may wait for that.
        if messages:
            greenlet = gevent.spawn(release)
            greenlet.link_exception(log_greenlet_failure)
            self.releases.append((greenlet, messages))

    def wait_for_deliveries(self) -> None:
        """Until they end, the cut or a second signal; then the slots are killed and what they held released."""
        engine, deadline = self.engine, self.deadline
        waiter = gevent.spawn(engine.slots.pool.join)
        gevent.wait([waiter, self.forced], count=1, timeout=deadline.remaining(deadline.cut))
        waiter.kill(block=False)
        if not engine.in_flight:
            return
        logger.warning("%d deliveries still running after the grace period; releasing them (%.1fs after the stop "
                       "request, the last %.1fs left to the flushes)", len(engine.in_flight),
                       time.monotonic() - deadline.requested_at, deadline.flush_seconds)
        engine.slots.pool.kill(block=True, timeout=deadline.remaining(cap=KILL_SECONDS))
        for work in list(engine.in_flight):
            self.spawn_release(lambda work=work: engine.settler.abandon(work),  # type: ignore[misc]
                               [message for message in work.messages if not message.settled])

    def wait_for_receives(self) -> None:
        """The receives on their way land (what they bring is released) until the cut, then the rest are abandoned."""
        since = self.deadline.requested_at
        self.engine.poller.wait_for_receives(self.engine.draining, since, self.deadline.cut - since, self.forced)

    def queues(self) -> list[SqsQueue]:
        parts = self.engine.parts
        return [*parts.queues.values(), *parts.dead_letter_queues.values(), *self.engine.replaced_queues]

    def name_unreleased(self) -> None:
        """Releases still giving idempotency claims up at the deadline never asked SQS for anything."""
        by_queue: dict[str, list[str]] = {}
        for greenlet, messages in self.releases:
            if not greenlet.dead:
                for message in messages:
                    by_queue.setdefault(message.queue, []).append(message.message_id)
        for queue, ids in by_queue.items():
            logger.error("queue=%s %d messages not released by the stop's deadline (their idempotency claims were "
                         "still being given up): SQS delivers them again once their visibility timeout ends: %s",
                         queue, len(ids), ",".join(ids), extra=fields(queue=queue))
