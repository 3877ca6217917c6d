"""Credentials from STS AssumeRoleWithWebIdentity (EKS IRSA, any OIDC token in a file), fetched by the daemon itself.

Where botocore's chain would end at its AssumeRoleWithWebIdentityProvider (aws.environment decides when, and
which STS endpoint botocore's client would call), the daemon makes the call botocore's fetcher makes, on our own
wire: the same unsigned Query-protocol POST (RoleArn; RoleSessionName: AWS_ROLE_SESSION_NAME, else
botocore-session-<epoch seconds> chosen once per process; WebIdentityToken: the token file, read again at each
fetch), botocore's 60 s timeouts and standard-mode retries (3 attempts; IDPCommunicationError too), the same
XML. So neither the start nor a renewal needs a child process or botocore's session.
"""

from __future__ import annotations

import datetime
import re
import time
import urllib.parse
from collections.abc import Mapping
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # the wire (gevent, ssl) is imported where used: aws.environment reads TOKEN_FILE before gevent patches
    import random

    import botocore.exceptions

    from ..wire.parsing import Reply
    from .child import FrozenCredentials

TOKEN_FILE, ROLE_ARN, SESSION_NAME = "AWS_WEB_IDENTITY_TOKEN_FILE", "AWS_ROLE_ARN", "AWS_ROLE_SESSION_NAME"
# Each changes how botocore's STS client would call (its retries, timeouts, endpoint): the child's to read.
CLIENT_VARIABLES = ("AWS_MAX_ATTEMPTS", "AWS_RETRY_MODE", "AWS_DEFAULTS_MODE")
GLOBAL_URL = "https://sts.amazonaws.com"
LEGACY_GLOBAL_REGIONS = frozenset((  # botocore.args.LEGACY_GLOBAL_STS_REGIONS (a unit test holds them equal)
    "ap-northeast-1", "ap-south-1", "ap-southeast-1", "ap-southeast-2", "aws-global", "ca-central-1", "eu-central-1",
    "eu-north-1", "eu-west-1", "eu-west-2", "eu-west-3", "sa-east-1", "us-east-1", "us-east-2", "us-west-1",
    "us-west-2"))
TIMEOUT_SECONDS = 60.0  # botocore's connect and read timeouts; the whole attempt gets twice that
SAFE = "-_.~"  # what botocore's percent_encode leaves as it is
NAMESPACE = re.compile(r"\{[^}]*\}")


def is_endpoint_url(url: str) -> bool:
    """http(s)://host[:port][/path], which our wire sends as botocore's client would."""
    try:
        parts = urllib.parse.urlsplit(url)
        _ = parts.port  # raises if it is not one
    except ValueError:
        return False
    return (parts.scheme in ("http", "https") and bool(parts.hostname) and parts.username is None
            and parts.password is None and not parts.query and not parts.fragment and url.isascii()
            and url.isprintable() and " " not in url and "#" not in url and "?" not in url)


class Failed(Exception):
    """An answer botocore would not retry and that carries no credentials."""


