"""The aws-sqsd contract: one POST per message to a local app; 2xx means processed."""

from __future__ import annotations

import email.utils
import hashlib
import hmac
import logging
import re
import time
import urllib.parse


from .. import __version__
from ..config.model import HttpTargetConfig
from ..message import Message, iso_utc
from ..rules import short_key
from ..wire.http import Connections, host_header, post_request, tls_context
from ..wire.watchdog import DeadlineExceeded
from . import Outcome, Pause, QueueInfo, Result
from .http_headers import ENCODED_HEADER, put_value, trace_headers

logger = logging.getLogger(__name__)

HEADER_NAME = re.compile(r"[!#$%&'*+\-.^_`|~0-9A-Za-z]+")
PATH_ATTRIBUTE = "beanstalk.sqsd.path"
TASK_ATTRIBUTE = "beanstalk.sqsd.task_name"
SCHEDULED_ATTRIBUTE = "beanstalk.sqsd.scheduled_time"
SPECIAL_ATTRIBUTES = frozenset((PATH_ATTRIBUTE, TASK_ATTRIBUTE, SCHEDULED_ATTRIBUTE))
SUCCESSES = {status: Outcome(Result.SUCCESS, status=status) for status in range(200, 300)}  # made once, not per POST
KEY_HEADER = "X-Workerless-Idempotency-Key"  # with an idempotency_key: the key claimed for this delivery


class HttpTarget:
    keeps_body = False  # one message's 2xx answer is not read, only its status
    max_answer_bytes: int | None = None  # of an answer's body kept: more fails the exchange

    def __init__(self, config: HttpTargetConfig, ca_bundle: str | None = None) -> None:
        """https is verified against `ca_bundle` ([aws] ca_bundle) if given, else the system's CAs."""
        url = urllib.parse.urlsplit(config.url)
        host, port = url.hostname or "127.0.0.1", url.port or (443 if url.scheme == "https" else 80)
        self.name = config.name
        self.config = config
        self.path = quote_path(url.path or "/")  # once, not per POST: only an attribute's path varies
        self.messages_per_delivery = 1
        self.hard_deadline_seconds = float(config.connect_timeout + config.inactivity_timeout)
        self.pause = Pause()
        self.connections = Connections(host, port, limit=config.max_connections, connect_timeout=config.connect_timeout,
                                       read_timeout=config.inactivity_timeout, quick_ack=True,
                                       tls=tls_context(ca_bundle) if url.scheme == "https" else None,
                                       keep_headers=("Retry-After",), keep_headers_of_errors_only=True,
                                       keep_body=self.keeps_body, max_body_bytes=self.max_answer_bytes,
                                       keepalive_idle=config.keepalive_idle)
        self.fixed_headers = f"Host: {host_header(host, port, url.scheme)}\r\nUser-Agent: aws-sqsd/{__version__} (workerless)\r\n"
        self.fixed_headers += "".join(f"{name}: {value}\r\n" for name, value in config.headers.items())

    def deliver(self, queue: QueueInfo, messages: list[Message]) -> list[Outcome]:
        return [self.post(queue, message) for message in messages]

    def deadline_seconds(self, queue: QueueInfo, messages: list[Message]) -> float:
        return self.hard_deadline_seconds * len(messages)  # one POST after the other

    def post(self, queue: QueueInfo, message: Message) -> Outcome:
        routed = message.string_attribute(PATH_ATTRIBUTE) if PATH_ATTRIBUTE in message.message_attributes else None
        path = quote_path(routed) if routed else self.path
        # Read timeouts are per read: a server trickling bytes is only stopped by this deadline.
        deadline = time.monotonic() + self.hard_deadline_seconds
        try:
            body = message.body.encode("utf-8")
            headers = build_headers(queue.name, message, self.config.content_type)
            if self.config.signing_secret:
                headers.update(sign(self.config.signing_secret, body, int(time.time())))
            # A kept-alive connection the app closed as the request went out gets it again on a new one:
            # nothing of it was answered, and failing the delivery would only redeliver it later.
            reply = self.connections.exchange(post_request(path, self.fixed_headers, headers, body), deadline=deadline,
                                              resend_if_stale=True)
            return self.judge(reply.status, reply.headers.get("retry-after"))
        except OSError as error:  # no answer: refused, reset, or none complete by the deadline
            return exchange_failure(error, self.hard_deadline_seconds)
        except Exception as error:  # a malformed response from the app must not kill the delivery
            return Outcome.failure(type(error).__name__, str(error))

    def judge(self, status: int, retry_after: str | None) -> Outcome:
        if 200 <= status < 300:
            return SUCCESSES[status]
        if status in (429, 503):
            seconds = parse_retry_after(retry_after) if retry_after is not None else None
            if seconds is not None:
                self.pause.extend(seconds)
                return Outcome(Result.RETRY, f"HTTP {status}", f"HTTP {status}, Retry-After {seconds:g}s", seconds,
                               status)
            if self.config.overload == "backpressure":
                return Outcome(Result.OVERLOADED, f"HTTP {status}",
                               f"the app answered HTTP {status} without Retry-After", status=status)
        return Outcome(Result.FAILURE, f"HTTP {status}", f"the app answered HTTP {status}", status=status)

    def close(self) -> None:
        self.connections.close()


