"""Credentials from the ECS (or EKS Pod Identity) container endpoint, fetched by the daemon itself.

Where botocore's chain would end at its ContainerProvider (aws.environment decides when), the daemon asks the
endpoint as botocore's ContainerMetadataFetcher does, on our own wire: the same URL
(AWS_CONTAINER_CREDENTIALS_RELATIVE_URI under 169.254.170.2, else AWS_CONTAINER_CREDENTIALS_FULL_URI, only on
https, a loopback address or an ECS/EKS link-local host), the same Authorization header (the token file, read
again at each fetch, else the token variable), 2 s per attempt, 3 attempts a second apart, and the same JSON
(each attempt one request on a fresh connection: aws.metadata_http). So neither the start nor a renewal needs a
child process or botocore's session.
"""

from __future__ import annotations

import datetime
import json
import urllib.parse
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from ..rules import is_loopback_host

if TYPE_CHECKING:  # the wire (gevent, ssl) is imported where used: aws.environment reads container_url before gevent patches
    from .child import FrozenCredentials

RELATIVE_URI = "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI"
FULL_URI = "AWS_CONTAINER_CREDENTIALS_FULL_URI"
TOKEN = "AWS_CONTAINER_AUTHORIZATION_TOKEN"
TOKEN_FILE = "AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE"
ECS_HOST = "169.254.170.2"
ALLOWED_HOSTS = (ECS_HOST, "169.254.170.23", "fd00:ec2::23", "localhost")  # botocore's, beside any loopback address
TIMEOUT_SECONDS = 2.0  # botocore's, for the connection and each read; the whole attempt gets twice that
ATTEMPTS = 3
PAUSE_SECONDS = 1.0  # between attempts


class NotAnswered(Exception):
    """One attempt failed in a way botocore retries: no connection, a timeout, a status other than 200, no JSON."""


def container_url(env: Mapping[str, str]) -> str | None:
    """The URL botocore's ContainerProvider would fetch, if it is one the daemon fetches the same way; None
    where botocore would refuse it or read it differently (the child then says what botocore makes of it)."""
    if RELATIVE_URI in env:  # botocore prefers it, even beside a full URI
        relative = env[RELATIVE_URI]
        return f"http://{ECS_HOST}{relative}" if relative.startswith("/") else None
    url = env.get(FULL_URI)
    if not url:
        return None
    try:
        parts = urllib.parse.urlsplit(url)
        host, _ = parts.hostname, parts.port  # the port raises if it is not one
    except ValueError:
        return None
    if not host or parts.username is not None or parts.password is not None:
        return None
    if parts.scheme == "https" or (parts.scheme == "http" and (host in ALLOWED_HOSTS or is_loopback_host(host))):
        return url
    return None




class ContainerEndpoint:
    """One container credentials endpoint; `fetch` is aws.renewal's fetch."""

    def __init__(self, url: str, env: Mapping[str, str], ca_bundle: str) -> None:
        self.url = url
        self.token_file = env.get(TOKEN_FILE)  # botocore prefers the file to the variable
        self.token = env.get(TOKEN)
        self.ca_bundle = ca_bundle  # botocore's own bundle: its fetcher does not read AWS_CA_BUNDLE

    def fetch(self) -> tuple[FrozenCredentials, float | None]:
        """New credentials and their expiry (epoch seconds); StartupError, in one line, when there are none."""
        import gevent

        from ..errors import StartupError

        request = self.request()
        failure: Exception | None = None
        for attempt in range(ATTEMPTS):
            if attempt:
                gevent.sleep(PAUSE_SECONDS)
            try:
                document = self.get(request)
                break
            except NotAnswered as error:
                failure = error
        else:
            raise StartupError(f"no AWS credentials from the container endpoint {self.url} "
                               f"({ATTEMPTS} attempts): {failure}")
        try:
            return credentials_of(document)
        except (KeyError, TypeError, ValueError) as error:
            raise StartupError(f"no AWS credentials from the container endpoint {self.url}: "
                               f"not a credentials document ({type(error).__name__}: {error})") from None

    def request(self) -> bytes:
        """The GET as bytes, with the token as it is now (a file rotated between fetches is read again)."""
        from ..errors import StartupError
        from .metadata_http import encode_request

        token, source = self.token, TOKEN
        if self.token_file is not None:
            source = TOKEN_FILE
            try:
                with open(self.token_file, encoding="utf-8") as handle:
                    token = handle.read()
            except (OSError, ValueError) as error:
                raise StartupError(f"{TOKEN_FILE}: cannot read {self.token_file!r}: {error}") from None
        headers = {"Accept": "application/json"}
        if token is not None:
            headers["Authorization"] = token
        try:
            return encode_request("GET", self.url, headers)
        except ValueError:
            raise StartupError(f"{source}: the token is not a legal header value") from None

    def get(self, request: bytes) -> Any:
        """One attempt: the JSON the endpoint answered with 200."""
        from .metadata_http import Unanswered, request_once

        try:
            reply = request_once(self.url, request, TIMEOUT_SECONDS, self.ca_bundle)
        except Unanswered as error:  # refused, reset, timed out, TLS: botocore retries these
            raise NotAnswered(str(error)) from None
        text = reply.body.decode("utf-8", "replace")
        if reply.status != 200:
            raise NotAnswered(f"status {reply.status}: {text[:200]}")
        try:
            return json.loads(text)
        except ValueError:
            raise NotAnswered("the answer is not JSON") from None


def credentials_of(document: Any) -> tuple[FrozenCredentials, float | None]:
    """{AccessKeyId, SecretAccessKey, Token, Expiration} as botocore reads them (each required)."""
    from .child import FrozenCredentials

    expiry = datetime.datetime.fromisoformat(str(document["Expiration"]))
    if expiry.tzinfo is None:  # the endpoints write UTC with a Z
        expiry = expiry.replace(tzinfo=datetime.timezone.utc)
    frozen = FrozenCredentials(str(document["AccessKeyId"]), str(document["SecretAccessKey"]), str(document["Token"]))
    return frozen, expiry.timestamp()

