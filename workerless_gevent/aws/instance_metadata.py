"""Credentials (and, when nothing local names one, the region) from EC2's instance metadata service (IMDS),
fetched by the daemon itself.

Where botocore's chain would end at its InstanceMetadataProvider (aws.environment decides when), the daemon
asks IMDS as botocore's InstanceMetadataFetcher does, on our own wire: the same endpoint
(AWS_EC2_METADATA_SERVICE_ENDPOINT, else _ENDPOINT_MODE or AWS_IMDS_USE_IPV6, else http://169.254.169.254/), an
IMDSv2 token (PUT latest/api/token, 6 hours), the role under latest/meta-data/iam/security-credentials/ and its
{AccessKeyId, SecretAccessKey, Token, Expiration}; IMDSv1 (no token) where botocore falls back to it and
AWS_EC2_METADATA_V1_DISABLED does not forbid it; AWS_METADATA_SERVICE_TIMEOUT (1 s) to connect and per read,
AWS_METADATA_SERVICE_NUM_ATTEMPTS (1) attempts; keys about to expire reported as botocore extends them (15 min
plus 2-10 min of jitter from now), so renewals come minutes apart while IMDS cannot rotate them. The region is
asked as the daemon's region chain asks it (aws.region.ec2_region: one attempt of 1 s, the availability zone
without its letter). So neither the start nor a renewal needs a child process or botocore's session.
"""

from __future__ import annotations

import datetime
import json
import re
import time
import urllib.parse
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, NamedTuple

if TYPE_CHECKING:  # the wire (gevent, ssl) is imported where used: aws.environment reads the settings before gevent patches
    import random

    from ..wire.parsing import Reply
    from .child import FrozenCredentials

BASE_URL, BASE_URL_IPV6 = "http://169.254.169.254/", "http://[fd00:ec2::254]/"
TOKEN_PATH, TOKEN_TTL_SECONDS = "latest/api/token", "21600"
ROLE_PATH = "latest/meta-data/iam/security-credentials/"  # botocore 1.44's (not the extended-api path)
ZONE_PATH = "latest/meta-data/placement/availability-zone/"
REGION_TIMEOUT_SECONDS, REGION_ATTEMPTS = 1.0, 1  # aws.region.ec2_region's, whatever the variables say
REFRESH_WINDOW_SECONDS = 15 * 60  # botocore's advisory window, which it passes as the IMDS refresh window
JITTER_SECONDS = (120, 600)
FIELDS = ("AccessKeyId", "SecretAccessKey", "Token", "Expiration")
ROLE_NAME = re.compile(r"[A-Za-z0-9_+=,.@-]{1,64}\Z")
SAFE_URL = re.compile(r"[!-~]+\Z")  # printable ASCII, no space: botocore refuses the rest


class Settings(NamedTuple):
    base_url: str  # ends with "/"
    timeout_seconds: float
    attempts: int
    v1_disabled: bool


def settings_of(env: Mapping[str, str]) -> Settings | None:
    """How botocore would ask IMDS with these variables (no AWS config file exists); None where it would not ask
    (AWS_EC2_METADATA_DISABLED=true), would refuse a value, or would read one differently from us."""
    if env.get("AWS_EC2_METADATA_DISABLED", "false").lower() == "true":
        return None
    mode = env.get("AWS_EC2_METADATA_SERVICE_ENDPOINT_MODE")
    if mode is not None and mode.lower() not in ("ipv4", "ipv6"):
        return None  # botocore raises
    ipv6 = mode.lower() == "ipv6" if mode is not None else env.get("AWS_IMDS_USE_IPV6", "").lower() == "true"
    base_url = env.get("AWS_EC2_METADATA_SERVICE_ENDPOINT", BASE_URL_IPV6 if ipv6 else BASE_URL)
    numbers = [env.get(name, "1") for name in ("AWS_METADATA_SERVICE_TIMEOUT", "AWS_METADATA_SERVICE_NUM_ATTEMPTS")]
    if not is_plain_http(base_url) or not all(number.isascii() and number.isdigit() and int(number) > 0
                                               for number in numbers):
        return None  # botocore's int() reads more spellings (" 2", "+2", "1_0") and raises on others
    return Settings(base_url if base_url.endswith("/") else base_url + "/", float(numbers[0]), int(numbers[1]),
                    env.get("AWS_EC2_METADATA_V1_DISABLED", "").lower() == "true")


def is_plain_http(url: str) -> bool:
    """http://host[:port][/path]: what our wire sends as botocore's urllib3 would; an empty URL is not one."""
    if not SAFE_URL.match(url):
        return False
    try:
        parts = urllib.parse.urlsplit(url)
        _ = parts.port  # raises if it is not one
    except ValueError:
        return False
    return (parts.scheme == "http" and bool(parts.hostname) and parts.username is None and parts.password is None
            and not parts.query and not parts.fragment and "#" not in url and "?" not in url)


class Failed(Exception):
    """No answer after every attempt, or one botocore does not retry."""


