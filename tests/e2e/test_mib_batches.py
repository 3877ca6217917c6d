"""Messages of 1 MiB (SQS's limit since August 2025) through the real daemon, in FIFO batches of ten to a Lambda
function (the loopback stand-in) and to an HTTP app with batch_size 10: every request under 6 MB, and a batch
whose first part did not wholly succeed sends no later part (its records are released behind the failure)."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.support import (Daemon, FakeLambda, HttpApp, Invocation, LambdaReply, Queue, RecordedRequest,
                           build_config_file, count_messages, lambda_result, wait_until)
from workerless_gevent.targets.event_parts import MAX_PAYLOAD_BYTES

MIB = 1024 * 1024
BODIES = [f"{i}" + "x" * (MIB - 1) for i in range(10)]


def fail_the_second_record_once(records: list[dict[str, Any]], failed: list[str]) -> dict[str, Any]:
    """batchItemFailures naming the message with body 1 the first time it is seen, nothing after."""
    for record in records:
        if record["body"] == BODIES[1] and not failed:
            failed.append(record["messageId"])
            return {"batchItemFailures": [{"itemIdentifier": record["messageId"]}]}
    return {"batchItemFailures": []}


@pytest.mark.parametrize("kind", ["lambda", "http"])
def test_a_fifo_batch_of_1_mib_messages_goes_under_6_mb_and_stops_at_its_first_failed_part(
    kind: str, daemon: Callable[..., Daemon], aws_env: dict[str, str], http_app: HttpApp, fake_lambda: FakeLambda,
    sqs: Any, make_queue: Callable[..., Queue], tmp_path: Path,
) -> None:
    queue = make_queue(fifo=True)
    for index, body in enumerate(BODIES):  # one by one: a SendMessageBatch holds 1 MiB in all
        sqs.send_message(QueueUrl=queue.url, MessageBody=body, MessageGroupId="g", MessageDeduplicationId=str(index))
    failed: list[str] = []
    requests: list[tuple[int, list[dict[str, Any]]]] = []  # (bytes, records) of each POST or Invoke, in order

    def answer_invoke(invocation: Invocation) -> LambdaReply:
        records = invocation.payload["Records"]
        requests.append((len(invocation.raw), records))
        return lambda_result(fail_the_second_record_once(records, failed))

    def answer_post(request: RecordedRequest) -> tuple[int, dict[str, str], bytes]:
        records = json.loads(request.body)["Records"]
        requests.append((len(request.body), records))
        answer = json.dumps(fail_the_second_record_once(records, failed)).encode()
        return 200, {"Content-Type": "application/json"}, answer

    fake_lambda.respond, http_app.respond = answer_invoke, answer_post
    target = {"type": "lambda", "function": "fn-fake", "timeout": 30} if kind == "lambda" else {
        "type": "http", "url": f"{http_app.url}/sqs"}
    config = build_config_file(tmp_path, concurrency=4, shutdown_timeout=5,
                               queues=[{"name": queue.name, "error_visibility_timeout": 0}],
                               targets={"default": {**target, "batch_size": 10}})
    proc = daemon(["-c", str(config)], env={**aws_env, "AWS_ENDPOINT_URL_LAMBDA": fake_lambda.url})
    wait_until(lambda: count_messages(sqs, queue.url) == 0, 90,
               message=lambda: f"{[[r['body'][0] for r in rs] for _, rs in requests]}\n{proc.output()[-3000:]}")
    assert proc.stop(timeout=30) == 0

    assert all(size <= MAX_PAYLOAD_BYTES for size, _ in requests), [size for size, _ in requests]
    assert [record["body"] for record in requests[0][1]] == BODIES[:5]  # five 1 MiB records fill a part
    sent = [(record["body"][0], record["attributes"]["ApproximateReceiveCount"])
            for _, records in requests for record in records]
    # the second part (bodies 5-9) was released behind the failure, never sent on its first receive
    assert [body for body, count in sent if count == "1"] == list("01234"), sent
    assert sorted(body for body, _ in sent[5:]) == list("123456789"), sent  # each once more, nothing lost
    log = proc.output()
    assert log.count("outcome=failure") == 1 and "delivered=10 failed=1" in log
