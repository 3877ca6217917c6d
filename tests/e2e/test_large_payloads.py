"""large_payloads: bodies over 256 KiB that the AWS extended clients (or `workerless send --s3-bucket`) put
in S3 reach the app and the function whole; delete_payloads removes the object after a success only; a
payload that is gone fails, is retried and is dead-lettered like any other failure (on a FIFO queue the rest of its
group is released behind it, its tries unspent)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Callable

from tests.e2e.helpers import the_one_lambda_record, workerless_send
from tests.support import (
    Daemon,
    HttpApp,
    MotoServer,
    Queue,
    build_config_file,
    count_messages,
    receive_all,
    wait_until,
)
from tests.support.extended_client import run_extended_client
from workerless_gevent.envelopes import PayloadPointer, pointer_body

MIB_BODY = ("h\u00e9llo w\u00f6rld \u2713 \U0001f680 {\"k\": [1, 2.5, null]}\r\n\t" * 30000).encode("utf-8")[
    :1048576].decode("utf-8", "ignore")


def keys_in(s3: Any, bucket: str) -> list[str]:
    return [item["Key"] for item in s3.list_objects_v2(Bucket=bucket).get("Contents", [])]


def offloaded_send(queue: Queue, bucket: str, body: str, env: dict[str, str], tmp_path: Path) -> None:
    sent = workerless_send([queue.name, f"--s3-bucket={bucket}", "--attr=color=blue"], env, tmp_path, stdin=body)
    assert sent.returncode == 0, sent.stderr


def http_config(tmp_path: Path, queue: Queue, app: HttpApp, **queue_settings: Any) -> Path:
    return build_config_file(tmp_path, queues=[{"name": queue.name, "large_payloads": True, **queue_settings}],
                             targets={"default": {"type": "http", "url": f"{app.url}/work"}})


def test_a_1_mib_body_round_trips_byte_exact_and_its_object_is_deleted_after_success(
    daemon: Callable[..., Daemon], aws_env: dict[str, str], http_app: HttpApp, sqs: Any, s3: Any, bucket: str,
    make_queue: Callable[..., Queue], tmp_path: Path,
) -> None:
    queue = make_queue()
    offloaded_send(queue, bucket, MIB_BODY, aws_env, tmp_path)
    sent_small = workerless_send([queue.name, "small", f"--s3-bucket={bucket}"], aws_env, tmp_path)
    assert sent_small.returncode == 0, sent_small.stderr
    (key,) = keys_in(s3, bucket)  # only the large body went to S3
    proc = daemon(["-c", str(http_config(tmp_path, queue, http_app, delete_payloads=True))], env=aws_env)
    requests = {request.body: request for request in http_app.wait_for_requests(2, timeout=60)}
    wait_until(lambda: count_messages(sqs, queue.url) == 0, 30, message="not deleted")
    wait_until(lambda: keys_in(s3, bucket) == [], 15, message=f"s3://{bucket}/{key} not deleted")
    assert proc.stop(timeout=30) == 0
    request = requests[MIB_BODY.encode("utf-8")]
    assert len(request.body) > 1_000_000 and int(request.headers["content-length"]) == len(request.body)
    attributes = {name: value for name, value in request.headers.items() if name.startswith("x-aws-sqsd-attr-")}
    assert attributes == {"x-aws-sqsd-attr-color": "blue"}  # the extended clients' size attribute is not shown
    assert b"small" in requests


def test_a_failed_delivery_keeps_its_payload(
    daemon: Callable[..., Daemon], aws_env: dict[str, str], http_app: HttpApp, sqs: Any, s3: Any, bucket: str,
    make_queue: Callable[..., Queue], tmp_path: Path,
) -> None:
    queue = make_queue()
    offloaded_send(queue, bucket, MIB_BODY, aws_env, tmp_path)
    answers = iter([500, 500])
    http_app.respond = lambda request: (next(answers, 200), {}, b"")
    config = http_config(tmp_path, queue, http_app, delete_payloads=True, error_visibility_timeout=0)
    proc = daemon(["-c", str(config)], env=aws_env)
    http_app.wait_for_requests(2, timeout=60)
    assert len(keys_in(s3, bucket)) == 1  # still there after each failure
    wait_until(lambda: count_messages(sqs, queue.url) == 0, 30, message="not delivered in the end")
    wait_until(lambda: keys_in(s3, bucket) == [], 15, message="not deleted after the success")
    assert proc.stop(timeout=30) == 0
    assert [request.body == MIB_BODY.encode("utf-8") for request in http_app.requests] == [True] * 3


def test_a_missing_payload_fails_and_is_dead_lettered_with_its_pointer(
    daemon: Callable[..., Daemon], aws_env: dict[str, str], http_app: HttpApp, sqs: Any, s3: Any, bucket: str,
    make_queue: Callable[..., Queue], tmp_path: Path,
) -> None:
    queue, dead_letters = make_queue(), make_queue()
    offloaded_send(queue, bucket, MIB_BODY, aws_env, tmp_path)
    (key,) = keys_in(s3, bucket)
    s3.delete_object(Bucket=bucket, Key=key)
    config = http_config(tmp_path, queue, http_app, error_visibility_timeout=0, max_retries=2,
                         dead_letter_queue=dead_letters.name)
    proc = daemon(["-c", str(config)], env=aws_env)
    wait_until(lambda: count_messages(sqs, dead_letters.url) == 1, 60, message="not dead-lettered")
    wait_until(lambda: count_messages(sqs, queue.url) == 0, 30, message="not deleted from the source queue")
    assert proc.stop(timeout=30) == 0
    assert http_app.requests == []
    (dead,) = receive_all(sqs, dead_letters.url)
    assert json.loads(dead["Body"]) == ["software.amazon.payloadoffloading.PayloadS3Pointer",
                                        {"s3BucketName": bucket, "s3Key": key}]
    attributes = dead["MessageAttributes"]
    assert attributes["ExtendedPayloadSize"]["StringValue"] == str(len(MIB_BODY.encode("utf-8")))
    assert attributes["workerless.error"]["StringValue"].startswith(f"PayloadNotFound: s3://{bucket}/{key}")
    assert proc.output().count("type=PayloadNotFound") == 2


def test_a_function_gets_the_payload_in_its_record(
    daemon: Callable[..., Daemon], aws_env: dict[str, str], moto_server: MotoServer, moto_lambda_function: str,
    sqs: Any, bucket: str, make_queue: Callable[..., Queue], tmp_path: Path,
) -> None:
    queue = make_queue()
    offloaded_send(queue, bucket, MIB_BODY, aws_env, tmp_path)
    config = build_config_file(tmp_path, queues=[{"name": queue.name, "large_payloads": True}],
                               targets={"default": {"type": "lambda", "function": moto_lambda_function}})
    proc = daemon(["-c", str(config)], env=aws_env)
    record = the_one_lambda_record(proc, sqs, queue, moto_server, moto_lambda_function)
    assert record["body"] == MIB_BODY
    assert list(record["messageAttributes"]) == ["color"]


def test_what_the_python_extended_client_sends_reaches_the_app(
    daemon: Callable[..., Daemon], aws_env: dict[str, str], http_app: HttpApp, sqs: Any, bucket: str,
    make_queue: Callable[..., Queue], tmp_path: Path,
) -> None:
    queue = make_queue()
    run_extended_client("send", queue.url, bucket, aws_env, body=MIB_BODY)
    raw = sqs.receive_message(QueueUrl=queue.url, VisibilityTimeout=0, MessageAttributeNames=["All"])["Messages"][0]
    assert json.loads(raw["Body"])[0] == "software.amazon.payloadoffloading.PayloadS3Pointer"  # it did offload
    proc = daemon(["-c", str(http_config(tmp_path, queue, http_app))], env=aws_env)
    (request,) = http_app.wait_for_requests(1, timeout=60)
    wait_until(lambda: count_messages(sqs, queue.url) == 0, 30, message="not deleted")
    assert proc.stop(timeout=30) == 0
    assert request.body == MIB_BODY.encode("utf-8")
    assert request.headers["x-aws-sqsd-attr-color"] == "blue"


def test_what_workerless_send_offloads_the_python_extended_client_reads(
    aws_env: dict[str, str], bucket: str, make_queue: Callable[..., Queue], tmp_path: Path,
) -> None:
    queue = make_queue()
    offloaded_send(queue, bucket, MIB_BODY, aws_env, tmp_path)
    received = run_extended_client("receive", queue.url, bucket, aws_env)
    assert received["body"] == MIB_BODY
    assert received["attributes"] == {"color": {"StringValue": "blue", "DataType": "String"}}


def test_a_fifo_batch_releases_the_rest_of_a_group_behind_a_missing_payload_which_alone_is_dead_lettered(
    daemon: Callable[..., Daemon], aws_env: dict[str, str], http_app: HttpApp, sqs: Any, s3: Any, bucket: str,
    make_queue: Callable[..., Queue], tmp_path: Path,
) -> None:
    queue, dead_letters = make_queue(fifo=True), make_queue(fifo=True)
    for index, payload in enumerate(["first", None, "third"]):  # the second one's object is gone
        key = f"g-{index}"
        if payload is not None:
            s3.put_object(Bucket=bucket, Key=key, Body=payload.encode())
        size = {"ExtendedPayloadSize": {"DataType": "Number", "StringValue": str(len(payload or ""))}}
        sqs.send_message(QueueUrl=queue.url, MessageBody=pointer_body(PayloadPointer(bucket, key)),
                         MessageAttributes=size, MessageGroupId="g", MessageDeduplicationId=key)
    config = build_config_file(
        tmp_path, queues=[{"name": queue.name, "large_payloads": True, "error_visibility_timeout": 0,
                           "max_retries": 2, "dead_letter_queue": dead_letters.name}],
        targets={"default": {"type": "http", "url": f"{http_app.url}/sqs", "batch_size": 10}})
    proc = daemon(["-c", str(config)], env=aws_env)
    wait_until(lambda: count_messages(sqs, queue.url) == 0, 60,
               message=lambda: f"{[request.body for request in http_app.requests]}\n{proc.output()[-3000:]}")
    assert proc.stop(timeout=30) == 0

    # "third" waited behind the missing payload, its tries unspent, and was delivered once that one was gone
    delivered = [record["body"] for request in http_app.requests for record in json.loads(request.body)["Records"]]
    assert delivered == ["first", "third"]
    (dead,) = receive_all(sqs, dead_letters.url)
    assert json.loads(dead["Body"])[1]["s3Key"] == "g-1"
    assert proc.output().count("type=PayloadNotFound") == 2