def exchange_failure(error: Exception, deadline_seconds: float) -> Outcome:
    """A POST that got no answer: past its deadline, or its connection failed."""
    if isinstance(error, DeadlineExceeded):
        return Outcome.failure("Timeout", f"no complete response within {deadline_seconds:g}s")
    return Outcome.failure(type(error).__name__, str(error) or type(error).__name__)


def quote_path(path: str) -> str:
    """A path from a message attribute may hold spaces, controls or non-ASCII: the request line can't."""
    if not path.startswith("/"):
        path = "/" + path
    return urllib.parse.quote(path, safe="!$%&'()*+,/:;=?@[]~")


def build_headers(queue_name: str, message: Message, content_type: str) -> dict[str, str]:
    """The aws-sqsd header set, in the spelling Beanstalk apps look for."""
    attributes = message.attributes
    headers = {
        "Content-Type": content_type,
        "X-Aws-Sqsd-Msgid": message.message_id,
        "X-Aws-Sqsd-Queue": queue_name,
        "X-Aws-Sqsd-First-Received-At": iso_utc(attributes.get("ApproximateFirstReceiveTimestamp")),
        "X-Aws-Sqsd-Receive-Count": attributes.get("ApproximateReceiveCount", "1"),
        "X-Aws-Sqsd-Sender-Id": attributes.get("SenderId", ""),
        "X-Aws-Sqsd-Sent-At": iso_utc(attributes.get("SentTimestamp")),
    }
    if message.message_attributes:
        put_attribute_headers(headers, message)
    if message.trace_headers is not None:  # [tracing]: the delivery span's context, so the app's spans are its children
        headers.update(message.trace_headers)
    elif "AWSTraceHeader" in message.attributes or "traceparent" in message.message_attributes:
        headers.update(trace_headers(message))
    if message.idempotency_key is not None:  # its short form: printable ASCII that no header rule changes
        headers[KEY_HEADER] = short_key(message.idempotency_key)
    return headers


def put_attribute_headers(headers: dict[str, str], message: Message) -> None:
    """A header per String and Number message attribute, and the periodic task's and the path's own."""
    encoded: list[str] = []  # values sent percent-encoded (targets/http_headers.py has the rule)
    special: dict[str, str] = {}  # the attributes aws-sqsd also sends under headers of their own
    for name in message.message_attributes:
        value = message.string_attribute(name)
        if value is None:
            continue  # Binary attributes are dropped, as aws-sqsd does
        if name in SPECIAL_ATTRIBUTES:
            special[name] = value
        if HEADER_NAME.fullmatch(name):  # a name no header can carry is dropped too
            put_value(headers, f"X-Aws-Sqsd-Attr-{name}", value, encoded)
    if TASK_ATTRIBUTE in special:
        put_value(headers, "X-Aws-Sqsd-Taskname", special[TASK_ATTRIBUTE], encoded)
        put_value(headers, "X-Aws-Sqsd-Scheduled-At", special.get(SCHEDULED_ATTRIBUTE, ""), encoded)
    if PATH_ATTRIBUTE in special:
        put_value(headers, "X-Aws-Sqsd-Path", special[PATH_ATTRIBUTE], encoded)
    if encoded:
        headers[ENCODED_HEADER] = ", ".join(encoded)


def sign(secret: str, body: bytes, timestamp: int) -> dict[str, str]:
    """HMAC-SHA256 over "<timestamp>.<body>", so the app can reject forged or replayed POSTs."""
    digest = hmac.new(secret.encode("utf-8"), f"{timestamp}.".encode() + body, hashlib.sha256).hexdigest()
    return {"X-Workerless-Timestamp": str(timestamp), "X-Workerless-Signature": f"v1={digest}"}


def parse_retry_after(value: str) -> float | None:
    """Retry-After is delta-seconds or an HTTP date."""
    value = value.strip()
    if value.isdigit():
        return float(value)
    try:
        moment = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(0.0, moment.timestamp() - time.time())
