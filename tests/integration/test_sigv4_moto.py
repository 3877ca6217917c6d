"""Signer on the wire: GetQueueUrl and ReceiveMessage signed by it and sent to a real moto server.

moto does not verify SigV4 signatures by default (only with INITIAL_NO_AUTH_ACTION_COUNT set,
which this session's server is not), so these tests show that the headers make a well-formed
request SQS's JSON protocol accepts, not that the signature is right; tests/unit/test_sigv4.py
shows that, against botocore's own signer.
"""

from __future__ import annotations

import http.client
import json
from collections.abc import Callable
from typing import Any
from urllib.parse import urlsplit

import boto3

from tests.support import MotoServer, Queue
from tests.support.moto import REGION
from workerless_gevent.wire.sigv4 import Signer


def post(endpoint: str, signer: Signer, action: str, params: dict[str, Any]) -> tuple[int, dict[str, Any]]:
    parts = urlsplit(endpoint)
    body = json.dumps(params, separators=(",", ":")).encode()
    connection = http.client.HTTPConnection(parts.hostname or "", parts.port, timeout=10)
    try:
        connection.request("POST", parts.path or "/", body=body, headers=signer.headers("AmazonSQS." + action, body))
        response = connection.getresponse()
        return response.status, json.loads(response.read() or b"{}")
    finally:
        connection.close()


def test_signed_requests_are_answered_by_moto(moto_server: MotoServer, sqs: Any,
                                             make_queue: Callable[..., Queue]) -> None:
    queue = make_queue()
    sqs.send_message(QueueUrl=queue.url, MessageBody="signed by sigv4.Signer")
    parts = urlsplit(moto_server.url)
    signer = Signer(boto3.session.Session().get_credentials(), REGION, "sqs", parts.netloc, parts.path or "/")

    status, answer = post(moto_server.url, signer, "GetQueueUrl", {"QueueName": queue.name})
    assert status == 200, answer
    assert answer["QueueUrl"] == queue.url

    status, answer = post(moto_server.url, signer, "ReceiveMessage",
                          {"QueueUrl": queue.url, "MaxNumberOfMessages": 10, "WaitTimeSeconds": 0})
    assert status == 200, answer
    assert [message["Body"] for message in answer["Messages"]] == ["signed by sigv4.Signer"]
