"""The DynamoDB claims table: one conditional write per periodic slot decides which instance sends it; its table
making (created on demand, waited for, TTL on) serves the fleet table too."""

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
TTL_ATTRIBUTE = "expires_at"
KEEP_CLAIMS_SECONDS = 7 * 24 * 3600
TABLE_POLL_SECONDS = 1.0


class Claims:
    """Claims on `task@time` slots; DynamoDB's conditional put makes exactly one claim win."""

    def __init__(self, dynamodb: Any, table_name: str, owner: str) -> None:
        self.dynamodb = dynamodb
        self.table_name = table_name
        self.owner = owner

    def claim(self, slot: str, task_name: str, scheduled_epoch_seconds: float) -> bool:
        """True if this instance now owns the slot; False if another instance (or an earlier run) does."""
        item = {
            KEY: {"S": slot},
            "task_name": {"S": task_name},
            "owner": {"S": self.owner},
            "claimed_at": {"N": str(int(time.time()))},
            TTL_ATTRIBUTE: {"N": str(int(scheduled_epoch_seconds) + KEEP_CLAIMS_SECONDS)},
        }
        try:
            self.dynamodb.put_item(TableName=self.table_name, Item=item,
                                   ConditionExpression="attribute_not_exists(#slot)",
                                   ExpressionAttributeNames={"#slot": KEY})
        except botocore.exceptions.ClientError as error:
            if error_code(error) == "ConditionalCheckFailedException":
                # A retry of our own write whose answer was lost fails the condition too: the claim is
                # ours if the item names us.
                return self.owner_of(slot) == self.owner
            raise
        return True

    def owner_of(self, slot: str) -> str | None:
        item = self.dynamodb.get_item(TableName=self.table_name, Key={KEY: {"S": slot}}, ConsistentRead=True,
                                      ProjectionExpression="#owner", ExpressionAttributeNames={"#owner": "owner"})
        owner = item.get("Item", {}).get("owner", {}).get("S")
        return str(owner) if owner is not None else None

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
        """Old claims expire through DynamoDB TTL; failing to set it only costs storage, so it only warns."""
        try:
            described = self.dynamodb.describe_time_to_live(TableName=self.table_name)
            if described["TimeToLiveDescription"].get("TimeToLiveStatus") in ("ENABLED", "ENABLING"):
                return
            self.dynamodb.update_time_to_live(
                TableName=self.table_name,
                TimeToLiveSpecification={"Enabled": True, "AttributeName": TTL_ATTRIBUTE},
            )
        except (botocore.exceptions.BotoCoreError, botocore.exceptions.ClientError) as error:
            logger.warning("claims table %s: cannot enable TTL on %s (%s); old claims will be kept",
                           self.table_name, TTL_ATTRIBUTE, error_code(error))
