"""The Lambda contract over HTTP (an HTTP target with batch_size > 1): one POST carries a batch as exactly the SQS
event a Lambda target sends, and a 2xx answer's `batchItemFailures` fail just the records it names."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from ..config.model import HttpTargetConfig
from ..wire.http import post_request
from ..wire.parsing import AnswerTooLarge
from . import Outcome, QueueInfo, Result
from .event_parts import EventBatchTarget
from .http import SUCCESSES, HttpTarget, exchange_failure, sign
from .sqs_event import judge_response

# An answer's body is kept up to this (a batchItemFailures naming 10,000 records is about 600 KB; Lambda's own
# response limit is 6 MB); past it the answer is not read further, whatever its status.
MAX_ANSWER_BYTES = 6 * 1024 * 1024


class BatchHttpTarget(EventBatchTarget, HttpTarget):
    """Up to `batch_size` messages of one queue per POST (on a FIFO queue, of one message group: the poller takes
    them so), under 6 MB each (`EventBatchTarget`: parts one after the other); `max_concurrency` and rate limits
    count these POSTs, the metrics their messages."""

    keeps_body = True  # a batch's answer names its failures
    max_answer_bytes = MAX_ANSWER_BYTES

    def __init__(self, config: HttpTargetConfig, ca_bundle: str | None = None) -> None:
        super().__init__(config, ca_bundle)
        self.messages_per_delivery = config.batch_size
        # [tracing]: the current delivery span's traceparent (and trace state), set by the engine
        self.trace_headers: Callable[[], dict[str, str]] = no_trace_headers

    def send_part(self, queue: QueueInfo, records: list[dict[str, Any]], body: bytes) -> list[Outcome]:
        """One POST of these records (`body`, their event) and an outcome for each."""
        count = len(records)
        # Read timeouts are per read: a server trickling bytes is only stopped by this deadline.
        deadline = time.monotonic() + self.hard_deadline_seconds
        headers = {"Content-Type": "application/json", "X-Aws-Sqsd-Queue": queue.name,
                   "X-Aws-Sqsd-Msgcount": str(count), **self.trace_headers()}
        if self.config.signing_secret:
            headers.update(sign(self.config.signing_secret, body, int(time.time())))
        try:
            # As for one message: a kept-alive connection the app closed as the request went out gets it again.
            reply = self.connections.exchange(post_request(self.path, self.fixed_headers, headers, body),
                                              deadline=deadline, resend_if_stale=True)
        except AnswerTooLarge as error:
            return [too_large(error) if 200 <= error.status < 300 else
                    self.judge(error.status, error.headers.get("retry-after"))] * count
        except Exception as error:  # no answer (refused, timed out) or a malformed one: the whole part failed
            return [exchange_failure(error, self.hard_deadline_seconds)] * count
        if 200 <= reply.status < 300:
            return judge_response(reply.body, records, success=SUCCESSES[reply.status], answerer="the app")
        return [self.judge(reply.status, reply.headers.get("retry-after"))] * count


def build_http_target(config: HttpTargetConfig, ca_bundle: str | None = None) -> HttpTarget:
    """batch_size 1: the aws-sqsd contract, one POST per message, unchanged; above 1, the batch."""
    return BatchHttpTarget(config, ca_bundle) if config.batch_size > 1 else HttpTarget(config, ca_bundle)


def no_trace_headers() -> dict[str, str]:
    return {}


def too_large(error: AnswerTooLarge) -> Outcome:
    return Outcome(Result.FAILURE, "AnswerTooLarge", f"the app answered HTTP {error.status} with a body over "
                   f"{error.max_body_bytes} bytes, too long to be a batchItemFailures", status=error.status)
