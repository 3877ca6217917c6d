"""A queue's run of failing receives, as its `Receiving` records it and as the log says it: an ERROR at once
when SQS refuses our credentials or signature, else a WARNING at the first failure, after a minute, after
five, then every fifteen, DEBUG in between, and a WARNING when it receives again. Never silent, never a flood."""

from __future__ import annotations

import logging
import time

from ..errors import describe_error, error_code
from ..logs import duration_text, fields
from .receive_state import Receiving

logger = logging.getLogger(__name__)

CREDENTIAL_CODES = ("SignatureDoesNotMatch", "InvalidClientTokenId", "RequestExpired", "InvalidSignatureException",
                    "AccessDenied", "AccessDeniedException", "ExpiredToken", "UnrecognizedClientException")

# WARNING lines after these many seconds of failing, then every REPEAT_WARNING_SECONDS.
WARN_AFTER_SECONDS = (60.0, 300.0)
REPEAT_WARNING_SECONDS = 900.0


def note_failure(state: Receiving, error: BaseException) -> None:
    """A receive failed: what and when, for the status page."""
    state.last_error = describe_error(error)
    state.last_error_at = time.time()


def note_success(state: Receiving) -> None:
    """A receive succeeded: the run of failures, if any, ends (and says so)."""
    state.has_received = True
    if state.failing_since is not None:
        log_recovery(state.queue.name, state.failures, time.monotonic() - state.failing_since)
    state.failures = 0
    state.failing_since = None
    state.warnings_logged = 0


def log_receive_failure(queue: str, failures: int, failing_seconds: float, warnings_logged: int,
                        error: BaseException, retry_seconds: float) -> int:
    """One more failed long poll of `queue`; returns how many WARNING (or ERROR) lines this run of failures
    has had since."""
    if failures == 1 and error_code(error).endswith(CREDENTIAL_CODES):
        logger.error("queue=%s receive refused: %s. Check the credentials, and the clock: SQS rejects "
                     "requests signed more than 5 minutes off. Retrying in %.1fs",
                     queue, describe_error(error), retry_seconds, extra=fields(queue=queue))
        return 1
    if failures == 1 or failing_seconds >= warning_due_seconds(warnings_logged):
        logger.warning("queue=%s receive failed (%d in a row), retrying in %.1fs: %s; failing for %s, "
                       "nothing is received from it meanwhile", queue, failures, retry_seconds,
                       describe_error(error), duration_text(failing_seconds), extra=fields(queue=queue))
        return warnings_logged + 1
    logger.debug("queue=%s receive failed (%d in a row), retrying in %.1fs: %s",
                 queue, failures, retry_seconds, describe_error(error), extra=fields(queue=queue))
    return warnings_logged


def log_recovery(queue: str, failures: int, failing_seconds: float) -> None:
    logger.warning("queue=%s receiving again after %d failures over %s", queue, failures,
                   duration_text(failing_seconds), extra=fields(queue=queue))


def warning_due_seconds(warnings_logged: int) -> float:
    """How long a queue must have failed before its next WARNING: 1 min, 5 min, then every 15 min."""
    if warnings_logged <= len(WARN_AFTER_SECONDS):
        return WARN_AFTER_SECONDS[warnings_logged - 1] if warnings_logged else 0.0
    return WARN_AFTER_SECONDS[-1] + REPEAT_WARNING_SECONDS * (warnings_logged - len(WARN_AFTER_SECONDS))
