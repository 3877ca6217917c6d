"""The daemon's SQS calls without botocore's client: AWS JSON 1.0 over `wire.http`.

ReceiveMessage, DeleteMessageBatch and ChangeMessageVisibilityBatch are nearly all of the daemon's
SQS traffic, and a botocore client call costs 1-2 ms of CPU (parameter validation, event hooks,
model-driven serializing and parsing). The start-up calls (GetQueueUrl, GetQueueAttributes) and the
rare SendMessage (dead letters, periodic tasks) go the same way, so that the daemon never builds a
botocore SQS client: one costs about 10 MB and 100 ms, mostly botocore's endpoint data. `SqsWire` builds the JSON body itself, signs it with
`sigv4.Signer` (botocore's signature, with the session's refreshable credentials), sends it on
one `wire.http.Connections` pool to the client's endpoint, and parses the answer with `json.loads`.

It stands in for the boto3 client on those methods only, with the same keyword arguments
and the same result shapes: binary message attributes come back as bytes, as botocore decodes
them. Errors keep botocore's types so callers need not know which path ran: an error answer
raises `ClientError` (the client's modeled subclass when known) with a botocore-shaped response,
and a connection failure or timeout raises a `BotoCoreError` (see `aws.AWS_ERRORS`). Each call
is retried as botocore's standard mode would (`retries.Retrier`), after one immediate resend when
a pooled connection turns out to be closed before any answer.
"""

from __future__ import annotations

import base64
import json
import random
import ssl
import sys
import time
import urllib.parse
import urllib.request
from http.client import HTTPException
from typing import Any

import botocore
import botocore.exceptions

from .. import __version__
from .http import STALE_ERRORS, Connections, host_header, post_request, tls_context
from .retries import Retrier
from .sigv4 import Signer

TARGET_PREFIX = "AmazonSQS."
SIGNING_NAME = "sqs"
KEEPALIVE_IDLE_SECONDS = 30.0  # SQS's load balancers keep idle connections longer than this
USER_AGENT = (f"workerless/{__version__} botocore/{botocore.__version__} "
              f"python/{sys.version_info.major}.{sys.version_info.minor}")

# Only members of botocore's model are kept, and nulls are dropped, as botocore's parser does.
MESSAGE_KEYS = ("MessageId", "ReceiptHandle", "MD5OfBody", "Body", "Attributes", "MD5OfMessageAttributes",
                "MessageAttributes")
ATTRIBUTE_VALUE_KEYS = ("StringValue", "BinaryValue", "StringListValues", "BinaryListValues", "DataType")
MESSAGE_KEY_SET = frozenset(MESSAGE_KEYS)
TEXT_VALUE_KEY_SET = frozenset(("StringValue", "StringListValues", "DataType"))  # no binary value to decode



