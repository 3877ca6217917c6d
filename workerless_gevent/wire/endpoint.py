"""What every signed AWS client over `wire.http` is built from: the endpoint, the pool, the timeouts, the retries.

The protocols differ above it: AWS JSON 1.0 for SQS and DynamoDB (`json_wire.JsonWire`), REST-JSON for Lambda's
Invoke (`aws_lambda.LambdaWire`). Each subclass names its service, the answer headers it keeps, and how it signs
(`sign_for`); the construction below is theirs alike, and so are `for_client` and `close`.
"""

from __future__ import annotations

import random
import sys
import urllib.parse
from typing import Any, ClassVar, Required, Self, TypedDict, Unpack

import botocore

from .. import __version__
from .http import Connections, host_header, tls_context
from .retries import Retrier

KEEPALIVE_IDLE_SECONDS = 30.0  # AWS's load balancers keep idle connections longer than this
USER_AGENT = (f"workerless/{__version__} botocore/{botocore.__version__} "
              f"python/{sys.version_info.major}.{sys.version_info.minor}")


class WireOptions(TypedDict, total=False):
    """A wire's settings past its endpoint, region and credentials, as `AwsEndpoint.__init__` takes them, for
    the constructors that pass them on (`for_client`, `LambdaWire`)."""

    concurrency: Required[int]  # connections at most: one per greenlet that calls at once
    read_timeout: Required[float]
    connect_timeout: float  # default 5 s
    exceptions: Any  # a boto3 client's `exceptions`, to raise its modeled errors (None: ClientError itself)
    ca_bundle: str | None  # the CAs an https endpoint is checked against (None: the system's)
    retrier: Retrier | None  # shared by every call to the endpoint (None: `default_retrier`)


class AwsEndpoint:
    """One HTTP pool to one service's endpoint, shared by every greenlet; build it before spawning any."""

    service = ""  # the name in errors
    signing_name = ""
    keep_headers: ClassVar[tuple[str, ...]] = ("x-amzn-requestid",)  # the answer headers the calls read
    connections: ClassVar[type[Connections]] = Connections
    max_answer_bytes: ClassVar[int | None] = None  # an answer body longer than this ends the call (AnswerTooLarge)

    def __init__(self, endpoint_url: str, region: str, credentials: Any, *, concurrency: int, read_timeout: float,
                 connect_timeout: float = 5.0, exceptions: Any = None, ca_bundle: str | None = None,
                 retrier: Retrier | None = None) -> None:
        parts = urllib.parse.urlsplit(endpoint_url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError(f"{self.service} endpoint URL must be http(s)://host[:port]: {endpoint_url!r}")
        self.endpoint_url = endpoint_url
        self.region = region
        self.exceptions = exceptions
        self.read_timeout = read_timeout
        self.connect_timeout = connect_timeout
        self.retrier = retrier or self.default_retrier()
        self.host = host_header(parts.hostname, parts.port, parts.scheme)
        self.fixed_headers = f"User-Agent: {USER_AGENT}\r\n"
        secure = parts.scheme == "https"
        self.http = self.connections(parts.hostname, parts.port or (443 if secure else 80),
                                     limit=concurrency, connect_timeout=connect_timeout, read_timeout=read_timeout,
                                     tls=tls_context(ca_bundle) if secure else None,
                                     keep_headers=self.keep_headers, keepalive_idle=KEEPALIVE_IDLE_SECONDS,
                                     tcp_keepalive=True, max_body_bytes=self.max_answer_bytes)
        self.sign_for(credentials, parts.path)

    def default_retrier(self) -> Retrier:
        """The retries of a wire built without a retrier: botocore's standard mode (`retries.retry_cost`)."""
        return Retrier(random.Random())

    def sign_for(self, credentials: Any, path: str) -> None:
        """Set up the signer of the calls, and their path under the endpoint URL's own `path`."""
        raise NotImplementedError

    @classmethod
    def for_client(cls, client: Any, credentials: Any, **options: Unpack[WireOptions]) -> Self:
        """The endpoint and region a boto3 client resolved (AWS_ENDPOINT_URL[_SERVICE], endpoint_url, region),
        and its modeled exceptions."""
        options.setdefault("exceptions", client.exceptions)
        return cls(client.meta.endpoint_url, client.meta.region_name, credentials, **options)

    def close(self) -> None:
        self.http.close()
