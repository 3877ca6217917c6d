"""Lambda's Invoke without botocore's client: the REST call over `wire.http`, signed by `sigv4.RestSigner`.

An Invoke through a botocore client costs about 1 ms of CPU (validation, event hooks, model-driven
serializing and parsing), ten times the POST of the HTTP target. `LambdaWire.invoke` takes the
client's keyword arguments and returns its result shape (StatusCode, FunctionError,
ExecutedVersion, the Payload readable as botocore's StreamingBody), and fails with botocore's exceptions, parsed as
its rest-json parser does, so `targets.aws_lambda` cannot tell which path ran.

Retries: the client runs with `total_max_attempts=1`, because an Invoke repeated after any byte of
it left may run the function twice, and SQS redelivery is the retry. The wire keeps that, and only
repeats what cannot have reached Lambda: a connection that failed to open (refused, unreachable,
connect timeout), as botocore's standard mode would (`retries.Retrier`). A throttle is never
repeated here: the target pauses on it. A pooled connection found closed is not resent either.

A Lambda target's own `endpoint_url` (the emulator in AWS's Lambda images, beside the daemon) gets a wire of
its own whose answers are read as the emulator gives them (`wire.lambda_emulator`), unsigned where
`aws.clients.lambda_endpoint_signed` says so.
"""

from __future__ import annotations

import http.client
import io
import json
import random
import ssl
import time
import urllib.parse
from http.client import HTTPException
from typing import Any, Unpack

import botocore.exceptions
import gevent.socket

from .endpoint import AwsEndpoint, WireOptions
from .http import STALE_ERRORS, Connections, post_request
from .lambda_emulator import as_lambda_answer
from .parsing import AnswerTooLarge
from .retries import Retrier, retry_cost
from .sigv4 import MAX_CACHED_TARGETS, RestSigner

INVOKE_PATH = "/2015-03-31/functions/{}/invocations"
URI_SAFE = "-._~"  # botocore's percent_encode: everything else in a name, ARN or qualifier is escaped
# Output members bound to headers, as botocore's model names them.
HEADER_MEMBERS = (("FunctionError", "x-amz-function-error"), ("LogResult", "x-amz-log-result"),
                  ("ExecutedVersion", "x-amz-executed-version"),
                  ("DurableExecutionArn", "x-amz-durable-execution-arn"))
# Lambda answers a synchronous Invoke with at most 6 MB; a function's endpoint_url (an emulator) could send any
# amount, which would be read into memory whole: past this, the invocation fails instead
MAX_ANSWER_BYTES = 7 * 1024 * 1024
KEPT_HEADERS = ("x-amzn-requestid", "x-amzn-errortype", *(name for _, name in HEADER_MEMBERS))


class NothingSent(OSError):
    """The connection failed to open: no byte of the request left, so sending it again is safe."""


class InvokeConnections(Connections):
    """`wire.http.Connections` that mark a failure to connect, the one failure an Invoke may repeat."""

    def _connect(self, deadline: float | None = None) -> gevent.socket.socket:
        try:
            return super()._connect(deadline)
        except OSError as error:
            raise NothingSent(str(error)) from error


def retry_cost_if_nothing_sent(error: BaseException) -> int | None:
    """Standard mode's price for an error raised before the request left, else no retry."""
    return retry_cost(error) if isinstance(error.__cause__, NothingSent) else None


