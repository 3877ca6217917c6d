"""The least-privilege IAM policy a configuration needs (`workerless check --iam`): only the calls the
daemon makes, on only the resources it names.

ARNs are built from the configuration and the region, without an AWS call: the account comes from a
queue's `url` or a function ARN where the configuration gives one, else it is `*` (still scoped to
the region and the names). `check --iam --online` passes the caller's account (STS) and the queue
ARNs SQS reported instead."""

from __future__ import annotations

import random
import re
import urllib.parse
from collections.abc import Mapping
from typing import Any

from ..config.model import Config, LambdaTargetConfig
from ..errors import AWS_ERRORS, StartupError, describe_error

POLICY_VERSION = "2012-10-17"
ANY_ACCOUNT = "*"
# What the daemon calls on the queues it polls: receive, the batched deletes and visibility changes
# (authorized as DeleteMessage and ChangeMessageVisibility), and at start GetQueueUrl/GetQueueAttributes
# (which also read Backlog). Dead-letter queues are resolved the same way and sent to.
CONSUME_ACTIONS = ["sqs:ReceiveMessage", "sqs:DeleteMessage", "sqs:ChangeMessageVisibility", "sqs:GetQueueUrl",
                   "sqs:GetQueueAttributes"]
DEAD_LETTER_ACTIONS = ["sqs:SendMessage", "sqs:GetQueueUrl", "sqs:GetQueueAttributes"]
# periodic.claims.Claims: put/get the slot items; aws.tables.DynamoTable: create the table, wait, turn on its TTL.
CLAIMS_ACTIONS = ["dynamodb:PutItem", "dynamodb:GetItem", "dynamodb:DescribeTable", "dynamodb:CreateTable",
                  "dynamodb:DescribeTimeToLive", "dynamodb:UpdateTimeToLive"]
# idempotency.store: claims in one TransactWriteItems (each Put is allowed by PutItem), completions in
# BatchWriteItem, claims given up (DeleteItem) or extended (UpdateItem); the table made by aws.tables.DynamoTable.
IDEMPOTENCY_ACTIONS = ["dynamodb:PutItem", "dynamodb:BatchWriteItem", "dynamodb:DeleteItem", "dynamodb:UpdateItem",
                       "dynamodb:DescribeTable", "dynamodb:CreateTable", "dynamodb:DescribeTimeToLive",
                       "dynamodb:UpdateTimeToLive"]
# fleet.table.LimitItem: read, create and conditionally update a limit's item; the table made by aws.tables.DynamoTable.
FLEET_ACTIONS = ["dynamodb:GetItem", "dynamodb:PutItem", "dynamodb:UpdateItem", "dynamodb:DescribeTable",
                 "dynamodb:CreateTable", "dynamodb:DescribeTimeToLive", "dynamodb:UpdateTimeToLive"]
ACCOUNT = re.compile(r"\d{12}\Z")
LAMBDA_ARN = re.compile(r"arn:(?P<partition>[\w-]+):lambda:(?P<region>[\w-]+):(?P<account>\d{12}):function:"
                        r"(?P<name>[\w-]+)(?::(?P<qualifier>[\w$-]+))?\Z")
LAMBDA_PARTIAL = re.compile(r"(?:(?P<account>\d{12}):function:)?(?P<name>[\w-]+)(?::(?P<qualifier>[\w$-]+))?\Z")


def resolve_online(config: Config, region: str, session: Any) -> tuple[str, dict[str, str]]:
    """check --iam --online: the caller's account (STS) and every queue's ARN as SQS reports it
    (what check --online resolves). StartupError when AWS says no."""
    from ..aws.clients import build_clients
    from ..aws.session import trusted_ca_bundle
    from ..metrics import Registry
    from ..lifecycle.assembly import build_parts

    endpoint = {"endpoint_url": config.aws.endpoint_url} if config.aws.endpoint_url else {}
    sts = session.create_client("sts", region_name=region, verify=trusted_ca_bundle(config.aws.ca_bundle, session),
                                **endpoint)
    try:
        account = str(sts.get_caller_identity()["Account"])
    except AWS_ERRORS as error:
        raise StartupError(f"cannot tell the account (STS GetCallerIdentity): {describe_error(error)}") from None
    parts = build_parts(config, build_clients(config, region, session), Registry(), random.Random())
    queues = [*parts.queues.values(), *parts.dead_letter_queues.values()]
    return account, {queue.name: queue.arn for queue in queues}


def partition_of(region: str) -> str:
    if region.startswith("cn-"):
        return "aws-cn"
    if region.startswith("us-gov-"):
        return "aws-us-gov"
    return "aws"


def queue_arn(name: str, url: str | None, region: str, account: str) -> str:
    """From an SQS queue URL (https://sqs.REGION.amazonaws.com/ACCOUNT/NAME) where given, else the
    caller's account and region (GetQueueUrl by name looks there)."""
    if url:
        parts = urllib.parse.urlsplit(url)
        path = [part for part in parts.path.split("/") if part]
        if len(path) == 2 and ACCOUNT.match(path[0]):
            account = path[0]
        host = re.fullmatch(r"(?:sqs\.([\w-]+)|([\w-]+)\.queue)\.amazonaws\.com(?:\.cn)?", parts.hostname or "")
        if host:
            region = host.group(1) or host.group(2)
    return f"arn:{partition_of(region)}:sqs:{region}:{account}:{name}"