class WebIdentity:
    """One role assumed with one token file; `fetch` is aws.renewal's fetch."""

    def __init__(self, url: str, env: Mapping[str, str], ca_bundle: str, rng: random.Random) -> None:
        self.url, self.ca_bundle, self.rng = url, ca_bundle, rng  # botocore's client's: not [aws] ca_bundle
        self.token_file, self.role_arn = env[TOKEN_FILE], env[ROLE_ARN]
        # botocore names the session once per fetcher, so once per process here (an empty name is no name)
        self.session_name = env.get(SESSION_NAME) or f"botocore-session-{int(time.time())}"

    def fetch(self) -> tuple[FrozenCredentials, float | None]:
        """New credentials and their expiry (epoch seconds); StartupError, in one line, when there are none."""
        import botocore.exceptions

        from ..errors import StartupError, describe_error
        from ..wire.retries import Retrier

        request, attempts = self.request(), 0

        def attempt() -> bytes:
            nonlocal attempts
            attempts += 1
            return self.post(request)

        where = f"no AWS credentials from STS AssumeRoleWithWebIdentity at {self.url} for {self.role_arn}"
        try:
            body = Retrier(self.rng, cost=retry_cost).call(attempt)  # a new budget each time, as a new client's
            return credentials_of(body)
        except (botocore.exceptions.BotoCoreError, botocore.exceptions.ClientError) as error:
            plural = "" if attempts == 1 else "s"
            raise StartupError(f"{where} ({attempts} attempt{plural}): {describe_error(error)}") from None
        except Failed as error:
            raise StartupError(f"{where}: {error}") from None

    def request(self) -> bytes:
        """The POST as bytes, with the token as the file holds it now (read as botocore reads it: text, whole)."""
        from ..errors import StartupError
        from .metadata_http import encode_request

        try:
            with open(self.token_file, encoding="utf-8") as handle:
                token = handle.read()
        except (OSError, ValueError) as error:
            raise StartupError(f"{TOKEN_FILE}: cannot read {self.token_file!r}: {error}") from None
        body = form_body({"Action": "AssumeRoleWithWebIdentity", "Version": "2011-06-15", "RoleArn": self.role_arn,
                          "RoleSessionName": self.session_name, "WebIdentityToken": token})
        headers = {"Content-Type": "application/x-www-form-urlencoded; charset=utf-8"}
        return encode_request("POST", self.url, headers, body)

    def post(self, request: bytes) -> bytes:
        """One attempt: the body of a 200 answer; botocore's exception for anything else."""
        import botocore.exceptions

        from .metadata_http import Unanswered, request_once

        try:
            reply = request_once(self.url, request, TIMEOUT_SECONDS, self.ca_bundle)
        except Unanswered as error:
            if error.silent:
                raise botocore.exceptions.ReadTimeoutError(endpoint_url=self.url, error=error) from None
            raise botocore.exceptions.EndpointConnectionError(endpoint_url=self.url, error=error) from None
        if reply.status != 200:
            raise client_error(reply)
        return reply.body


def form_body(params: Mapping[str, str]) -> bytes:
    """botocore's Query serializer's body: each name and value UTF-8, percent-encoded but for -_.~"""
    return "&".join(f"{urllib.parse.quote(name, safe=SAFE)}={urllib.parse.quote(value, safe=SAFE)}"
                    for name, value in params.items()).encode("ascii")


def fields_of(body: bytes, parent: str) -> dict[str, str]:
    """The text of each child of the first `parent` element, by local name; {} where there is none."""
    import xml.etree.ElementTree as ElementTree

    try:
        root = ElementTree.fromstring(body)
    except ElementTree.ParseError:
        return {}
    found = next((element for element in root.iter() if NAMESPACE.sub("", element.tag) == parent), None)
    return {} if found is None else {NAMESPACE.sub("", child.tag): child.text or "" for child in found}


def client_error(reply: Reply) -> botocore.exceptions.ClientError:
    """What botocore's Query parser makes of an error answer: Error/Code and Error/Message, else the status and
    its reason phrase."""
    import http.client

    import botocore.exceptions

    error = fields_of(reply.body, "Error")
    detail = {"Code": error.get("Code") or str(reply.status), "Message": error.get("Message", "")}
    if not error:
        detail["Message"] = http.client.responses.get(reply.status, "")
    return botocore.exceptions.ClientError({"Error": detail, "ResponseMetadata": {"HTTPStatusCode": reply.status}},
                                           "AssumeRoleWithWebIdentity")


def retry_cost(error: BaseException) -> int | None:
    """Standard mode's, and STS's own retryable error: the identity provider did not answer STS."""
    import botocore.exceptions

    from ..wire.retries import RETRY_COST
    from ..wire.retries import retry_cost as standard

    if isinstance(error, botocore.exceptions.ClientError) and error.response["Error"]["Code"] == "IDPCommunicationError":
        return RETRY_COST
    return standard(error)


def credentials_of(body: bytes) -> tuple[FrozenCredentials, float | None]:
    """AssumeRoleWithWebIdentityResult/Credentials: the keys, the session token and the expiry (each required)."""
    from .child import FrozenCredentials

    fields = fields_of(body, "Credentials")
    missing = [name for name in ("AccessKeyId", "SecretAccessKey", "SessionToken", "Expiration") if not fields.get(name)]
    if missing:
        raise Failed(f"the answer has no {', '.join(missing)}: {body[:200]!r}")
    try:
        expiry = datetime.datetime.fromisoformat(fields["Expiration"])
    except ValueError:
        raise Failed(f"not a time: Expiration {fields['Expiration']!r}") from None
    if expiry.tzinfo is None:  # STS writes UTC with a Z
        expiry = expiry.replace(tzinfo=datetime.timezone.utc)
    return FrozenCredentials(fields["AccessKeyId"], fields["SecretAccessKey"], fields["SessionToken"]), expiry.timestamp()
