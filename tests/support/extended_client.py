"""The AWS Python extended client (`amazon-sqs-extended-client`) as a producer or a consumer, run as its own
process: importing it replaces boto3.Session for the whole interpreter, which no test process may suffer.

    python tests/support/extended_client.py send QUEUE_URL BUCKET < body
    python tests/support/extended_client.py receive QUEUE_URL BUCKET   -> JSON {"body", "attributes"} or null
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

SCRIPT = Path(__file__).resolve()


def run_extended_client(command: str, queue_url: str, bucket: str, env: dict[str, str],
                        body: str | None = None) -> Any:
    """Run this file in a fresh interpreter; the parsed JSON it prints."""
    done = subprocess.run([sys.executable, str(SCRIPT), command, queue_url, bucket], input=body, env=env,
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def main(command: str, queue_url: str, bucket: str) -> None:
    import boto3
    import sqs_extended_client  # noqa: F401 - replaces boto3.Session with its own

    sqs = boto3.Session().client("sqs")
    sqs.large_payload_support = bucket
    if command == "send":
        attributes = {"color": {"DataType": "String", "StringValue": "blue"}}
        response = sqs.send_message(QueueUrl=queue_url, MessageBody=sys.stdin.read(), MessageAttributes=attributes)
        print(json.dumps(response["MessageId"]))
        return
    response = sqs.receive_message(QueueUrl=queue_url, MaxNumberOfMessages=1, WaitTimeSeconds=5,
                                   MessageAttributeNames=["All"])
    messages = response.get("Messages", [])
    print(json.dumps({"body": messages[0]["Body"], "attributes": messages[0].get("MessageAttributes", {})}
                     if messages else None))


if __name__ == "__main__":
    main(*sys.argv[1:4])
