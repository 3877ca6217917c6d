"""AWS Signature Version 4 for one kind of request, in a few µs where botocore's `SigV4Auth` takes ~100.

Every hot SQS call has the same shape: a POST of an AWS JSON 1.0 body to one fixed URL with no
query string, and the same headers but for X-Amz-Target. botocore rebuilds all of it per call
through its generic request and header classes. `Signer` works out what is fixed once (canonical
path and host, credential scope) and keeps the derived signing key per secret and UTC day, so a
call is two SHA-256 digests, one HMAC and a few string joins. The headers it returns are byte for
byte what `SigV4Auth.add_auth` puts on the same request at the same second. `RestSigner` does the
same for a REST call (Lambda's Invoke), whose path, query and own headers vary from call to call.
"""

from __future__ import annotations

import hashlib
import hmac
import time
import urllib.parse
from collections.abc import Mapping
from typing import Any

import botocore.exceptions

ALGORITHM = "AWS4-HMAC-SHA256"
JSON_CONTENT_TYPE = "application/x-amz-json-1.0"
TIMESTAMP_FORMAT = "%Y%m%dT%H%M%SZ"
# Every header sent is signed (none is on botocore's SIGNED_HEADERS_BLACKLIST), sorted by lower-case name.
SIGNED_HEADERS = "content-type;host;x-amz-date;x-amz-target;x-amzn-query-mode"
SIGNED_HEADERS_WITH_TOKEN = "content-type;host;x-amz-date;x-amz-security-token;x-amz-target;x-amzn-query-mode"
MAX_CACHED_TARGETS = 256


class Signer:
    """Signs JSON POSTs to one endpoint with the (refreshable) credentials; share it between greenlets."""

    def __init__(self, credentials: Any, region: str, service: str, host: str, path: str) -> None:
        self.credentials = credentials  # botocore Credentials (refreshable or not), or None
        self.region = region
        self.service = service
        self.host = host  # the Host header, as sent: lower case, IPv6 in brackets, port unless default
        self._request_head = (f"POST\n{canonical_path(path)}\n\ncontent-type:{JSON_CONTENT_TYPE}\n"
                              f"host:{trim(host)}\nx-amz-date:")
        self._scope_tail = f"/{region}/{service}/aws4_request"
        self._signing_key = ("", "", b"")  # (secret key, date stamp, derived key) of the last call

    def headers(self, target: str, body: bytes, now: float | None = None) -> dict[str, str]:
        """All headers to send with `body` for X-Amz-Target `target`, signed at `now` (epoch seconds; default: now)."""
        frozen, timestamp, key = signing_state(self, now)
        token = frozen.token
        date = timestamp[:8]
        if token:
            token_line, signed_headers = f"x-amz-security-token:{trim(token)}\n", SIGNED_HEADERS_WITH_TOKEN
        else:
            token_line, signed_headers = "", SIGNED_HEADERS
        canonical_request = (f"{self._request_head}{timestamp}\n{token_line}x-amz-target:{trim(target)}\n"
                             f"x-amzn-query-mode:true\n\n{signed_headers}\n{hashlib.sha256(body).hexdigest()}")
        scope = date + self._scope_tail
        string_to_sign = (f"{ALGORITHM}\n{timestamp}\n{scope}\n"
                          f"{hashlib.sha256(canonical_request.encode()).hexdigest()}")
        signature = hmac.digest(key, string_to_sign.encode(), "sha256").hex()
        headers = {"Host": self.host, "X-Amz-Target": target, "Content-Type": JSON_CONTENT_TYPE,
                   "x-amzn-query-mode": "true", "X-Amz-Date": timestamp}
        if token:
            headers["X-Amz-Security-Token"] = token
        headers["Authorization"] = (f"{ALGORITHM} Credential={frozen.access_key}/{scope}, "
                                    f"SignedHeaders={signed_headers}, Signature={signature}")
        return headers