def function_arn(target: LambdaTargetConfig, region: str, account: str) -> str:
    """The ARN Invoke is authorized on: qualified when the target names a version or alias."""
    full = LAMBDA_ARN.match(target.function)
    if full:
        partition, region, account = full["partition"], full["region"], full["account"]
        name, qualifier = full["name"], full["qualifier"]
    else:
        partial = LAMBDA_PARTIAL.match(target.function)
        partition = partition_of(region)
        name, qualifier = (partial["name"], partial["qualifier"]) if partial else (target.function, None)
        account = (partial["account"] if partial else None) or account
    qualifier = target.qualifier or qualifier
    return f"arn:{partition}:lambda:{region}:{account}:function:{name}" + (f":{qualifier}" if qualifier else "")


def build_policy(config: Config, region: str, account: str = ANY_ACCOUNT,
                 known_arns: Mapping[str, str] | None = None) -> dict[str, Any]:
    """The policy document. `account` is the caller's, which owns what is named without an account (queues
    without a url, the table, functions by name); `known_arns` maps queue names to the ARNs SQS reported."""
    known = dict(known_arns or {})
    polled = [known.get(queue.name) or queue_arn(queue.name, queue.url, region, account) for queue in config.queues]
    partition = partition_of(region)
    dead_letters = list(dict.fromkeys(known.get(name) or f"arn:{partition}:sqs:{region}:{account}:{name}"
                                      for name in (queue.dead_letter_queue for queue in config.queues) if name))
    statements: list[dict[str, Any]] = [statement("ReceiveAndSettle", CONSUME_ACTIONS, polled)]
    if dead_letters:
        statements.append(statement("SendToDeadLetterQueues", DEAD_LETTER_ACTIONS, dead_letters))
    periodic = config.periodic
    if periodic is not None:
        sent_to = polled[[queue.name for queue in config.queues].index(periodic.queue)]
        statements.append(statement("SendPeriodicTasks", ["sqs:SendMessage"], [sent_to]))
        if periodic.claims_table:
            table = f"arn:{partition}:dynamodb:{region}:{account}:table/{periodic.claims_table}"
            statements.append(statement("ClaimPeriodicSlots", CLAIMS_ACTIONS, [table]))
    if config.fleet is not None:
        table = f"arn:{partition}:dynamodb:{region}:{account}:table/{config.fleet.table}"
        statements.append(statement("ShareFleetLimits", FLEET_ACTIONS, [table]))
    if config.idempotency is not None:
        table = f"arn:{partition}:dynamodb:{region}:{account}:table/{config.idempotency.table}"
        statements.append(statement("RememberDeliveries", IDEMPOTENCY_ACTIONS, [table]))
    # A target with its own endpoint_url invokes a container beside the daemon, not Lambda: no permission.
    functions = list(dict.fromkeys(function_arn(target, region, account) for target in config.targets.values()
                                   if isinstance(target, LambdaTargetConfig) and target.endpoint_url is None))
    if functions:
        statements.append(statement("InvokeFunctions", ["lambda:InvokeFunction"], functions))
    statements.extend(payload_statements(config, partition))
    if config.name:
        metrics = statement("PutMetrics", ["cloudwatch:PutMetricData"], ["*"])  # no resource-level permission
        metrics["Condition"] = {"StringEquals": {"cloudwatch:namespace": f"Workerless-{config.name}"}}
        statements.append(metrics)
    return {"Version": POLICY_VERSION, "Statement": statements}


def payload_statements(config: Config, partition: str) -> list[dict[str, Any]]:
    """S3 for large payloads (the extended-client pointer names its bucket per message, so any bucket:
    narrow it to yours)."""
    large = [queue for queue in config.queues if queue.large_payloads]
    if not large:
        return []
    actions = ["s3:GetObject"]
    if any(queue.delete_payloads for queue in large):
        actions.append("s3:DeleteObject")
    return [statement("ReadLargePayloads", actions, [f"arn:{partition}:s3:::*/*"])]


def statement(sid: str, actions: list[str], resources: list[str]) -> dict[str, Any]:
    return {"Sid": sid, "Effect": "Allow", "Action": actions, "Resource": resources}


def policy_notes(policy: dict[str, Any]) -> list[str]:
    """What an operator should know before pasting the policy (printed on stderr, not in the JSON)."""
    notes = []
    resources = [resource for item in policy["Statement"] for resource in item["Resource"]]
    if any(resource.split(":")[4:5] == [ANY_ACCOUNT] for resource in resources if resource.startswith("arn:")):
        notes.append("the account is not in the configuration: ARNs use * for it; run check --iam --online "
                     "(one STS and the SQS calls of check --online) or replace * with your account id")
    if any(item["Sid"] == "ReadLargePayloads" for item in policy["Statement"]):
        notes.append("large payloads: each message names its S3 bucket, so the policy allows any; "
                     "replace arn:...:s3:::*/* with your payload bucket(s)")
    return notes
