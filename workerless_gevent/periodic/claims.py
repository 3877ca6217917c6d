"""The DynamoDB claims table: one conditional write per periodic slot decides which instance sends it (the table
itself is made as the daemon's other tables are, `aws.tables.DynamoTable`)."""

from __future__ import annotations

import logging
import time
from typing import Any

import botocore.exceptions

from ..aws.tables import KEY, TTL_ATTRIBUTE, DynamoTable
from ..errors import error_code

logger = logging.getLogger(__name__)

KEEP_CLAIMS_SECONDS = 7 * 24 * 3600


class Claims(DynamoTable):
    """Claims on `task@time` slots; DynamoDB's conditional put makes exactly one claim win."""

    def __init__(self, dynamodb: Any, table_name: str, owner: str) -> None:
        super().__init__(dynamodb, table_name)
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