class InstanceMetadata:
    """One instance metadata service; `fetch` is aws.renewal's fetch, `region` the region chain's last step."""

    def __init__(self, settings: Settings, rng: random.Random) -> None:
        self.settings = settings
        self.rng = rng  # the jitter of an extended expiry

    def fetch(self) -> tuple[FrozenCredentials, float | None]:
        """New credentials and their expiry (epoch seconds); StartupError, in one line, when there are none."""
        from ..errors import StartupError

        attempts, timeout = self.settings.attempts, self.settings.timeout_seconds
        try:
            token = self.token(attempts, timeout)
            role = self.get(ROLE_PATH, token, attempts, timeout)
            if not ROLE_NAME.match(role):  # botocore puts it in the path as it came; IAM allows only these
                raise Failed(f"{ROLE_PATH}: not a role name: {role[:200]!r}")
            document = json.loads(self.get(ROLE_PATH + role, token, attempts, timeout, is_json))
            return self.credentials_of(document)
        except Failed as error:
            plural = "" if attempts == 1 else "s"
            raise StartupError(f"no AWS credentials from the EC2 instance metadata service {self.settings.base_url} "
                               f"({attempts} attempt{plural}): {error}") from None

    def region(self) -> str | None:
        """The instance's region (its availability zone without the letter); None where IMDS gives none."""
        from .region import REGION_NAME

        try:
            zone = self.get(ZONE_PATH, self.token(REGION_ATTEMPTS, REGION_TIMEOUT_SECONDS), REGION_ATTEMPTS,
                            REGION_TIMEOUT_SECONDS)
        except Failed:
            return None
        return zone[:-1] if REGION_NAME.match(zone[:-1]) else None

    def token(self, attempts: int, timeout: float) -> str | None:
        """An IMDSv2 token; None where botocore goes on without one (IMDSv1): no answer, 403, 404, 405."""
        from .metadata_http import Unanswered

        for _ in range(attempts):
            try:
                reply = self.ask("PUT", TOKEN_PATH, {"x-aws-ec2-metadata-token-ttl-seconds": TOKEN_TTL_SECONDS}, timeout)
            except Unanswered as error:
                if error.silent:  # botocore's ReadTimeoutError gives up on the token at once
                    return None
                continue  # refused, reset or not connected: botocore tries again
            if reply.status == 200:
                return reply.body.decode("utf-8", "replace")
            if reply.status in (403, 404, 405):
                return None
            if reply.status == 400:
                raise Failed("the token request was refused (400)")
        return None

    def get(self, path: str, token: str | None, attempts: int, timeout: float,
            is_answer: Callable[[str], bool] = bool) -> str:
        """The text of a 200 answer that is not empty (and `is_answer`), with the token if there is one."""
        from .metadata_http import Unanswered

        if not token and self.settings.v1_disabled:
            raise Failed("no IMDSv2 token, and AWS_EC2_METADATA_V1_DISABLED forbids asking without one")
        headers = {} if token is None else {"x-aws-ec2-metadata-token": token}
        last = "no attempt"
        for _ in range(attempts):
            try:
                reply = self.ask("GET", path, headers, timeout)
            except Unanswered as error:  # a silence too: botocore retries every one of these here
                last = f"{path}: {error}"
                continue
            text = reply.body.decode("utf-8", "replace")
            if reply.status == 200 and text and is_answer(text):
                return text
            last = f"{path}: status {reply.status}: {text[:200]!r}"
        raise Failed(last)

    def ask(self, method: str, path: str, headers: Mapping[str, str], timeout: float) -> Reply:
        """One request on a fresh connection; Unanswered where no answer came."""
        from .metadata_http import encode_request, request_once

        url = self.settings.base_url + path
        try:
            request = encode_request(method, url, headers)
        except ValueError as error:  # a token HTTP cannot carry
            raise Failed(f"{path}: {error}") from None
        return request_once(url, request, timeout)

    def credentials_of(self, document: object) -> tuple[FrozenCredentials, float | None]:
        """The four fields botocore requires, and the expiry as it extends one that is near."""
        from .container import credentials_of

        if not isinstance(document, dict) or not all(field in document for field in FIELDS):
            detail = f": {document.get('Code')}: {document.get('Message')}" if isinstance(document, dict) else ""
            raise Failed(f"the answer has no {', '.join(FIELDS)}{detail}")
        try:
            frozen, expires_at = credentials_of(document)
        except (KeyError, TypeError, ValueError) as error:
            raise Failed(f"not a credentials document ({type(error).__name__}: {error})") from None
        return frozen, extended(str(document["Expiration"]), expires_at, time.time(), self.rng)


def is_json(text: str) -> bool:
    try:
        json.loads(text)
    except ValueError:
        return False
    return True


def extended(expiration: str, expires_at: float | None, now: float, rng: random.Random) -> float | None:
    """botocore's expiry for keys IMDS keeps handing out near their end (InstanceMetadataFetcher._evaluate_
    expiration): only in IMDS's own form, 2030-01-02T03:04:05Z, which it reads; any other it leaves alone."""
    try:
        parsed = datetime.datetime.strptime(expiration, "%Y-%m-%dT%H:%M:%SZ")
    except ValueError:
        return expires_at
    offset = REFRESH_WINDOW_SECONDS + rng.randint(*JITTER_SECONDS)
    if now >= parsed.replace(tzinfo=datetime.timezone.utc).timestamp() - offset:
        return float(int(now + offset))  # botocore writes it back to the second
    return expires_at
