"""The rules more than one layer follows, written once: AWS's throttle and transient error codes, jittered
exponential backoff, which queues are FIFO, SQS's 12-hour limit on a receipt's visibility, what counts as a
loopback host or URL, and how an idempotency key is shown outside its table (the HTTP target's header and the log
lines). Pure, and it imports only the standard library, so `wire/` may use it too without knowing anything of the
daemon."""

from __future__ import annotations

import hashlib
import ipaddress
import random
import urllib.parse

MAX_DOUBLINGS = 20  # past every cap of the daemon's (2^20 x 0.25 s is three days): no float overflow
# Error codes botocore's standard mode retries, SQS's own throttles among them (matched by suffix:
# SQS's query-compatible codes may carry a prefix such as "AWS.SimpleQueueService.").
THROTTLE_CODES = ("Throttling", "ThrottlingException", "ThrottledException", "RequestThrottledException",
                  "TooManyRequestsException", "ProvisionedThroughputExceededException", "RequestLimitExceeded",
                  "BandwidthLimitExceeded", "LimitExceededException", "RequestThrottled", "SlowDown",
                  "EC2ThrottledException", "KmsThrottled")
# Lambda's Invoke throttles, a subset of the above: Invoke's other limit errors (ENILimitReachedException,
# a payload too large) are failures of the delivery, not a reason to slow down.
LAMBDA_THROTTLE_CODES = ("TooManyRequestsException", "EC2ThrottledException", "ThrottlingException")
TRANSIENT_CODES = ("RequestTimeout", "RequestTimeoutException", "PriorRequestNotComplete", "InternalError",
                   "InternalFailure", "ServiceUnavailable", "TransactionInProgressException")

FIFO_SUFFIX = ".fifo"  # SQS names every FIFO queue, and only those, with it
MAX_VISIBILITY_SECONDS = 43200  # SQS refuses a visibility timeout reaching past 12 h from the receive
RECEIPT_LIMIT_MARGIN_SECONDS = 60
RECEIPT_LIMIT_SECONDS = MAX_VISIBILITY_SECONDS - RECEIPT_LIMIT_MARGIN_SECONDS  # how long one receive can be kept


def is_fifo_queue(name_or_url: str) -> bool:
    """FIFO's rules (ordered groups, deduplication ids) hold on this queue; a standard queue's groups are tenants."""
    return name_or_url.endswith(FIFO_SUFFIX)


def backoff_seconds(attempt: int, rng: random.Random, cap_seconds: float, base_seconds: float = 1.0,
                    floor: float = 0.0, least_seconds: float = 0.0) -> float:
    """Jittered exponential backoff: uniformly between `floor` (0: full jitter) times the ceiling, or
    `least_seconds` if more, and the ceiling, base x 2^(attempt-1) seconds capped. The exponent stops
    growing once past any cap, so a loop that has failed for days still gets its pause (2.0 ** 1024
    would raise OverflowError)."""
    ceiling: float = min(cap_seconds, base_seconds * 2.0 ** min(attempt - 1, MAX_DOUBLINGS))
    return rng.uniform(max(floor * ceiling, least_seconds), ceiling)


def receipt_seconds_left(received_at: float, now: float) -> float:
    """How long a message received at `received_at` (time.time()) may still be kept invisible: SQS rejects
    a visibility change reaching past 12 h from the receive (and with it the whole batch), so a minute short."""
    return RECEIPT_LIMIT_SECONDS - (now - received_at)


def is_loopback_host(host: str) -> bool:
    """localhost, or an IPv4 or IPv6 loopback address (127.0.0.0/8, ::1)."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def is_loopback_url(url: str) -> bool:
    """A URL whose host is on this machine: `is_loopback_host`, a name under `.localhost` (RFC 6761), or an IPv4
    loopback address mapped into IPv6. For the daemon's own targets and endpoints; the container credentials
    endpoint trusts only what `is_loopback_host` says."""
    host = urllib.parse.urlsplit(url).hostname or ""
    if is_loopback_host(host) or host.endswith(".localhost"):
        return True
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        return False
    mapped = address.ipv4_mapped if isinstance(address, ipaddress.IPv6Address) else None
    return mapped is not None and mapped.is_loopback


SHORT_KEY_BYTES = 256


def short_key(key: str) -> str:
    """An idempotency key as the header and the log lines show it: as it is up to 256 bytes of printable ASCII
    (no space at either end, which HTTP parsers strip), else `sha256:` and the hex digest of its UTF-8, so an
    app can match the header to a log line and no server refuses the header for its size."""
    if len(key) <= SHORT_KEY_BYTES and key.isascii() and key.isprintable() and key.strip(" ") == key:
        return key
    return "sha256:" + hashlib.sha256(key.encode("utf-8", "surrogatepass")).hexdigest()
