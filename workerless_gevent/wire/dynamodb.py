"""The daemon's DynamoDB calls for idempotent delivery without botocore's client: AWS JSON 1.0 over
`wire.http` (`json_wire.JsonWire`), one or two calls per ten messages beside SQS's own, so they must cost
what SQS's calls cost, not a botocore call's 1-2 ms of CPU. Items go in and come back in DynamoDB's
typed JSON ({"S": ...}, {"N": ...}), as botocore's client takes and returns them."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from .json_wire import JsonWire

# The operations this wire serves: the claims' calls (idempotency.store) and their table's set-up (aws.tables).
OPERATIONS = ("DescribeTable", "CreateTable", "DescribeTimeToLive", "UpdateTimeToLive", "TransactWriteItems",
              "BatchWriteItem", "DeleteItem", "UpdateItem")
# The boto3 client's name of each (describe_table -> DescribeTable), as botocore's xform_name makes it.
METHODS = {re.sub(r"(?<!^)(?=[A-Z])", "_", operation).lower(): operation for operation in OPERATIONS}


class DynamoDbWire(JsonWire):
    """The boto3 client's methods for OPERATIONS, with its keyword arguments and result shapes."""

    service = "DynamoDB"
    target_prefix = "DynamoDB_20120810."
    signing_name = "dynamodb"

    def __getattr__(self, name: str) -> Callable[..., dict[str, Any]]:
        """`describe_table(**params)` and the like, made at the first use and kept on the wire; any other
        name is an AttributeError that says what the wire serves (a call it does not serve fails loudly)."""
        operation = METHODS.get(name)
        if operation is None:
            raise AttributeError(f"{type(self).__name__} has no {name!r}: it serves {', '.join(METHODS)} "
                                 "(wire.dynamodb.OPERATIONS)")

        def call(**params: Any) -> dict[str, Any]:
            return self.call(operation, params)

        call.__name__ = name
        self.__dict__[name] = call  # later lookups find it here, and __getattr__ is not asked again
        return call
