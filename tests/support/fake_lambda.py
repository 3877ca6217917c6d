"""A loopback server speaking the Lambda Invoke REST API, for outcomes moto cannot produce.

moto without Docker always "succeeds", so function errors and throttles come from here. Point a
boto3 lambda client at it with `endpoint_url=fake.url` (or `AWS_ENDPOINT_URL_LAMBDA` for a
subprocess). Only `POST /2015-03-31/functions/{FunctionName}/invocations` is served.
"""

from __future__ import annotations

import json
import re
import uuid
from dataclasses import dataclass, field
from typing import Any, Callable
from urllib.parse import parse_qs, unquote

import gevent

from .http_app import Headers, RecordingServer, Reply, headers_from_environ
from .wait import wait_until

# As a path, or as the absolute URI a client sends through an HTTP proxy (the stand-in then is that proxy).
INVOKE_PATH = re.compile(r"^(?:http://[^/]+)?/2015-03-31/functions/([^/]+)/invocations/?$")


@dataclass(frozen=True)
class Invocation:
    function_name: str  # URL-decoded: a name or an ARN, exactly as the caller sent it
    qualifier: str | None
    payload: Any  # parsed JSON, or None if the body was not JSON
    raw: bytes
    headers: Headers
    invocation_type: str  # RequestResponse | Event | DryRun
    arrived: float
    proxied: bool = False  # sent as to an HTTP proxy (an absolute URI): by a botocore client, not the wire


@dataclass(frozen=True)
class LambdaReply:
    status: int
    body: bytes
    headers: dict[str, str] = field(default_factory=dict)


def lambda_result(payload: Any = None) -> LambdaReply:
    """The function returned `payload` (JSON-encoded; bytes are sent as they are)."""
    body = payload if isinstance(payload, bytes) else json.dumps(payload).encode()
    return LambdaReply(200, body)


def lambda_function_error(message: str = "boom", error_type: str = "Exception") -> LambdaReply:
    """The function raised: 200 with `X-Amz-Function-Error: Unhandled`, as Lambda answers."""
    body = {"errorMessage": message, "errorType": error_type, "stackTrace": []}
    return LambdaReply(200, json.dumps(body).encode(), {"X-Amz-Function-Error": "Unhandled"})


def lambda_service_error(status: int, error_type: str, message: str) -> LambdaReply:
    """A Lambda API error; botocore takes the code from `x-amzn-ErrorType`."""
    body = {"Type": "User" if status < 500 else "Service", "message": message}
    return LambdaReply(status, json.dumps(body).encode(), {"x-amzn-ErrorType": error_type})


def lambda_throttle() -> LambdaReply:
    """What Lambda sends when concurrency is exhausted; boto3 raises TooManyRequestsException."""
    return lambda_service_error(429, "TooManyRequestsException", "Rate exceeded")


def parse_invocation(environ: dict[str, Any], function_name: str, arrived: float) -> Invocation:
    raw = environ["wsgi.input"].read()
    try:
        payload = json.loads(raw) if raw else None
    except ValueError:
        payload = None
    headers = headers_from_environ(environ)
    query = parse_qs(environ.get("QUERY_STRING", ""))
    return Invocation(
        function_name=function_name,
        qualifier=query.get("Qualifier", [None])[0],
        payload=payload,
        raw=raw,
        headers=headers,
        invocation_type=headers.get("x-amz-invocation-type", "RequestResponse"),
        arrived=arrived,
        proxied=environ.get("PATH_INFO", "").startswith("http://"),
    )


class FakeLambda(RecordingServer):
    """Records invocations; `respond(invocation) -> LambdaReply` and `delay` set the behaviour."""

    def __init__(self) -> None:
        super().__init__()
        self.invocations: list[Invocation] = []
        self.respond: Callable[[Invocation], LambdaReply] = lambda inv: lambda_result(None)
        self.delay: float = 0.0

    def reply(self, reply: LambdaReply) -> None:
        """Answer every invocation with `reply`."""
        self.respond = lambda inv: reply

    def script(self, *replies: LambdaReply, then: LambdaReply | None = None) -> None:
        """Answer the next invocations with `replies` in order, then with `then` (default: null)."""
        pending = list(replies)
        after = then or lambda_result(None)
        self.respond = lambda inv: pending.pop(0) if pending else after

    def handle(self, environ: dict[str, Any], arrived: float) -> Reply:
        match = INVOKE_PATH.match(environ.get("PATH_INFO", ""))
        if environ["REQUEST_METHOD"] != "POST" or not match:
            reply = lambda_service_error(404, "ResourceNotFoundException", "not an Invoke call")
            return reply.status, reply.headers, reply.body
        invocation = parse_invocation(environ, unquote(match.group(1)), arrived)
        self.invocations.append(invocation)
        if self.delay:
            gevent.sleep(self.delay)
        reply = self.respond(invocation)
        out = {
            "Content-Type": "application/json",
            "x-amzn-RequestId": str(uuid.uuid4()),
            **reply.headers,
        }
        body = reply.body
        succeeded = reply.status == 200 and "X-Amz-Function-Error" not in reply.headers
        if succeeded and invocation.invocation_type == "Event":
            return 202, out, b""
        if succeeded:
            out.setdefault("X-Amz-Executed-Version", invocation.qualifier or "$LATEST")
        return reply.status, out, body

    def wait_for_invocations(self, n: int, timeout: float = 10.0) -> list[Invocation]:
        """Wait until at least `n` invocations have arrived; return all of them."""
        wait_until(
            lambda: len(self.invocations) >= n,
            timeout,
            message=lambda: f"expected {n} invocations, got {len(self.invocations)}",
        )
        return list(self.invocations)
