"""`workerless check --iam` through the real CLI: the least-privilege policy of a configuration that uses
every feature, offline (ARNs from the configuration) and --online (the account from STS, queue ARNs from SQS)."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from tests.support import REPO_ROOT, Queue, write_config

EVERY_FEATURE = """
name = "orders"

[[queues]]
url = "https://sqs.eu-west-1.amazonaws.com/111122223333/payments"
dead_letter_queue = "payments-dlq"

[[queues]]
name = "{second}"
target = "billing"
dead_letter_queue = "{dead_letters}"

[[queues]]
name = "{third}"
target = "ledger"
large_payloads = true
delete_payloads = true

[targets.default]
type = "http"
url = "http://127.0.0.1:8080/work"

[targets.billing]
type = "lambda"
function = "billing-fn"
qualifier = "live"

[targets.ledger]
type = "lambda"
function = "arn:aws:lambda:eu-west-1:444455556666:function:ledger"

[periodic]
queue = "{second}"
claims_table = "workerless-cron"

[[periodic.tasks]]
name = "nightly"
url = "/tasks/nightly"
schedule = "0 23 * * *"

[aws]
region = "eu-west-1"
"""
SQS_CONSUME = ["sqs:ReceiveMessage", "sqs:DeleteMessage", "sqs:ChangeMessageVisibility", "sqs:GetQueueUrl",
               "sqs:GetQueueAttributes"]
DYNAMODB = ["dynamodb:PutItem", "dynamodb:GetItem", "dynamodb:DescribeTable", "dynamodb:CreateTable",
            "dynamodb:DescribeTimeToLive", "dynamodb:UpdateTimeToLive"]


def check_iam(config: Path, env: dict[str, str], *extra: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, str(REPO_ROOT / "bin" / "workerless"), "check", "--iam", *extra,
                           "-c", str(config)], env=env, capture_output=True, text=True, timeout=60)


def expected_policy(region: str, account: str, second: str, third: str, dead_letters: str,
                    arns: dict[str, str] | None = None) -> dict[str, Any]:
    def arn(name: str) -> str:
        return (arns or {}).get(name) or f"arn:aws:sqs:{region}:{account}:{name}"

    return {"Version": "2012-10-17", "Statement": [
        {"Sid": "ReceiveAndSettle", "Effect": "Allow", "Action": SQS_CONSUME,
         "Resource": ["arn:aws:sqs:eu-west-1:111122223333:payments", arn(second), arn(third)]},
        {"Sid": "SendToDeadLetterQueues", "Effect": "Allow",
         "Action": ["sqs:SendMessage", "sqs:GetQueueUrl", "sqs:GetQueueAttributes"],
         "Resource": [arn("payments-dlq"), arn(dead_letters)]},
        {"Sid": "SendPeriodicTasks", "Effect": "Allow", "Action": ["sqs:SendMessage"], "Resource": [arn(second)]},
        {"Sid": "ClaimPeriodicSlots", "Effect": "Allow", "Action": DYNAMODB,
         "Resource": [f"arn:aws:dynamodb:{region}:{account}:table/workerless-cron"]},
        {"Sid": "InvokeFunctions", "Effect": "Allow", "Action": ["lambda:InvokeFunction"],
         "Resource": [f"arn:aws:lambda:{region}:{account}:function:billing-fn:live",
                      "arn:aws:lambda:eu-west-1:444455556666:function:ledger"]},
        {"Sid": "ReadLargePayloads", "Effect": "Allow", "Action": ["s3:GetObject", "s3:DeleteObject"],
         "Resource": ["arn:aws:s3:::*/*"]},
        {"Sid": "PutMetrics", "Effect": "Allow", "Action": ["cloudwatch:PutMetricData"], "Resource": ["*"],
         "Condition": {"StringEquals": {"cloudwatch:namespace": "Workerless-orders"}}},
    ]}


def test_the_policy_of_a_configuration_with_every_feature(aws_env: dict[str, str], tmp_path: Path) -> None:
    config = write_config(tmp_path, EVERY_FEATURE.format(second="reports", third="ledger-jobs",
                                                         dead_letters="reports-dlq"))
    done = check_iam(config, aws_env)
    assert done.returncode == 0, done.stderr
    policy = json.loads(done.stdout)  # stdout is the policy alone, ready for a file
    expected = expected_policy("eu-west-1", "*", "reports", "ledger-jobs", "reports-dlq")
    assert policy == expected
    assert done.stderr.splitlines() == [
        f"region: eu-west-1 (from [aws] region in {config})",
        "note: the account is not in the configuration: ARNs use * for it; run check --iam --online "
        "(one STS and the SQS calls of check --online) or replace * with your account id",
        "note: large payloads: each message names its S3 bucket, so the policy allows any; "
        "replace arn:...:s3:::*/* with your payload bucket(s)"]


def test_online_the_account_and_queue_arns_come_from_aws(
    aws_env: dict[str, str], make_queue: Callable[..., Queue], tmp_path: Path,
) -> None:
    first, first_dlq, second, third, dead_letters = (make_queue() for _ in range(5))
    text = EVERY_FEATURE.format(second=second.name, third=third.name, dead_letters=dead_letters.name)
    # On moto the first queue's URL names moto's host and its default account.
    text = text.replace("https://sqs.eu-west-1.amazonaws.com/111122223333/payments", first.url)
    text = text.replace("payments-dlq", first_dlq.name).replace('region = "eu-west-1"', 'region = "us-east-1"')
    done = check_iam(write_config(tmp_path, text), aws_env, "--online")
    assert done.returncode == 0, done.stderr
    arns = {queue.name: queue.arn for queue in (second, third, dead_letters)}
    expected = expected_policy("us-east-1", "123456789012", second.name, third.name, dead_letters.name, arns)
    expected["Statement"][0]["Resource"][0] = first.arn
    expected["Statement"][1]["Resource"] = [first_dlq.arn, dead_letters.arn]
    assert json.loads(done.stdout) == expected
    assert first.arn.startswith("arn:aws:sqs:us-east-1:123456789012:")
    notes = [line for line in done.stderr.splitlines() if line.startswith("note:")]
    assert notes == ["note: large payloads: each message names its S3 bucket, so the policy allows any; "
                     "replace arn:...:s3:::*/* with your payload bucket(s)"], done.stderr  # the account is known


def test_an_online_check_of_a_missing_queue_exits_1(aws_env: dict[str, str], tmp_path: Path) -> None:
    config = write_config(tmp_path, '[[queues]]\nname = "t-no-such-queue"\n\n[targets.default]\ntype = "http"\n'
                                    'url = "http://127.0.0.1:8080/"\n')
    done = check_iam(config, aws_env, "--online")
    assert (done.returncode, done.stdout) == (1, "")
    assert done.stderr.startswith("workerless: queue t-no-such-queue: ")


def test_iam_is_an_option_of_check_only(aws_env: dict[str, str], tmp_path: Path) -> None:
    done = subprocess.run([sys.executable, str(REPO_ROOT / "bin" / "workerless"), "--iam", "--queues=a",
                           "--http=http://127.0.0.1:9/"], env=aws_env, capture_output=True, text=True, timeout=60)
    assert (done.returncode, done.stdout) == (2, "")
    assert done.stderr.splitlines() == ["workerless: option --iam is only for workerless check "
                                        "(see workerless --help for usage)"]


def test_the_docs_show_the_policy_of_conf_prod_toml(aws_env: dict[str, str]) -> None:
    readme = (REPO_ROOT / "docs" / "deployment" / "iam.md").read_text()
    (shown,) = re.findall(r"For `conf/prod.toml` in `eu-west-1`:\n\n```json\n(.*?)```", readme, re.S)
    done = check_iam(REPO_ROOT / "conf" / "prod.toml", {**aws_env, "AWS_REGION": "eu-west-1"})
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == json.loads(shown)
