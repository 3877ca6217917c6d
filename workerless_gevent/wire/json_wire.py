"""AWS JSON 1.0 calls without botocore's client, over `wire.http`: the protocol SQS and DynamoDB share.

A botocore client call costs 1-2 ms of CPU (parameter validation, event hooks, model-driven serializing and
parsing). `JsonWire` builds the JSON body itself, signs it with `sigv4.Signer` (botocore's signature, with the
session's refreshable credentials), sends it on one `wire.http.Connections` pool to the endpoint, and parses
the answer with json's C scanner. Errors keep botocore's types so callers need not know which path ran: an error
answer raises `ClientError` (the client's modeled subclass when known) with a botocore-shaped response, the
error shape's own members included (DynamoDB's CancellationReasons), and a connection failure or timeout
raises a `BotoCoreError` (see `aws.AWS_ERRORS`). Each call is retried as botocore's standard mode would
(`retries.Retrier`), after one immediate resend when a pooled connection turns out to be closed before any
answer.
"""

from __future__ import annotations

import json
import json.scanner
import ssl
import time
from http.client import HTTPException
from collections.abc import Callable
from typing import Any

import botocore.exceptions

from .endpoint import AwsEndpoint
from .http import STALE_ERRORS, post_request
from .sigv4 import Signer

ENCODE_JSON = json.JSONEncoder(separators=(",", ":")).encode  # json.dumps would build an encoder per call
# json.loads' C scanner, without its Python layers (typeshed types make_scanner's argument as itself)
SCAN_JSON: Callable[[str, int], tuple[Any, int]] = json.scanner.make_scanner(json.JSONDecoder())  # type: ignore[arg-type]


class Encoded(str):
    """A request's parameters already in JSON (the idempotency table's claims and completions, made from
    templates: `idempotency.store.Template`), sent as they are."""


class JsonWire(AwsEndpoint):
    """AWS JSON 1.0: every call a POST to the endpoint's path, the action named in X-Amz-Target."""

    target_prefix = ""  # X-Amz-Target is this and the action
    keep_headers = ("x-amzn-requestid", "x-amzn-query-error")

    def sign_for(self, credentials: Any, path: str) -> None:
        self.path = path or "/"
        self.signer = Signer(credentials, self.region, self.signing_name, self.host, self.path)

    # ---------------------------------------------------------------- one request

    def call(self, action: str, params: dict[str, Any] | Encoded, deadline: float | None = None) -> dict[str, Any]:
        """One call with botocore's standard-mode retries (see `retries`), signed anew per attempt; no retry
        starts past `deadline` (time.monotonic(): for a batch, when its first message is visible again)."""
        return self.retrier.call(lambda: self.call_once(action, params), deadline)

    def call_once(self, action: str, params: dict[str, Any] | Encoded) -> dict[str, Any]:
        """POST one JSON request; the parsed answer with ResponseMetadata, or a botocore exception."""
        body = (params if isinstance(params, Encoded) else ENCODE_JSON(params)).encode("utf-8")
        headers = self.signer.headers(self.target_prefix + action, body)
        request = post_request(self.path, self.fixed_headers, headers, body)
        started = time.monotonic()
        try:
            response = self.http.exchange(request, resend_if_stale=True)
        except (OSError, HTTPException) as error:
            raise self.connection_error(error, started) from error
        status, data = response.status, response.body
        if status >= 300:
            raise self.client_error(action, status, response.headers, data)
        try:
            parsed = decode_json(data) if data else {}
        except ValueError as error:
            raise botocore.exceptions.HTTPClientError(error=f"{action}: answer is not JSON: {error}") from None
        if not isinstance(parsed, dict):
            raise botocore.exceptions.HTTPClientError(error=f"{action}: answer is not a JSON object")
        if None in parsed.values():  # botocore leaves out members that came back null
            parsed = {key: value for key, value in parsed.items() if value is not None}
        metadata: dict[str, Any] = {"HTTPStatusCode": status}
        request_id = response.headers.get("x-amzn-requestid")
        if request_id is not None:
            metadata["RequestId"] = request_id
        parsed["ResponseMetadata"] = metadata
        return parsed

    def connection_error(self, error: BaseException, started: float) -> botocore.exceptions.BotoCoreError:
        url = self.endpoint_url
        if isinstance(error, (*STALE_ERRORS, ConnectionAbortedError, HTTPException)):
            return botocore.exceptions.ConnectionClosedError(endpoint_url=url, error=error)
        if isinstance(error, TimeoutError):
            # A read timeout needs read_timeout seconds of silence; anything sooner was the connect.
            if self.connect_timeout < self.read_timeout and time.monotonic() - started < self.read_timeout:
                return botocore.exceptions.ConnectTimeoutError(endpoint_url=url, error=error)
            return botocore.exceptions.ReadTimeoutError(endpoint_url=url, error=error)
        if isinstance(error, ssl.SSLError):
            return botocore.exceptions.SSLError(endpoint_url=url, error=error)
        if isinstance(error, OSError):  # refused, unreachable, DNS
            return botocore.exceptions.EndpointConnectionError(endpoint_url=url, error=error)
        return botocore.exceptions.HTTPClientError(error=error)

    def client_error(self, action: str, status: int, headers: dict[str, str],
                     data: bytes) -> botocore.exceptions.ClientError:
        """botocore's JSON error parsing, query-compatible codes included, and its modeled exception class."""
        try:
            body = json.loads(data) if data else {}
        except ValueError:
            body = {"message": data.decode("utf-8", "replace")}
        if not isinstance(body, dict):
            body = {}
        error: dict[str, Any] = {"Message": body.get("message", body.get("Message", "")), "Code": ""}
        code = str(body.get("__type") or status)
        if ":" in code:
            code = code.split(":", 1)[0]
        if "#" in code:
            code = code.rsplit("#", 1)[1]
        query_error = headers.get("x-amzn-query-error", "").split(";")
        if len(query_error) == 2 and query_error[0]:
            error["QueryErrorCode"] = code
            error["Type"] = query_error[1]
            code = query_error[0]
        error["Code"] = code
        metadata: dict[str, Any] = {"HTTPStatusCode": status, "HTTPHeaders": headers}
        if "x-amzn-requestid" in headers:
            metadata["RequestId"] = headers["x-amzn-requestid"]
        parsed = {"Error": error, "ResponseMetadata": metadata}
        for key, value in body.items():  # an error shape's own members, as botocore's parser keeps them
            if key not in ("__type", "message", "Message"):
                parsed.setdefault(key, value)
        error_class = botocore.exceptions.ClientError
        if self.exceptions is not None:  # SQS's modeled exceptions go by shape name (QueryErrorCode), as in botocore
            error_class = self.exceptions.from_code(error.get("QueryErrorCode") or code)
        result: botocore.exceptions.ClientError = error_class(parsed, action)
        return result


def decode_json(data: bytes) -> Any:
    """json.loads of an AWS answer (UTF-8), through the C scanner alone when the text is one JSON value with
    nothing around it, as AWS writes it; anything else goes to json.loads, for its value or its error."""
    text = data.decode("utf-8")
    try:
        value, end = SCAN_JSON(text, 0)
    except StopIteration:  # not a value at the start (whitespace, or not JSON)
        return json.loads(text)
    return value if end == len(text) else json.loads(text)