class RestSigner:
    """Signs REST requests to one host (Lambda's Invoke) with the (refreshable) credentials; share it
    between greenlets. Besides Host, X-Amz-Date and the session token, the headers given are signed."""

    def __init__(self, credentials: Any, region: str, service: str, host: str) -> None:
        self.credentials = credentials  # botocore Credentials (refreshable or not), or None
        self.region = region
        self.service = service
        self.host = host  # the Host header, as sent (see Signer)
        self._scope_tail = f"/{region}/{service}/aws4_request"
        self._signing_key = ("", "", b"")
        self._canonical_targets: dict[tuple[str, str], str] = {}  # a few functions, each called again and again

    def headers(self, method: str, path: str, query: str, headers: Mapping[str, str], body: bytes,
                now: float | None = None) -> dict[str, str]:
        """`headers` plus the signing ones, for `method` on `path` (percent-encoded, as sent) with the
        encoded `query` (no "?"), signed at `now` (epoch seconds; default: now)."""
        frozen, timestamp, key = signing_state(self, now)
        signed = {name.lower(): value for name, value in headers.items()}
        signed["host"], signed["x-amz-date"] = self.host, timestamp
        if frozen.token:
            signed["x-amz-security-token"] = frozen.token
        names = sorted(signed)
        signed_headers = ";".join(names)
        canonical_target = self._canonical_targets.get((path, query))
        if canonical_target is None:
            if len(self._canonical_targets) >= MAX_CACHED_TARGETS:
                self._canonical_targets.clear()
            canonical_target = f"{canonical_path(path)}\n{canonical_query(query)}"
            self._canonical_targets[path, query] = canonical_target
        canonical_request = "\n".join([method, canonical_target, *(f"{name}:{trim(signed[name])}" for name in names),
                                       "", signed_headers, hashlib.sha256(body).hexdigest()])
        scope = timestamp[:8] + self._scope_tail
        string_to_sign = (f"{ALGORITHM}\n{timestamp}\n{scope}\n"
                          f"{hashlib.sha256(canonical_request.encode()).hexdigest()}")
        signature = hmac.digest(key, string_to_sign.encode(), "sha256").hex()
        result = {"Host": self.host, **headers, "X-Amz-Date": timestamp}
        if frozen.token:
            result["X-Amz-Security-Token"] = frozen.token
        result["Authorization"] = (f"{ALGORITHM} Credential={frozen.access_key}/{scope}, "
                                   f"SignedHeaders={signed_headers}, Signature={signature}")
        return result


def signing_state(signer: Signer | RestSigner, now: float | None) -> tuple[Any, str, bytes]:
    """The frozen credentials, the timestamp of `now` and the day's signing key, derived once per
    secret and UTC day (kept on the signer)."""
    if signer.credentials is None:
        raise botocore.exceptions.NoCredentialsError()
    frozen = signer.credentials.get_frozen_credentials()
    timestamp = time.strftime(TIMESTAMP_FORMAT, time.gmtime(now))
    date = timestamp[:8]
    cached_secret, cached_date, key = signer._signing_key
    if cached_date != date or cached_secret != frozen.secret_key:
        key = signing_key(frozen.secret_key, date, signer.region, signer.service)
        signer._signing_key = (frozen.secret_key, date, key)
    return frozen, timestamp, key


def signing_key(secret_key: str, date: str, region: str, service: str) -> bytes:
    """The 4-step HMAC chain from the secret to the key for one day, region and service."""
    key = f"AWS4{secret_key}".encode()
    for part in (date, region, service, "aws4_request"):
        key = hmac.digest(key, part.encode(), "sha256")
    return key


def canonical_path(path: str) -> str:
    """The path as botocore signs it (not for S3): dot segments and empty ones dropped, then URI-encoded again."""
    segments: list[str] = []
    for segment in path.split("/"):
        if segment == "..":
            if segments:
                segments.pop()
        elif segment and segment != ".":
            segments.append(segment)
    leading = "/" if path.startswith("/") or not path else ""
    trailing = "/" if path.endswith("/") and segments else ""
    return urllib.parse.quote(leading + "/".join(segments) + trailing, safe="/~")


def canonical_query(query: str) -> str:
    """An encoded query string as botocore signs one taken from the URL: its pairs sorted, left encoded."""
    if not query:
        return ""
    return "&".join(sorted(f"{key}={value}" for key, _, value in
                           (pair.partition("=") for pair in query.split("&"))))


def trim(value: str) -> str:
    """A header value in canonical form: outer whitespace gone, inner runs of it one space."""
    return " ".join(value.split())
