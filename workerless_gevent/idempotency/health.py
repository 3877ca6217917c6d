"""Whether the idempotency table answers, as the poller (`StoreGate`), /readyz and the status page ask it:
one record per daemon, since every queue with a key shares the table."""

from __future__ import annotations

import logging
import random
import time

from ..config.idempotency import IdempotencyConfig
from ..rules import backoff_seconds

logger = logging.getLogger(__name__)

MAX_HOLD_SECONDS = 30.0
TABLE_CHECK_SECONDS = 1.0  # a failing table is tried again (one receive's claims) at least this often


class StoreHealth:
    def __init__(self, config: IdempotencyConfig, rng: random.Random) -> None:
        self.config = config
        self.rng = rng
        self.failures = 0  # failed calls in a row
        self.failing_since: float | None = None  # time.monotonic() of the first of them
        self.last_error = ""
        self.retry_at = 0.0  # time.monotonic() before which a holding queue receives nothing
        self.is_table_ready = False  # the table exists (made if missing at start): claims may begin

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

    def failed(self, error: str) -> int:
        """A call failed for good: returns how long (whole seconds) held messages stay invisible."""
        now = time.monotonic()
        self.failures += 1
        self.last_error = error
        if self.failing_since is None:
            self.failing_since = now
            if self.holds:
                logger.warning("idempotency table %s failing (%s): nothing is delivered under a key until it answers "
                               "(on_store_failure = \"hold\"); the messages stay in their queues", self.config.table,
                               error)
            else:
                logger.warning("idempotency table %s failing (%s): delivering without claims, at least once "
                               "(on_store_failure = \"deliver\"): copies may reach the app twice meanwhile",
                               self.config.table, error)
        seconds = max(1, round(backoff_seconds(self.failures, self.rng, MAX_HOLD_SECONDS, least_seconds=1.0)))
        self.retry_at = now + seconds
        return seconds

    def answered(self) -> None:
        if self.failing_since is not None:
            logger.info("idempotency table %s answers again after %d failed calls in %.0fs", self.config.table,
                        self.failures, time.monotonic() - self.failing_since)
        self.failures = 0
        self.failing_since = None
        self.retry_at = 0.0

    def problem(self) -> str:
        """Why a queue with a key delivers nothing now ('' while it may)."""
        if self.is_waiting_for_table:
            return f"idempotency table {self.config.table} not usable yet: nothing delivered under a key until it is"
        if not self.is_holding or self.failing_since is None:
            return ""
        return (f"idempotency table {self.config.table} failing for {time.monotonic() - self.failing_since:.0f}s "
                f"({self.last_error}): nothing delivered under a key until it answers")


class StoreGate:
    """The poller's view of the table (`delivery.flow.SharedLimit`): a holding queue waits while it fails."""

    limit_id = "idempotency"

    def __init__(self, health: StoreHealth) -> None:
        self.health = health

    def wait_seconds(self, has_work: bool) -> float:
        health = self.health
        if health.is_waiting_for_table:
            return TABLE_CHECK_SECONDS  # the table maker wakes the poller once it is there
        return max(0.0, health.retry_at - time.monotonic()) if health.is_holding else 0.0

    def room(self) -> int:
        return 1_000_000

    def start(self) -> bool:
        return False

    def finish(self) -> None:
        pass

    def lapsed_reason(self) -> str:
        return self.health.problem()
