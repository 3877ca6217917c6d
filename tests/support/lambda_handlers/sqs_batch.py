"""An SQS handler as written for Lambda with ReportBatchItemFailures, standard library only: run in process by
the stand-in emulator (tests/support/lambda_emulator.py) and, unchanged, by the real aws-lambda-rie through
awslambdaric (tests/support/real_emulator.py), as the same code runs on Lambda and in its image.

A record's body says what to do: `fail...` is reported in batchItemFailures, `raise` raises, `hang` outlasts
any test timeout, `exit` ends the runtime, `summary` makes the handler return a summary of its own instead of
batchItemFailures (with an `errorType` member, as some do); anything else succeeds after a little work. With
SQS_BATCH_LOG set, each invocation appends its records' [body, ApproximateReceiveCount] pairs to that file as a
JSON line."""

from __future__ import annotations

import json
import os
import sys
import time
from typing import Any

WORK_SECONDS = 0.05  # per record: invocations sent meanwhile would overlap


def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
    records = event["Records"]
    log = os.environ.get("SQS_BATCH_LOG")
    if log:
        with open(log, "a", encoding="utf-8") as file:
            file.write(json.dumps([[r["body"], r["attributes"]["ApproximateReceiveCount"]] for r in records]) + "\n")
    failures = []
    for record in records:
        body = record["body"]
        if body == "raise":
            raise ValueError(f"cannot process {record['messageId']}")
        if body == "hang":
            time.sleep(30)
        if body == "exit":
            sys.exit(3)
        if body.startswith("fail"):
            failures.append({"itemIdentifier": record["messageId"]})
        time.sleep(WORK_SECONDS)
    if any(record["body"] == "summary" for record in records):
        return {"processed": len(records), "errorType": "none", "errorMessage": ""}
    return {"batchItemFailures": failures}
