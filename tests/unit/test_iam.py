"""The IAM policy's pieces: ARNs from queue URLs and function names, partitions, and S3 for large payloads."""

from __future__ import annotations


import pytest

from workerless_gevent.config.model import Config, HttpTargetConfig, LambdaTargetConfig, QueueConfig
from workerless_gevent.commands.iam import build_policy, function_arn, policy_notes, queue_arn


@pytest.mark.parametrize(("name", "url", "expected"), [
    ("jobs", None, "arn:aws:sqs:us-east-1:*:jobs"),
    ("jobs", "https://sqs.eu-west-1.amazonaws.com/111122223333/jobs", "arn:aws:sqs:eu-west-1:111122223333:jobs"),
    ("jobs", "https://eu-west-2.queue.amazonaws.com/111122223333/jobs", "arn:aws:sqs:eu-west-2:111122223333:jobs"),
    ("jobs", "https://sqs.cn-north-1.amazonaws.com.cn/111122223333/jobs", "arn:aws-cn:sqs:cn-north-1:111122223333:jobs"),
    ("jobs", "http://localhost:4566/000000000000/jobs", "arn:aws:sqs:us-east-1:000000000000:jobs"),
    ("jobs", "http://localhost:4566/queue/jobs", "arn:aws:sqs:us-east-1:*:jobs"),
])
def test_queue_arns(name: str, url: str | None, expected: str) -> None:
    assert queue_arn(name, url, "us-east-1", "*") == expected


@pytest.mark.parametrize(("function", "qualifier", "expected"), [
    ("fn", None, "arn:aws:lambda:us-east-1:*:function:fn"),
    ("fn", "live", "arn:aws:lambda:us-east-1:*:function:fn:live"),
    ("fn:7", None, "arn:aws:lambda:us-east-1:*:function:fn:7"),
    ("111122223333:function:fn", None, "arn:aws:lambda:us-east-1:111122223333:function:fn"),
    ("arn:aws:lambda:eu-west-1:111122223333:function:fn", None, "arn:aws:lambda:eu-west-1:111122223333:function:fn"),
    ("arn:aws:lambda:eu-west-1:111122223333:function:fn:prod", "live",
     "arn:aws:lambda:eu-west-1:111122223333:function:fn:live"),
])
def test_function_arns_are_qualified_when_a_version_or_alias_is_named(
    function: str, qualifier: str | None, expected: str,
) -> None:
    target = LambdaTargetConfig(name="t", function=function, qualifier=qualifier)
    assert function_arn(target, "us-east-1", "*") == expected


def test_gov_cloud_partition() -> None:
    config = Config(source="t", queues=(QueueConfig(name="jobs"),),
                    targets={"default": HttpTargetConfig(name="default", url="http://127.0.0.1/")})
    policy = build_policy(config, "us-gov-west-1", "111122223333")
    assert policy["Statement"][0]["Resource"] == ["arn:aws-us-gov:sqs:us-gov-west-1:111122223333:jobs"]
    assert policy_notes(policy) == []


@pytest.mark.parametrize(("queues", "actions"), [
    ((QueueConfig(name="a"),), None),
    ((QueueConfig(name="a", large_payloads=True),), ["s3:GetObject"]),
    ((QueueConfig(name="a", large_payloads=True, delete_payloads=True), QueueConfig(name="b")),
     ["s3:GetObject", "s3:DeleteObject"]),
])
def test_s3_only_with_large_payloads_and_delete_only_when_asked(
    queues: tuple[QueueConfig, ...], actions: list[str] | None,
) -> None:
    config = Config(source="t", queues=queues, targets={"default": HttpTargetConfig(name="default", url="http://h/")})
    policy = build_policy(config, "us-east-1", "111122223333")
    s3 = [item for item in policy["Statement"] if item["Sid"] == "ReadLargePayloads"]
    if actions is None:
        assert s3 == []
        return
    assert s3 == [{"Sid": "ReadLargePayloads", "Effect": "Allow", "Action": actions, "Resource": ["arn:aws:s3:::*/*"]}]
    assert any("payload bucket" in note for note in policy_notes(policy))


def test_a_fleet_adds_its_tables_conditional_writes_and_nothing_else_of_dynamodb() -> None:
    from workerless_gevent.config.fleet import FleetConfig
    config = Config(source="t", queues=(QueueConfig(name="jobs", fleet_max_concurrency=5),),
                    targets={"default": HttpTargetConfig(name="default", url="http://127.0.0.1:8080/")},
                    fleet=FleetConfig(table="workerless-fleet", name="orders"))
    statements = {item["Sid"]: item for item in build_policy(config, "eu-west-1", "111122223333")["Statement"]}
    fleet = statements["ShareFleetLimits"]
    assert fleet["Resource"] == ["arn:aws:dynamodb:eu-west-1:111122223333:table/workerless-fleet"]
    assert {"dynamodb:GetItem", "dynamodb:PutItem", "dynamodb:UpdateItem"} <= set(fleet["Action"])
    assert not {"dynamodb:DeleteItem", "dynamodb:Scan", "dynamodb:Query"} & set(fleet["Action"])


def test_idempotent_delivery_adds_its_tables_writes() -> None:
    from workerless_gevent.config.idempotency import IdempotencyConfig
    config = Config(source="t", queues=(QueueConfig(name="jobs", idempotency_key="message_id"),),
                    targets={"default": HttpTargetConfig(name="default", url="http://127.0.0.1:8080/")},
                    idempotency=IdempotencyConfig(table="orders-seen"))
    statements = {item["Sid"]: item for item in build_policy(config, "eu-west-1", "111122223333")["Statement"]}
    remember = statements["RememberDeliveries"]
    assert remember["Resource"] == ["arn:aws:dynamodb:eu-west-1:111122223333:table/orders-seen"]
    assert {"dynamodb:PutItem", "dynamodb:BatchWriteItem", "dynamodb:DeleteItem", "dynamodb:UpdateItem",
            "dynamodb:CreateTable", "dynamodb:DescribeTable"} <= set(remember["Action"])
    assert not {"dynamodb:Scan", "dynamodb:Query", "dynamodb:GetItem"} & set(remember["Action"])
    plain = Config(source="t", queues=(QueueConfig(name="jobs"),), targets=config.targets)
    assert "RememberDeliveries" not in {item["Sid"] for item in build_policy(plain, "eu-west-1")["Statement"]}
