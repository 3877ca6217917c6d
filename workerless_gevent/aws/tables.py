"""The DynamoDB tables the daemon keeps its items in (periodic claims, fleet limits, idempotency keys): one key,
`slot`, and a TTL on `expires_at`; each made at start if missing, waited for until ACTIVE, tried again until usable."""

from __future__ import annotations

import logging
import random
import time
from typing import Any

import botocore.exceptions
import gevent.event

from ..errors import AWS_ERRORS, describe_error, error_code

logger = logging.getLogger(__name__)

KEY = "slot"
TTL_ATTRIBUTE = "expires_at"  # epoch seconds
TABLE_POLL_SECONDS = 1.0


class DynamoTable:
    """One of the daemon's tables, made and checked through the caller's DynamoDB client."""

    def __init__(self, dynamodb: Any, table_name: str) -> None:
        self.dynamodb = dynamodb
        self.table_name = table_name

    def wait_for_table(self, stopping: gevent.event.Event, timeout_seconds: float = 120.0) -> bool:
        """Create the table if it is missing and wait until it is ACTIVE; False if stopping first."""
        deadline = time.monotonic() + timeout_seconds
        status = self.describe_status()
        if status is None:
            self.create_table()
            status = self.describe_status()
        while status != "ACTIVE":
            if time.monotonic() >= deadline:
                raise TimeoutError(f"DynamoDB table {self.table_name} not ACTIVE after {timeout_seconds:g}s")
            if stopping.wait(TABLE_POLL_SECONDS):
                return False
            status = self.describe_status()
        self.enable_expiry()
        return True

    def wait_until_usable(self, stopping: gevent.event.Event, rng: random.Random, cost: str) -> bool:
        """`wait_for_table`, tried again (jittered, doubling to a minute) until it works; False if stopping first.
        Each failure is one ERROR line saying what it costs meanwhile (`cost`)."""
        attempt = 0
        while True:
            try:
                return self.wait_for_table(stopping)
            except (*AWS_ERRORS, TimeoutError) as error:
                attempt += 1
                delay = min(60.0, 2.0**attempt) * (0.5 + rng.random())
                logger.error("DynamoDB table %s not usable (%s); %s until it is; retrying in %.0fs", self.table_name,
                             describe_error(error), cost, delay)
                if stopping.wait(delay):
                    return False

    def describe_status(self) -> str | None:
        try:
            response = self.dynamodb.describe_table(TableName=self.table_name)
        except botocore.exceptions.ClientError as error:
            if error_code(error) == "ResourceNotFoundException":
                return None
            raise
        return str(response["Table"]["TableStatus"])

    def create_table(self) -> None:
        try:
            self.dynamodb.create_table(
                TableName=self.table_name,
                AttributeDefinitions=[{"AttributeName": KEY, "AttributeType": "S"}],
                KeySchema=[{"AttributeName": KEY, "KeyType": "HASH"}],
                BillingMode="PAY_PER_REQUEST",
            )
            logger.info("created DynamoDB table %s (key %s, on-demand billing)", self.table_name, KEY)
        except botocore.exceptions.ClientError as error:
            # Another instance starting at the same moment may have created it first: that is fine.
            if error_code(error) != "ResourceInUseException":
                raise

    def enable_expiry(self) -> None:
        """Old items expire through DynamoDB TTL; failing to set it only costs storage, so it only warns."""
        try:
            described = self.dynamodb.describe_time_to_live(TableName=self.table_name)
            if described["TimeToLiveDescription"].get("TimeToLiveStatus") in ("ENABLED", "ENABLING"):
                return
            self.dynamodb.update_time_to_live(
                TableName=self.table_name,
                TimeToLiveSpecification={"Enabled": True, "AttributeName": TTL_ATTRIBUTE},
            )
        except (botocore.exceptions.BotoCoreError, botocore.exceptions.ClientError) as error:
            logger.warning("DynamoDB table %s: cannot enable TTL on %s (%s); expired items will be kept (nothing relies "
                           "on TTL to remove them; they only take storage)", self.table_name, TTL_ATTRIBUTE, error_code(error))
