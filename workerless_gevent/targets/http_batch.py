"""The Lambda contract over HTTP (an HTTP target with batch_size > 1): one POST carries a batch as exactly the SQS
event a Lambda target sends, and a 2xx answer's `batchItemFailures` fail just the records it names."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from ..config.model import HttpTargetConfig
from ..message import Message
from ..wire.http import post_request
from . import Outcome, QueueInfo, Result
from .http import SUCCESSES, HttpTarget, exchange_failure, sign
from .sqs_event import build_record, event_payloads, judge_response, requests_needed

# FIFO: a record after the first one of its group that did not succeed; the settler makes it visible again at once
# (SQS hands out that first one before it), and it is not held against it (max_retries)
RELEASED = Outcome(Result.RELEASED, "BehindFailure", "released behind a failed record of its FIFO group")


class BatchHttpTarget(HttpTarget):
    """Up to `batch_size` messages of one queue per POST (on a FIFO queue, of one message group: the poller takes
    them so), under 6 MB each; `max_concurrency` and rate limits count these POSTs, the metrics their messages."""

    keeps_body = True  # a batch's answer names its failures

    def __init__(self, config: HttpTargetConfig, ca_bundle: str | None = None) -> None:
        super().__init__(config, ca_bundle)
        self.messages_per_delivery = config.batch_size
        # [tracing]: the current delivery span's traceparent (and trace state), set by the engine
        self.trace_headers: Callable[[], dict[str, str]] = no_trace_headers

    def deliver(self, queue: QueueInfo, messages: list[Message]) -> list[Outcome]:
        """One POST per part of at most 6 MB, one after the other. A part answered with an overload (429/503) holds
        the rest back with the same outcome. On a FIFO queue (the batch is one group, in order) the first record that
        did not succeed keeps its outcome and the records after it are released, sent or not."""
        if not messages:
            return []
        records = [build_record(queue, message) for message in messages]
        trace = self.trace_headers()
        outcomes: list[Outcome] = []
        for part, body in event_payloads(records):
            answered = self.post_batch(queue, part, body, trace)
            outcomes.extend(answered)
            held = held_back(answered, queue.is_fifo)
            if held is not None:
                outcomes.extend([held] * (len(records) - len(outcomes)))
                break
        return in_group_order(outcomes) if queue.is_fifo else outcomes

    def deadline_seconds(self, messages: list[Message]) -> float:
        """One POST's deadline per POST the batch may need (a batch over 6 MB goes in several)."""
        return self.hard_deadline_seconds * requests_needed(messages)

    def post_batch(self, queue: QueueInfo, records: list[dict[str, Any]], body: bytes,
                   trace: dict[str, str]) -> list[Outcome]:
        """One POST of these records (`body`, their event) and an outcome for each."""
        count = len(records)
        # Read timeouts are per read: a server trickling bytes is only stopped by this deadline.
        deadline = time.monotonic() + self.hard_deadline_seconds
        headers = {"Content-Type": "application/json", "X-Aws-Sqsd-Queue": queue.name,
                   "X-Aws-Sqsd-Msgcount": str(count), **trace}
        if self.config.signing_secret:
            headers.update(sign(self.config.signing_secret, body, int(time.time())))
        try:
            # As for one message: a kept-alive connection the app closed as the request went out gets it again.
            reply = self.connections.exchange(post_request(self.path, self.fixed_headers, headers, body),
                                              deadline=deadline, resend_if_stale=True)
        except Exception as error:  # no answer (refused, timed out) or a malformed one: the whole part failed
            return [exchange_failure(error, self.hard_deadline_seconds)] * count
        if 200 <= reply.status < 300:
            # not Lambda's FIFO rule here (all after the first failure fail): in_group_order releases them instead
            return judge_response(reply.body, records, False, success=SUCCESSES[reply.status], answerer="the app")
        return [self.judge(reply.status, reply.headers.get("retry-after"))] * count


def build_http_target(config: HttpTargetConfig, ca_bundle: str | None = None) -> HttpTarget:
    """batch_size 1: the aws-sqsd contract, one POST per message, unchanged; above 1, the batch."""
    return BatchHttpTarget(config, ca_bundle) if config.batch_size > 1 else HttpTarget(config, ca_bundle)


def no_trace_headers() -> dict[str, str]:
    return {}


def held_back(answered: list[Outcome], is_fifo: bool) -> Outcome | None:
    """The outcome of the records after a part answered so, left unsent; None to send them."""
    last = answered[-1]
    if last.result is Result.RETRY or last.result is Result.OVERLOADED:
        return last
    if is_fifo and any(outcome.result is not Result.SUCCESS for outcome in answered):
        return RELEASED
    return None


def in_group_order(outcomes: list[Outcome]) -> list[Outcome]:
    """FIFO: the first record that did not succeed keeps its outcome, and everything after it in its group is
    released behind it (whatever the app said of it): the group comes again in order, from that record on."""
    for index, outcome in enumerate(outcomes):
        if outcome.result is not Result.SUCCESS:
            return outcomes[:index + 1] + [RELEASED] * (len(outcomes) - index - 1)
    return outcomes

