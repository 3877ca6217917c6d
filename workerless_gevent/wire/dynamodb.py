"""The daemon's DynamoDB calls for idempotent delivery without botocore's client: AWS JSON 1.0 over
`wire.http` (`json_wire.JsonWire`), one or two calls per ten messages beside SQS's own, so they must cost
what SQS's calls cost, not a botocore call's 1-2 ms of CPU. Items go in and come back in DynamoDB's
typed JSON ({"S": ...}, {"N": ...}), as botocore's client takes and returns them."""

from __future__ import annotations

from typing import Any

from .json_wire import JsonWire


class DynamoDbWire(JsonWire):
    """DynamoDB's calls, with the boto3 client's keyword arguments and result shapes."""

    service = "DynamoDB"
    target_prefix = "DynamoDB_20120810."
    signing_name = "dynamodb"

    def describe_table(self, **params: Any) -> dict[str, Any]:
        return self.call("DescribeTable", params)

    def create_table(self, **params: Any) -> dict[str, Any]:
        return self.call("CreateTable", params)

    def describe_time_to_live(self, **params: Any) -> dict[str, Any]:
        return self.call("DescribeTimeToLive", params)

    def update_time_to_live(self, **params: Any) -> dict[str, Any]:
        return self.call("UpdateTimeToLive", params)

    def transact_write_items(self, **params: Any) -> dict[str, Any]:
        return self.call("TransactWriteItems", params)

    def batch_write_item(self, **params: Any) -> dict[str, Any]:
        return self.call("BatchWriteItem", params)

    def delete_item(self, **params: Any) -> dict[str, Any]:
        return self.call("DeleteItem", params)

    def update_item(self, **params: Any) -> dict[str, Any]:
        return self.call("UpdateItem", params)
