"""Invoke a Lambda function with exactly the SQS event Lambda's own event source mapping sends."""

from __future__ import annotations

import json
import logging
import random
from typing import Any

import botocore.exceptions

from ..config.model import LambdaTargetConfig
from ..errors import describe_error, error_code
from ..rules import LAMBDA_THROTTLE_CODES, backoff_seconds
from . import Outcome, Pause, QueueInfo, Result
from .event_parts import EventBatchTarget
from .sqs_event import judge_response

logger = logging.getLogger(__name__)

MAX_THROTTLE_PAUSE_SECONDS = 60.0  # a throttled function's pause: half to all of 2, 4, 8 ... seconds, up to this


class LambdaTarget(EventBatchTarget):
    """One Invoke per part of a batch (`EventBatchTarget`: parts under 6 MB, one after the other)."""

    def __init__(self, config: LambdaTargetConfig, client: Any, rng: random.Random, owns_client: bool = False) -> None:
        self.name = config.name
        self.config = config
        self.client = client
        self.owns_client = owns_client  # its own endpoint_url's wire, closed with it (never the daemon's Lambda client)
        self.rng = rng
        self.messages_per_delivery = config.batch_size
        self.hard_deadline_seconds = float(config.timeout + 10)
        self.pause = Pause()
        self.throttles_in_a_row = 0

    def close(self) -> None:
        """When a reload replaces or removes the target: its own wire's connections go with it."""
        if self.owns_client:
            self.client.close()

    def send_part(self, queue: QueueInfo, records: list[dict[str, Any]], payload: bytes) -> list[Outcome]:
        extra = {"Qualifier": self.config.qualifier} if self.config.qualifier else {}
        try:
            response = self.client.invoke(FunctionName=self.config.function, InvocationType="RequestResponse",
                                          Payload=payload, **extra)
            body = response["Payload"].read()
        except (botocore.exceptions.BotoCoreError, botocore.exceptions.ClientError) as error:
            return [self.judge_error(error)] * len(records)
        self.throttles_in_a_row = 0
        status = int(response.get("StatusCode", 200))
        if response.get("FunctionError"):
            detail = summarize_error(body)
            return [Outcome.failure(f"FunctionError:{response['FunctionError']}", detail)] * len(records)
        if not 200 <= status < 300:
            return [Outcome.failure(f"HTTP {status}", f"Invoke answered status {status}")] * len(records)
        return judge_response(body, records)

    def judge_error(self, error: BaseException) -> Outcome:
        code = error_code(error)
        if code.endswith(LAMBDA_THROTTLE_CODES):
            self.throttles_in_a_row += 1
            seconds = backoff_seconds(self.throttles_in_a_row + 1, self.rng, MAX_THROTTLE_PAUSE_SECONDS, floor=0.5)
            self.pause.extend(seconds)
            if self.config.overload == "backpressure":
                return Outcome.overloaded("Throttled", describe_error(error))
            return Outcome(Result.RETRY, "Throttled", describe_error(error), seconds)
        return Outcome.failure(code, describe_error(error))


def summarize_error(body: bytes) -> str:
    try:
        detail = json.loads(body)
    except ValueError:
        return body[:200].decode("utf-8", "replace")
    if isinstance(detail, dict):
        return f"{detail.get('errorType', 'Error')}: {detail.get('errorMessage', '')}"[:300]
    return str(detail)[:300]