class LambdaWire(AwsEndpoint):
    """Lambda's REST-JSON Invoke: a POST to the function's path, signed with the path, query and headers."""

    service = "Lambda"
    signing_name = "lambda"
    keep_headers = KEPT_HEADERS
    connections = InvokeConnections
    max_answer_bytes = MAX_ANSWER_BYTES

    def __init__(self, endpoint_url: str, region: str, credentials: Any, *, is_signed: bool = True,
                 is_emulator: bool = False, **options: Unpack[WireOptions]) -> None:
        super().__init__(endpoint_url, region, credentials, **options)
        self.is_signed = is_signed  # False: no Authorization (a target's endpoint_url on loopback, or no credentials)
        self.is_emulator = is_emulator  # answers read as the Runtime Interface Emulator's (wire.lambda_emulator)
        self.targets: dict[tuple[str, str | None], tuple[str, str]] = {}  # (name, qualifier) -> (path, query)

    def default_retrier(self) -> Retrier:
        return Retrier(random.Random(), cost=retry_cost_if_nothing_sent)

    def sign_for(self, credentials: Any, path: str) -> None:
        # botocore's _urljoin: the operation's path goes after the endpoint's own path, if any.
        self.base_path = path[:-1] if path.endswith("/") else path
        self.signer = RestSigner(credentials, self.region, self.signing_name, self.host)

    def invoke(self, *, FunctionName: str, Payload: bytes | str = b"", InvocationType: str | None = None,
               Qualifier: str | None = None) -> dict[str, Any]:
        """boto3's `invoke` for the arguments the target uses; one attempt unless the connection never opened."""
        path, query = self.targets.get((FunctionName, Qualifier)) or self.escape(FunctionName, Qualifier)
        headers = {} if InvocationType is None else {"X-Amz-Invocation-Type": InvocationType}
        body = Payload.encode("utf-8") if isinstance(Payload, str) else Payload
        # Each attempt may take a connect and a read timeout, and the retries end within the same bound.
        deadline = time.monotonic() + self.connect_timeout + self.read_timeout
        return self.retrier.call(lambda: self.invoke_once(path, query, headers, body, deadline, FunctionName), deadline)

    def escape(self, function_name: str, qualifier: str | None) -> tuple[str, str]:
        """The escaped path and query of a function, kept: the daemon invokes the same few again and again."""
        path = self.base_path + INVOKE_PATH.format(urllib.parse.quote(function_name, safe=URI_SAFE))
        query = "" if qualifier is None else "Qualifier=" + urllib.parse.quote(qualifier, safe=URI_SAFE)
        if len(self.targets) >= MAX_CACHED_TARGETS:
            self.targets.clear()
        self.targets[function_name, qualifier] = (path, query)
        return path, query

    def invoke_once(self, path: str, query: str, headers: dict[str, str], body: bytes, deadline: float,
                    function_name: str = "") -> dict[str, Any]:
        target = f"{path}?{query}" if query else path
        if self.is_signed:
            headers = self.signer.headers("POST", path, query, headers, body)
        else:
            headers = {"Host": self.host, **headers}
        try:
            reply = self.http.exchange(post_request(target, self.fixed_headers, headers, body), deadline=deadline)
        except (OSError, HTTPException) as error:
            raise self.connection_error(error, self.endpoint_url.rstrip("/") + target) from error
        status, reply_headers, data = reply.status, reply.headers, reply.body
        if self.is_emulator:
            status, reply_headers, data = as_lambda_answer(status, reply_headers, data, function_name)
        if status >= 300:
            raise self.client_error(status, reply_headers, data)
        response: dict[str, Any] = {"ResponseMetadata": metadata(status, reply_headers), "StatusCode": status}
        for member, name in HEADER_MEMBERS:
            if name in reply_headers:
                response[member] = reply_headers[name]
        response["Payload"] = io.BytesIO(data)  # read() as botocore's StreamingBody, without its urllib3 import
        return response

    def connection_error(self, error: BaseException, url: str) -> botocore.exceptions.BotoCoreError:
        """The exception botocore's HTTP session raises for the same failure."""
        if isinstance(error, NothingSent):
            cause = error.__cause__
            if isinstance(cause, TimeoutError):
                return botocore.exceptions.ConnectTimeoutError(endpoint_url=url, error=cause)
            if isinstance(cause, ssl.SSLError):
                return botocore.exceptions.SSLError(endpoint_url=url, error=cause)
            return botocore.exceptions.EndpointConnectionError(endpoint_url=url, error=cause)
        if isinstance(error, AnswerTooLarge):
            return botocore.exceptions.HTTPClientError(error=f"{url} answered HTTP {error.status} with a body over "
                                                             f"{error.max_body_bytes} bytes (Lambda's limit is 6 MB)")
        if isinstance(error, TimeoutError):  # silent past read_timeout, or the whole exchange past its deadline
            return botocore.exceptions.ReadTimeoutError(endpoint_url=url, error=error)
        if isinstance(error, ssl.SSLError) and not isinstance(error, STALE_ERRORS):
            return botocore.exceptions.SSLError(endpoint_url=url, error=error)
        # Closed or reset after the request went, before a complete answer: urllib3's ProtocolError.
        return botocore.exceptions.ConnectionClosedError(endpoint_url=url, error=error)

    def client_error(self, status: int, headers: dict[str, str], data: bytes) -> botocore.exceptions.ClientError:
        """botocore's rest-json error parsing, and the client's modeled exception class when known."""
        error = parse_error(status, headers, data)
        parsed = {"Error": error, "ResponseMetadata": metadata(status, headers)}
        error_class = botocore.exceptions.ClientError
        if self.exceptions is not None:
            error_class = self.exceptions.from_code(error["Code"])
        result: botocore.exceptions.ClientError = error_class(parsed, "Invoke")
        return result


def parse_error(status: int, headers: dict[str, str], data: bytes) -> dict[str, Any]:
    """Error.Code and Error.Message as botocore's RestJSONParser makes them."""
    stripped = data.strip()
    if status >= 500 and (not stripped or stripped.startswith(b"<html>")):  # a proxy's or balancer's page
        return {"Code": str(status), "Message": http.client.responses.get(status, "")}
    text = data.decode("utf-8", "replace")
    try:
        body = json.loads(text) if data else {}
    except ValueError:
        body = {"message": text}
    if not isinstance(body, dict):
        body = {}
    code: Any = str(body.get("__type", status))
    code = code.split(":", 1)[0].rsplit("#", 1)[-1]
    if "x-amzn-errortype" in headers:  # Lambda names its error here, e.g. "TooManyRequestsException:"
        code = headers["x-amzn-errortype"]
    elif "code" in body or "Code" in body:
        code = body.get("code", body.get("Code", ""))
    if isinstance(code, str):
        code = code.split(":", 1)[0].rsplit("#", 1)[-1]
    return {"Message": body.get("message", body.get("Message", "")), "Code": code}


def metadata(status: int, headers: dict[str, str]) -> dict[str, Any]:
    result: dict[str, Any] = {"HTTPStatusCode": status, "HTTPHeaders": headers}
    if "x-amzn-requestid" in headers:
        result["RequestId"] = headers["x-amzn-requestid"]
    return result
