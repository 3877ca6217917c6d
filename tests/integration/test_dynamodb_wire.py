"""DynamoDbWire, the idempotency claims' DynamoDB calls without botocore's client, against moto: the boto3
client's method names and shapes for the operations it serves, and a loud refusal of any other; the store's
claims and completions, the same through the wire and through botocore's client."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import boto3
import botocore
import botocore.exceptions
import botocore.session
import pytest

from tests.support import MotoServer
from workerless_gevent.aws.tables import KEY
from workerless_gevent.aws.tables import TTL_ATTRIBUTE as EXPIRES
from workerless_gevent.idempotency.store import COMPLETED, IN_PROGRESS, PAYLOAD, Claim, IdempotencyStore, VerdictKind
from workerless_gevent.wire.dynamodb import METHODS, OPERATIONS, DynamoDbWire

KEY_SCHEMA = {"AttributeDefinitions": [{"AttributeName": "id", "AttributeType": "S"}],
              "KeySchema": [{"AttributeName": "id", "KeyType": "HASH"}], "BillingMode": "PAY_PER_REQUEST"}


@pytest.fixture
def wire(moto_server: MotoServer) -> Iterator[DynamoDbWire]:
    made = DynamoDbWire(moto_server.url, "us-east-1", boto3.session.Session().get_credentials(), concurrency=2,
                        read_timeout=5)
    yield made
    made.close()


def test_each_method_is_the_boto3_clients_name_of_its_operation() -> None:
    model = botocore.session.get_session().get_service_model("dynamodb")
    assert set(OPERATIONS) <= set(model.operation_names)
    assert METHODS == {botocore.xform_name(operation): operation for operation in OPERATIONS}


def test_the_calls_answer_as_the_boto3_client_does(wire: Any, moto_server: MotoServer, claims_table: str) -> None:
    client = moto_server.client("dynamodb")
    created = wire.create_table(TableName=claims_table, **KEY_SCHEMA)
    assert created["TableDescription"]["TableName"] == claims_table
    assert created["ResponseMetadata"]["HTTPStatusCode"] == 200
    described = wire.describe_table(TableName=claims_table)
    assert described["Table"]["KeySchema"] == client.describe_table(TableName=claims_table)["Table"]["KeySchema"]
    wire.update_item(TableName=claims_table, Key={"id": {"S": "a"}}, UpdateExpression="SET n = :n",
                     ExpressionAttributeValues={":n": {"N": "1"}})
    wire.batch_write_item(RequestItems={claims_table: [{"PutRequest": {"Item": {"id": {"S": "b"}}}}]})
    assert client.get_item(TableName=claims_table, Key={"id": {"S": "a"}})["Item"] == {"id": {"S": "a"},
                                                                                          "n": {"N": "1"}}
    wire.delete_item(TableName=claims_table, Key={"id": {"S": "a"}})
    assert "Item" not in client.get_item(TableName=claims_table, Key={"id": {"S": "a"}})
    with pytest.raises(botocore.exceptions.ClientError) as caught:
        wire.transact_write_items(TransactItems=[{"Put": {
            "TableName": claims_table, "Item": {"id": {"S": "b"}}, "ConditionExpression": "attribute_not_exists(id)"}}])
    assert caught.value.response["Error"]["Code"] == "TransactionCanceledException"
    assert caught.value.response["CancellationReasons"][0]["Code"] == "ConditionalCheckFailed"


def test_a_call_it_does_not_serve_is_refused_by_name(wire: Any) -> None:
    with pytest.raises(AttributeError, match=r"DynamoDbWire has no 'put_item': it serves describe_table, "):
        wire.put_item(TableName="t", Item={})
    assert not hasattr(wire, "get_item")
    assert wire.describe_table is wire.describe_table  # made once, then an attribute of the wire


@pytest.mark.parametrize("transport", ["wire", "botocore"])
def test_the_stores_claims_and_completions_write_the_same_items_through_either_transport(
        transport: str, wire: Any, moto_server: MotoServer, claims_table: str) -> None:
    """The claims' and completions' requests are made from JSON templates (sent as they are on the wire, decoded
    for botocore's client behind a proxy): keys with quotes, percent signs and non-ASCII text land as written."""
    client = moto_server.client("dynamodb")
    client.create_table(TableName=claims_table, AttributeDefinitions=[{"AttributeName": KEY, "AttributeType": "S"}],
                        KeySchema=[{"AttributeName": KEY, "KeyType": "HASH"}], BillingMode="PAY_PER_REQUEST")
    store = IdempotencyStore(wire if transport == "wire" else client, claims_table)
    slots = ['idempotency/q/"quoted" %s {0}', "idempotency/q/ключ ✓", "idempotency/q/plain"]
    deadline = int(time.time()) + 60
    claims = [Claim(slot, f"token-{index}", deadline, "ab12" if index else None) for index, slot in enumerate(slots)]
    assert [verdict.kind for verdict in store.claim_all(claims)] == [VerdictKind.CLAIMED] * 3
    again = store.claim_all([claim._replace(token="another") for claim in claims])
    assert [verdict.kind for verdict in again] == [VerdictKind.BUSY] * 3
    assert client.get_item(TableName=claims_table, Key={KEY: {"S": slots[1]}})["Item"] == {
        KEY: {"S": slots[1]}, "state": {"S": IN_PROGRESS}, "owner": {"S": "token-1"}, EXPIRES: {"N": str(deadline)}}
    assert store.complete_all(claims, deadline + 3600) == set(slots)
    items = [client.get_item(TableName=claims_table, Key={KEY: {"S": slot}})["Item"] for slot in slots]
    assert items[0] == {KEY: {"S": slots[0]}, "state": {"S": COMPLETED}, "owner": {"S": "token-0"},
                        EXPIRES: {"N": str(deadline + 3600)}}
    assert [item[PAYLOAD] for item in items[1:]] == [{"S": "ab12"}] * 2
    assert [verdict.kind for verdict in store.claim_all(claims)] == [VerdictKind.COMPLETED] * 3