class SqsWire:
    """One HTTP pool to the SQS endpoint, shared by every greenlet; build it before spawning any."""

    def __init__(self, endpoint_url: str, region: str, credentials: Any, *, concurrency: int, read_timeout: float,
                 connect_timeout: float = 5.0, exceptions: Any = None, ca_bundle: str | None = None,
                 retrier: Retrier | None = None) -> None:
        parts = urllib.parse.urlsplit(endpoint_url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError(f"SQS endpoint URL must be http(s)://host[:port]: {endpoint_url!r}")
        self.endpoint_url = endpoint_url
        self.region = region
        self.exceptions = exceptions  # the boto3 client's `exceptions`, to raise its modeled errors
        self.read_timeout = read_timeout
        self.retrier = retrier or Retrier(random.Random())
        self.connect_timeout = connect_timeout
        self.path = parts.path or "/"
        self.host = host_header(parts.hostname or "", parts.port, parts.scheme)
        self.signer = Signer(credentials, region, SIGNING_NAME, self.host, self.path)
        self.fixed_headers = f"User-Agent: {USER_AGENT}\r\n"
        secure = parts.scheme == "https"
        self.http = Connections(parts.hostname, parts.port or (443 if secure else 80), limit=concurrency,
                                connect_timeout=connect_timeout, read_timeout=read_timeout,
                                tls=tls_context(ca_bundle) if secure else None,
                                keep_headers=("x-amzn-requestid", "x-amzn-query-error"),
                                keepalive_idle=KEEPALIVE_IDLE_SECONDS, tcp_keepalive=True)

    @classmethod
    def for_client(cls, sqs: Any, credentials: Any, *, concurrency: int, read_timeout: float,
                   connect_timeout: float = 5.0, ca_bundle: str | None = None) -> SqsWire:
        """The endpoint and region a boto3 SQS client resolved (AWS_ENDPOINT_URL[_SQS], endpoint_url, region)."""
        return cls(sqs.meta.endpoint_url, sqs.meta.region_name, credentials, concurrency=concurrency,
                   read_timeout=read_timeout, connect_timeout=connect_timeout, exceptions=sqs.exceptions,
                   ca_bundle=ca_bundle)

    def close(self) -> None:
        self.http.close()

    # ---------------------------------------------------------------- the boto3-shaped calls

    def receive_message(self, *, QueueUrl: str, MaxNumberOfMessages: int | None = None,
                        WaitTimeSeconds: int | None = None, VisibilityTimeout: int | None = None,
                        MessageSystemAttributeNames: list[str] | None = None,
                        MessageAttributeNames: list[str] | None = None,
                        ReceiveRequestAttemptId: str | None = None) -> dict[str, Any]:
        params: dict[str, Any] = {"QueueUrl": QueueUrl}
        for key, value in (("MaxNumberOfMessages", MaxNumberOfMessages), ("WaitTimeSeconds", WaitTimeSeconds),
                           ("VisibilityTimeout", VisibilityTimeout),
                           ("MessageSystemAttributeNames", MessageSystemAttributeNames),
                           ("MessageAttributeNames", MessageAttributeNames),
                           ("ReceiveRequestAttemptId", ReceiveRequestAttemptId)):
            if value is not None:
                params[key] = value
        response = self.call("ReceiveMessage", params)
        messages = response.get("Messages")
        if isinstance(messages, list):
            response["Messages"] = [parse_or_mark(raw) for raw in messages]
        return response

    def send_message(self, *, QueueUrl: str, MessageBody: str, **optional: Any) -> dict[str, Any]:
        """Optional members as botocore names them (MessageAttributes, DelaySeconds, MessageGroupId, ...)."""
        params: dict[str, Any] = {"QueueUrl": QueueUrl, "MessageBody": MessageBody}
        for key, value in optional.items():
            if value is not None:
                params[key] = encode_attributes(value) if key == "MessageAttributes" else value
        return self.call("SendMessage", params)

    def get_queue_url(self, *, QueueName: str, QueueOwnerAWSAccountId: str | None = None) -> dict[str, Any]:
        params = {"QueueName": QueueName}
        if QueueOwnerAWSAccountId is not None:
            params["QueueOwnerAWSAccountId"] = QueueOwnerAWSAccountId
        return self.call("GetQueueUrl", params)

    def get_queue_attributes(self, *, QueueUrl: str, AttributeNames: list[str]) -> dict[str, Any]:
        return self.call("GetQueueAttributes", {"QueueUrl": QueueUrl, "AttributeNames": AttributeNames})

    def delete_message_batch(self, *, QueueUrl: str, Entries: list[dict[str, Any]],
                             deadline: float | None = None) -> dict[str, Any]:
        return self.call("DeleteMessageBatch", {"QueueUrl": QueueUrl, "Entries": Entries}, deadline)

    def change_message_visibility_batch(self, *, QueueUrl: str, Entries: list[dict[str, Any]],
                                        deadline: float | None = None) -> dict[str, Any]:
        return self.call("ChangeMessageVisibilityBatch", {"QueueUrl": QueueUrl, "Entries": Entries}, deadline)

    # ---------------------------------------------------------------- one request

    def call(self, action: str, params: dict[str, Any], deadline: float | None = None) -> dict[str, Any]:
        """One call with botocore's standard-mode retries (see `retries`), signed anew per attempt; no retry
        starts past `deadline` (time.monotonic(): for a batch, when its first message is visible again)."""
        return self.retrier.call(lambda: self.call_once(action, params), deadline)

    def call_once(self, action: str, params: dict[str, Any]) -> dict[str, Any]:
        """POST one JSON request; the parsed answer with ResponseMetadata, or a botocore exception."""
        body = json.dumps(params, separators=(",", ":")).encode("utf-8")
        headers = self.signer.headers(TARGET_PREFIX + action, body)
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
            parsed = json.loads(data) if data else {}
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
        error_class = botocore.exceptions.ClientError
        if self.exceptions is not None:  # SQS's modeled exceptions go by shape name (QueryErrorCode), as in botocore
            error_class = self.exceptions.from_code(error.get("QueryErrorCode") or code)
        result: botocore.exceptions.ClientError = error_class(parsed, action)
        return result


def parse_or_mark(raw: object) -> object:
    """One message parsed; one we cannot parse is marked `Unreadable` (Message.from_sqs refuses it, so only
    it is skipped, not the whole answer), with its id and receipt handle if it had them."""
    if not isinstance(raw, dict):
        return raw
    try:
        return parse_message(raw)
    except (TypeError, ValueError, AttributeError) as error:  # binascii.Error is a ValueError
        kept = {key: raw[key] for key in ("MessageId", "ReceiptHandle") if isinstance(raw.get(key), str)}
        return {**kept, "Unreadable": f"{type(error).__name__}: {error}"}


def parse_message(raw: dict[str, Any]) -> dict[str, Any]:
    """One message as botocore returns it: model members only, binary attribute values as bytes. SQS's
    answer has nothing else, nearly always: then the decoded dict is that message (checked in C)."""
    if raw.keys() <= MESSAGE_KEY_SET and None not in raw.values():
        message = raw
    else:
        message = {key: raw[key] for key in MESSAGE_KEYS if raw.get(key) is not None}
    attributes = message.get("MessageAttributes")
    if attributes:
        message["MessageAttributes"] = {name: parse_attribute_value(value) for name, value in attributes.items()
                                        if isinstance(value, dict)}
    return message


def parse_attribute_value(raw: dict[str, Any]) -> dict[str, Any]:
    if raw.keys() <= TEXT_VALUE_KEY_SET and None not in raw.values():
        return raw  # a String or Number attribute as SQS wrote it: nothing to drop or decode
    value = {key: raw[key] for key in ATTRIBUTE_VALUE_KEYS if raw.get(key) is not None}
    if "BinaryValue" in value:
        value["BinaryValue"] = base64.b64decode(value["BinaryValue"])
    if "BinaryListValues" in value:
        value["BinaryListValues"] = [base64.b64decode(item) for item in value["BinaryListValues"]]
    return value


def encode_attributes(attributes: dict[str, Any]) -> dict[str, Any]:
    """Message attributes as the JSON protocol carries them: binary values in base64, as botocore sends them."""
    encoded = {}
    for name, value in attributes.items():
        value = dict(value)
        if isinstance(value.get("BinaryValue"), (bytes, bytearray)):
            value["BinaryValue"] = base64.b64encode(value["BinaryValue"]).decode("ascii")
        if "BinaryListValues" in value:
            value["BinaryListValues"] = [base64.b64encode(item).decode("ascii") if isinstance(item, (bytes, bytearray))
                                         else item for item in value["BinaryListValues"]]
        encoded[name] = value
    return encoded


def proxy_for(endpoint_url: str) -> str | None:
    """The proxy that botocore would use for this endpoint (HTTP(S)_PROXY unless NO_PROXY), if any."""
    parts = urllib.parse.urlsplit(endpoint_url)
    proxy = urllib.request.getproxies().get(parts.scheme)
    if not proxy or urllib.request.proxy_bypass(parts.hostname or ""):
        return None
    return proxy
