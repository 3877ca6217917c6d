"""EC2's instance metadata service (IMDS) on 127.0.0.1, pointed at with AWS_EC2_METADATA_SERVICE_ENDPOINT: IMDSv2
tokens (PUT /latest/api/token), the instance profile's role under /latest/meta-data/iam/security-credentials/,
its credentials (new keys and a new token at each fetch, expiring `lifetime` seconds later) and the availability
zone. It records every request (with the watched process's children as it came in: the moment a daemon that
fetched through a child would have one), and can refuse IMDSv1, refuse or ignore token requests, or fail."""

from __future__ import annotations

import datetime
import json
from dataclasses import dataclass
from typing import Any

import gevent.event
from gevent import pywsgi

from .credentials_endpoint import children_of
from .moto import free_port

ROLE_PATH = "/latest/meta-data/iam/security-credentials/"
ZONE_PATH = "/latest/meta-data/placement/availability-zone/"
HANG_SECONDS = 30.0  # the longest a request left unanswered on purpose waits (the server stops sooner)


@dataclass
class MetadataRequest:
    method: str
    path: str
    token: str | None  # the x-aws-ec2-metadata-token header
    ttl: str | None  # the x-aws-ec2-metadata-token-ttl-seconds header
    children: list[int] | None  # of `watched_pid` as the request came in; None when nothing was watched
    answered: int = 0  # the status given; 0 for none


class InstanceMetadataService:
    """`v1_allowed`: answer a GET without a token (else 401, as IMDS with HttpTokens=required); `token_status`:
    the status of token requests (200 hands one out; 403/404/405 make botocore go on with IMDSv1, 400 makes it
    give up); `hang_tokens`: never answer a token request; `failing`: answer everything 500 once `fail_after` keys
    were handed out (0: at once; 1: the start's fetch succeeds, every renewal fails, whenever it comes);
    `lifetime`: seconds until the keys handed out expire; `offset_expiration`: write their expiry as +00:00
    instead of IMDS's Z, a form botocore does not extend when it is near (so keys expiring in minutes are renewed
    in seconds)."""

    def __init__(self, lifetime: float = 6 * 3600, role: str = "app-role", zone: str = "eu-west-1b") -> None:
        self.lifetime, self.role, self.zone = lifetime, role, zone
        self.v1_allowed = True
        self.token_status = 200
        self.hang_tokens = False
        self.failing = False
        self.fail_after = 0
        self.offset_expiration = False
        self.fixed_expiration: str | None = None  # written as is instead of `lifetime` from now
        self.watched_pid: int | None = None
        self.requests: list[MetadataRequest] = []
        self.issued: list[str] = []  # IMDSv2 tokens, in order
        self.keys: list[str] = []  # session tokens handed out, in order
        self.stopping = gevent.event.Event()
        self.server = pywsgi.WSGIServer(("127.0.0.1", free_port()), self.app, log=None)

    def app(self, environ: dict[str, Any], start_response: Any) -> list[bytes]:
        children = None if self.watched_pid is None else children_of(self.watched_pid)
        record = MetadataRequest(environ["REQUEST_METHOD"], environ.get("PATH_INFO", ""),
                                 environ.get("HTTP_X_AWS_EC2_METADATA_TOKEN"),
                                 environ.get("HTTP_X_AWS_EC2_METADATA_TOKEN_TTL_SECONDS"), children)
        self.requests.append(record)
        status, body = self.answer(record)
        if status == 0:
            self.stopping.wait(HANG_SECONDS)
            status, body = 500, b"gave up"
        record.answered = status
        start_response(f"{status} X", [("Content-Type", "text/plain"), ("Content-Length", str(len(body)))])
        return [body]

    def answer(self, request: MetadataRequest) -> tuple[int, bytes]:
        if self.failing and len(self.keys) >= self.fail_after:
            return 500, b"failing on purpose"
        if request.method == "PUT" and request.path == "/latest/api/token":
            if self.hang_tokens:
                return 0, b""
            if self.token_status != 200 or request.ttl is None:
                return (self.token_status if request.ttl is not None else 400), b""
            self.issued.append(f"imds-token-{len(self.issued) + 1}")
            return 200, self.issued[-1].encode()
        if request.method != "GET":
            return 405, b""
        if request.token is not None and request.token not in self.issued or request.token is None and not self.v1_allowed:
            return 401, b""
        if request.path == ZONE_PATH:
            return 200, self.zone.encode()
        if request.path == ROLE_PATH:
            return 200, self.role.encode()
        if request.path == ROLE_PATH + self.role:
            return 200, self.credentials()
        return 404, b"Not Found"

    def credentials(self) -> bytes:
        self.keys.append(f"session-{len(self.keys) + 1}")
        expires = datetime.datetime.now(datetime.timezone.utc) + datetime.timedelta(seconds=self.lifetime)
        expiration = self.fixed_expiration or expires.strftime("%Y-%m-%dT%H:%M:%S+00:00" if self.offset_expiration
                                                               else "%Y-%m-%dT%H:%M:%SZ")
        return json.dumps({"Code": "Success", "LastUpdated": "2026-01-01T00:00:00Z", "Type": "AWS-HMAC",
                           "AccessKeyId": f"ASIA{len(self.keys):016d}", "SecretAccessKey": "secret",
                           "Token": self.keys[-1], "Expiration": expiration}).encode()

    def fetches(self) -> list[MetadataRequest]:
        """The credential fetches (the GETs of the role's credentials)."""
        return [request for request in self.requests if request.path == ROLE_PATH + self.role]

    def start(self) -> None:
        self.server.start()

    def stop(self) -> None:
        self.stopping.set()
        self.server.stop()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_port}/"
