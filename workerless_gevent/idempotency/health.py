"""Whether the idempotency table answers, as a keyed queue's receives (`StoreHold`), /readyz and the status
page ask it: one record per daemon, since every queue with a key shares the table. Throttling is a failure like an
outage; while it lasts, holding queues receive nothing and the table is probed with a write of our own. Only a
probe ends the hold: a table that throttles a share of its writes answers the others, and a write that got
through says only that the next probe is due now."""

from __future__ import annotations

import logging
import math
import random
import time
from collections.abc import Callable

import gevent

from ..config.idempotency import IdempotencyConfig
from ..errors import AWS_ERRORS, describe_error
from ..rules import backoff_seconds
from ..supervision import log_unexpected

logger = logging.getLogger(__name__)

MAX_HOLD_SECONDS = 30.0
TABLE_CHECK_SECONDS = 1.0  # while the table is made at start: how often the poller looks again
PROBE_WAIT_SECONDS = 1.0  # while a probe is on its way: how often the poller looks again
PROBE_TIMEOUT_SECONDS = 10.0  # a stalled probe counts as a failure
MIN_PROBE_GAP_SECONDS = 1.0  # a write that got through brings the next probe forward, to at most one a second


class StoreHealth:
    def __init__(self, config: IdempotencyConfig, rng: random.Random) -> None:
        self.config = config
        self.rng = rng
        self.failures = 0  # failed calls in a row
        self.failing_since: float | None = None  # time.monotonic() of the first of them
        self.last_error = ""
        self.retry_at = 0.0  # time.monotonic() before which a holding queue receives nothing
        self.is_table_ready = False  # the table exists (made if missing at start): claims may begin
        self.probed_at = -math.inf  # time.monotonic() of the latest probe's end
        self.due: Callable[[], None] = lambda: None  # the holding queues look again: a probe is due sooner

    @property
    def holds(self) -> bool:
        """on_store_failure = "hold": nothing delivered under a key while the table cannot be used."""
        return self.config.on_store_failure == "hold"

    @property
    def is_holding(self) -> bool:
        return self.failing_since is not None and self.holds

    @property
    def is_waiting_for_table(self) -> bool:
        return not self.is_table_ready and self.holds

    def failed(self, error: str) -> None:
        """A call failed for good: the next probe waits a longer back-off (`retry_at`)."""
        now = time.monotonic()
        self.failures += 1
        self.last_error = error
        if self.failing_since is None:
            self.failing_since = now
            if self.holds:
                logger.warning("idempotency table %s failing (%s): nothing is delivered under a key until it answers "
                               "(on_store_failure = \"hold\"); the keyed queues receive nothing meanwhile, and the "
                               "claims it refused are retried in place", self.config.table, error)
            else:
                logger.warning("idempotency table %s failing (%s): delivering without claims, at least once "
                               "(on_store_failure = \"deliver\"): copies may reach the app twice meanwhile",
                               self.config.table, error)
        seconds = backoff_seconds(self.failures, self.rng, MAX_HOLD_SECONDS, least_seconds=1.0)
        self.retry_at = now + max(1, round(seconds))

    def answered(self) -> None:
        """A probe succeeded: the hold ends."""
        if self.failing_since is not None:
            logger.info("idempotency table %s answers again after %d failed calls in %.0fs", self.config.table,
                        self.failures, time.monotonic() - self.failing_since)
        self.failures = 0
        self.failing_since = None
        self.retry_at = 0.0

    def succeeded(self) -> None:
        """A claim, completion or extension the table took while it fails: the next probe is due now (a second
        after the last at the soonest), and the holding queues hear it, so that a table back on its feet resumes
        them at once, not after the probe's back-off (up to 30 s)."""
        if self.failing_since is None:
            return
        self.retry_at = min(self.retry_at, max(time.monotonic(), self.probed_at + MIN_PROBE_GAP_SECONDS))
        self.due()

    def problem(self) -> str:
        """Why a queue with a key delivers nothing now ('' while it may)."""
        if self.is_waiting_for_table:
            return f"idempotency table {self.config.table} not usable yet: nothing delivered under a key until it is"
        if not self.is_holding or self.failing_since is None:
            return ""
        return (f"idempotency table {self.config.table} failing for {time.monotonic() - self.failing_since:.0f}s "
                f"({self.last_error}): receiving nothing under a key until a probe write succeeds")


class StoreHold:
    """The table as a keyed queue's receives see it (`delivery.queue_state.ReceiveHold`): a holding queue
    receives nothing while the table is not usable, its watcher included (every receive spends one of a
    message's receives, and a queue's redrive policy dead-letters a message received too often, delivered or
    not). Once a back-off has passed, the table is probed with a write of the daemon's own, never with a
    queue's messages; the first that succeeds resumes the queues and the claims retried in place (`wake`). What
    the queues received before is not held: their buffers are delivered, and claims that failed are retried in
    place (`guard.Idempotency`)."""

    def __init__(self, health: StoreHealth, probe: Callable[[], None], count_error: Callable[[], None],
                 wake: Callable[[], None]) -> None:
        self.health = health
        self.probe = probe  # one conditional-free write of the daemon's own item
        self.count_error = count_error
        self.wake = wake
        self.prober: gevent.Greenlet | None = None

    def hold_seconds(self) -> float:
        """Until a queue with a key may receive again: 0 unless the table is not usable yet or fails (holding)."""
        health = self.health
        if health.is_waiting_for_table:
            return TABLE_CHECK_SECONDS  # the table maker wakes the poller once it is there
        if not health.is_holding:
            return 0.0
        left = health.retry_at - time.monotonic()
        if left > 0:
            return left
        if self.prober is None or self.prober.dead:
            self.prober = gevent.spawn(self._probe)
        return PROBE_WAIT_SECONDS  # the probe's success wakes the poller sooner

    def _probe(self) -> None:
        try:
            with within(PROBE_TIMEOUT_SECONDS):
                self.probe()
        except (*AWS_ERRORS, StoreTimeout) as error:
            self.health.probed_at = time.monotonic()
            self.count_error()
            self.health.failed(describe_error(error))
            return
        except Exception as error:  # a bug: the next back-off tries again, the queues stay held meanwhile
            self.health.probed_at = time.monotonic()
            log_unexpected(logger, "idempotency table probe", error)
            self.health.failed(f"{type(error).__name__}: {error}")
            return
        self.health.probed_at = time.monotonic()
        self.health.answered()
        self.wake()

    def hold_reason(self) -> str:
        return self.health.problem()


class StoreTimeout(Exception):
    """A call to the table (a probe, a claim's extension) that did not answer in time (`within`)."""

    def __init__(self, seconds: float) -> None:
        super().__init__(f"no answer in {seconds:.0f}s")


def within(seconds: float) -> gevent.Timeout:
    """A table call's deadline: past it the call is cut and raises StoreTimeout, which callers treat as the
    table failing."""
    return gevent.Timeout(seconds, StoreTimeout(seconds))
