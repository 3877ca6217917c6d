#!/usr/bin/env python3
"""The plain baseline the benchmark compares workerless with: same language, same libraries, written as a person
would first write it with gevent + boto3 + geventhttpclient. One greenlet per slot, each looping: receive 10 from
the queues in priority order (short receives, a long poll on the last), POST each message to the app with the
aws-sqsd headers that matter, delete the successes with one DeleteMessageBatch. One boto3 client with a pool as
large as the slots, one geventhttpclient with as many connections; no buffer, no watchers, no coalescing.

Usage: baseline.py --queues=a,b,c --http=URL --concurrency=N [--poll-for=S] [--max-messages=N]; AWS_ENDPOINT_URL
and the credentials come from the environment, as for boto3.
"""

from gevent import monkey

monkey.patch_all()

import argparse  # noqa: E402
import signal  # noqa: E402
import sys  # noqa: E402
import urllib.parse  # noqa: E402

import boto3  # noqa: E402
import botocore.config  # noqa: E402
import gevent  # noqa: E402
import gevent.event  # noqa: E402
from geventhttpclient import HTTPClient  # noqa: E402

def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--queues", required=True)
    parser.add_argument("--http", required=True)
    parser.add_argument("--concurrency", type=int, default=10)
    parser.add_argument("--poll-for", type=int, default=10)
    parser.add_argument("--max-messages", type=int, default=0)
    args = parser.parse_args()

    names = args.queues.split(",")
    sqs = boto3.session.Session().client(
        "sqs", config=botocore.config.Config(max_pool_connections=args.concurrency + 10,
                                             read_timeout=args.poll_for + 10))
    urls = [sqs.get_queue_url(QueueName=name)["QueueUrl"] for name in names]
    target = urllib.parse.urlsplit(args.http)
    http = HTTPClient(target.hostname, target.port or 80, concurrency=args.concurrency,
                      connection_timeout=5, network_timeout=180)
    path = target.path or "/"
    stop = gevent.event.Event()
    delivered = 0

    def slot() -> None:
        nonlocal delivered
        while not stop.is_set():
            messages: list = []
            name, url = names[0], urls[0]
            for index, (name, url) in enumerate(zip(names, urls)):
                wait = args.poll_for if index == len(urls) - 1 else 0
                messages = sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10, WaitTimeSeconds=wait,
                                               MessageSystemAttributeNames=["All"],
                                               MessageAttributeNames=["All"]).get("Messages", [])
                if messages:
                    break
            done = []
            for message in messages:
                headers = {"Content-Type": "application/json", "User-Agent": "aws-sqsd/baseline",
                           "X-Aws-Sqsd-Msgid": message["MessageId"], "X-Aws-Sqsd-Queue": name,
                           "X-Aws-Sqsd-Receive-Count": message.get("Attributes", {}).get("ApproximateReceiveCount",
                                                                                         "1")}
                try:
                    response = http.request("POST", path, body=message["Body"].encode(), headers=headers)
                    response.read()
                    response.release()
                    if 200 <= response.status_code < 300:
                        done.append(message)
                except OSError:
                    pass
            if done:
                sqs.delete_message_batch(QueueUrl=url, Entries=[
                    {"Id": str(i), "ReceiptHandle": m["ReceiptHandle"]} for i, m in enumerate(done)])
                delivered += len(done)
                if args.max_messages and delivered >= args.max_messages:
                    stop.set()

    for signum in (signal.SIGTERM, signal.SIGINT):
        gevent.signal_handler(signum, stop.set)
    slots = [gevent.spawn(slot) for _ in range(args.concurrency)]
    print(f"baseline started: queues={args.queues} concurrency={args.concurrency}", file=sys.stderr, flush=True)
    gevent.wait([stop] + slots, count=1)  # a stop, or a slot that died
    stop.set()
    crashed = [s for s in slots if s.dead and s.exception is not None]
    gevent.killall(slots, timeout=2)
    print(f"baseline stopped: delivered={delivered}", file=sys.stderr, flush=True)
    return 1 if crashed else 0

if __name__ == "__main__":
    sys.exit(main())
