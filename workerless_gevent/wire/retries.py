"""Retries the way botocore's standard mode makes them, for the calls our own wire makes.

botocore's standard mode: up to 3 attempts; throttles, 5xx answers, connection errors and timeouts
are retried after `random() * 2^(attempt-1)` seconds (full jitter, at most 20 s); every retry
spends tokens from a budget shared by the client (5 per retry, 10 after a timeout) that a success
refills, so a dead endpoint quickly costs one attempt per call instead of three (no retry storm).

One step further than botocore: a call that used up its attempts (or the budget) marks the endpoint
failing, and until a call to it succeeds every call is tried once. An outage then costs one request
per call from its first seconds, paced by the callers' own back-off (receive watchers, the batchers'
probes), instead of three per call in flight until the budget runs dry.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable
from typing import TypeVar

import botocore.exceptions
import gevent

from ..rules import THROTTLE_CODES, TRANSIENT_CODES, backoff_seconds

T = TypeVar("T")

MAX_ATTEMPTS = 3
MAX_BACKOFF_SECONDS = 20.0
BUDGET_TOKENS = 500
RETRY_COST = 5
TIMEOUT_RETRY_COST = 10
SUCCESS_REFILL = 1
RETRYABLE_STATUS = (500, 502, 503, 504)
TIMEOUTS = (botocore.exceptions.ReadTimeoutError, botocore.exceptions.ConnectTimeoutError)
CONNECTION_ERRORS = (botocore.exceptions.ConnectionClosedError, botocore.exceptions.EndpointConnectionError,
                     botocore.exceptions.HTTPClientError)


def retry_cost(error: BaseException) -> int | None:
    """The budget a retry of this error costs, or None when repeating the request cannot help."""
    if isinstance(error, botocore.exceptions.ClientError):
        code = str(error.response.get("Error", {}).get("Code", ""))
        status = int(error.response.get("ResponseMetadata", {}).get("HTTPStatusCode", 0) or 0)
        if code.endswith(THROTTLE_CODES) or code.endswith(TRANSIENT_CODES) or status in RETRYABLE_STATUS:
            return RETRY_COST
        return None
    if isinstance(error, TIMEOUTS):
        return TIMEOUT_RETRY_COST
    if isinstance(error, botocore.exceptions.SSLError):
        return None  # an untrusted certificate stays untrusted
    if isinstance(error, CONNECTION_ERRORS):
        return RETRY_COST
    return None


class RetryBudget:
    """Tokens shared by every call to one endpoint: retries spend them, successes refill them."""

    def __init__(self, tokens: int = BUDGET_TOKENS) -> None:
        self.capacity = tokens
        self.tokens = tokens
        self.failing = False  # the last call that ended did so with retryable errors and no retry left

    def spend(self, cost: int) -> bool:
        if cost > self.tokens:
            return False
        self.tokens -= cost
        return True

    def refill(self, amount: int) -> None:
        self.tokens = min(self.capacity, self.tokens + amount)


class Retrier:
    """Runs one request with standard-mode retries; share one per endpoint between greenlets."""

    def __init__(self, rng: random.Random, budget: RetryBudget | None = None, max_attempts: int = MAX_ATTEMPTS,
                 cost: Callable[[BaseException], int | None] = retry_cost) -> None:
        self.rng = rng
        self.budget = budget or RetryBudget()
        self.max_attempts = max_attempts
        self.cost = cost  # which errors are retried, at what price: standard mode's by default

    def call(self, attempt: Callable[[], T], deadline: float | None = None) -> T:
        """`attempt()`, retried while the error is retryable, attempts and budget last, and the pause
        ends before `deadline` (time.monotonic()); the last error is raised as it is."""
        spent = 0
        for number in range(1, self.max_attempts + 1):
            try:
                result = attempt()
            except (botocore.exceptions.BotoCoreError, botocore.exceptions.ClientError) as error:
                cost = self.cost(error)
                if cost is None:
                    raise
                pause = backoff_seconds(number, self.rng, MAX_BACKOFF_SECONDS)
                if deadline is not None and time.monotonic() + pause >= deadline:
                    raise
                if number == self.max_attempts or self.budget.failing or not self.budget.spend(cost):
                    self.budget.failing = True
                    raise
                spent = cost
                gevent.sleep(pause)
                continue
            self.budget.failing = False
            self.budget.refill(spent or SUCCESS_REFILL)
            return result
        raise AssertionError("unreachable: the last attempt returns or raises")
