#!/usr/bin/env python3
"""CPU cost of the parts every SQS-to-HTTP forwarder pays, measured alone in one gevent process:
a ReceiveMessage of 10 (all attributes), a DeleteMessageBatch of 10, and one POST to the sink
(50 at a time through one geventhttpclient, as the baseline does). Their sum per message,
POST + (receive + delete) / 10, is the floor for a daemon built on these libraries on this
machine: whatever the baseline spends above it is its own overhead. The same POST through the
daemon's own HTTP client (`workerless_gevent/wire/http.py`) is measured too, for comparison.

Usage: components.py QUEUE_URL SINK_URL ROUNDS   (QUEUE_URL must hold ROUNDS*10 messages)
Prints one JSON object. AWS endpoint and credentials come from the environment.
"""

from gevent import monkey

monkey.patch_all()

import json  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402
import urllib.parse  # noqa: E402
from typing import Callable  # noqa: E402

import boto3  # noqa: E402
import botocore.config  # noqa: E402
import gevent  # noqa: E402
import gevent.pool  # noqa: E402
from geventhttpclient import HTTPClient  # noqa: E402

sys.path.insert(0, str(__import__("pathlib").Path(__file__).resolve().parent.parent))
from workerless_gevent.wire.http import Connections  # noqa: E402


def cpu_per(count: int, action) -> float:
    """Microseconds of process CPU per unit of `action`, which performs `count` units."""
    started = time.process_time()
    action()
    return (time.process_time() - started) / count * 1e6


def main() -> int:
    queue_url, sink_url, rounds = sys.argv[1], sys.argv[2], int(sys.argv[3])
    sqs = boto3.session.Session().client("sqs", config=botocore.config.Config(
        max_pool_connections=64, connect_timeout=5, read_timeout=30, tcp_keepalive=True,
        retries={"mode": "standard", "total_max_attempts": 3}))
    target = urllib.parse.urlsplit(sink_url)
    http = HTTPClient(target.hostname, target.port, concurrency=50, connection_timeout=5, network_timeout=30,
                      headers={"User-Agent": "aws-sqsd/components"})
    # warm up: connections, botocore's lazily built parsers and serializers
    sqs.get_queue_attributes(QueueUrl=queue_url, AttributeNames=["QueueArn"])
    http.request("POST", "/", body=b"{}").read()

    batches: list[list[dict]] = []

    def receive() -> None:
        for _ in range(rounds):
            batches.append(sqs.receive_message(QueueUrl=queue_url, MaxNumberOfMessages=10, WaitTimeSeconds=0,
                                               VisibilityTimeout=300, MessageSystemAttributeNames=["All"],
                                               MessageAttributeNames=["All"]).get("Messages", []))

    receive_us = cpu_per(rounds, receive)
    received = sum(len(batch) for batch in batches)

    def delete() -> None:
        for batch in batches:
            if batch:
                sqs.delete_message_batch(QueueUrl=queue_url, Entries=[
                    {"Id": str(i), "ReceiptHandle": m["ReceiptHandle"]} for i, m in enumerate(batch)])

    delete_us = cpu_per(max(1, sum(1 for b in batches if b)), delete)
    messages = [m for batch in batches for m in batch] or [{"MessageId": "x", "Body": "{}"}]
    posts = max(2000, len(messages))

    def post_one(index: int) -> None:
        message = messages[index % len(messages)]
        response = http.request("POST", "/", body=message["Body"].encode(), headers={
            "Content-Type": "application/json", "X-Aws-Sqsd-Msgid": message["MessageId"],
            "X-Aws-Sqsd-Queue": "components", "X-Aws-Sqsd-Receive-Count": "1"})
        response.read()
        response.release()

    def fifty_at_a_time(post: Callable[[int], None]) -> Callable[[], None]:
        def run() -> None:
            pool = gevent.pool.Pool(50)
            for index in range(posts):
                pool.spawn(post, index)
            pool.join()
        return run

    post_us = cpu_per(posts, fifty_at_a_time(post_one))

    def post_in_line() -> None:
        for index in range(posts // 4):
            post_one(index)

    post_serial_us = cpu_per(posts // 4, post_in_line)
    wire = Connections(target.hostname or "127.0.0.1", target.port or 80, limit=50, connect_timeout=5,
                       read_timeout=30, quick_ack=True, keep_headers=("Retry-After",),
                       keep_headers_of_errors_only=True, keep_body=False)

    def wire_post_one(index: int) -> None:
        message = messages[index % len(messages)]
        body = message["Body"].encode()
        head = (f"POST / HTTP/1.1\r\nHost: {target.netloc}\r\nUser-Agent: aws-sqsd/components\r\n"
                f"Content-Length: {len(body)}\r\nContent-Type: application/json\r\n"
                f"X-Aws-Sqsd-Msgid: {message['MessageId']}\r\nX-Aws-Sqsd-Queue: components\r\n"
                f"X-Aws-Sqsd-Receive-Count: 1\r\n\r\n")
        wire.exchange(head.encode("latin-1") + body, deadline=time.monotonic() + 30)

    wire_post_one(0)  # warm up: a connection
    wire_post_us = cpu_per(posts, fifty_at_a_time(wire_post_one))

    def spawn_join() -> None:
        pool = gevent.pool.Pool(50)
        for _ in range(posts):
            pool.spawn(gevent.sleep, 0)
        pool.join()

    greenlet_us = cpu_per(posts, spawn_join)
    print(json.dumps({
        "received": received,
        "receive_10_us": receive_us,
        "delete_batch_10_us": delete_us,
        "post_us_at_50": post_us,
        "post_us_one_at_a_time": post_serial_us,
        "http_wire_post_us_at_50": wire_post_us,
        "greenlet_spawn_join_us": greenlet_us,
        "floor_us_per_msg": post_us + (receive_us + delete_us) / 10,
    }))
    return 0


if __name__ == "__main__":
    sys.exit(main())
