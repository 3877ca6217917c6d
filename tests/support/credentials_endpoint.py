"""A container credentials endpoint (what ECS serves at 169.254.170.2, EKS Pod Identity at 169.254.170.23) on
127.0.0.1: each fetch hands out new keys and a new token expiring `lifetime` seconds later; it counts requests,
records their Authorization headers, can fail on demand, and notes the watched process's children at each
request (the moment a daemon that fetched through a child would have one)."""

from __future__ import annotations

import datetime
import json
import os
from dataclasses import dataclass
from typing import Any

import gevent
from gevent import pywsgi

from .http_app import HttpApp
from .moto import free_port
from .process import Daemon
from .proxy import CountingProxy
from .sqs import Queue, count_messages
from .wait import wait_until


def children_of(pid: int) -> list[int]:
    """The direct children of `pid`, from /proc/PID/task/*/children (every thread's); [] once it is gone."""
    found: list[int] = []
    try:
        tasks = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return found
    for task in tasks:
        try:
            with open(f"/proc/{pid}/task/{task}/children") as handle:
                found += [int(child) for child in handle.read().split()]
        except OSError:
            continue
    return found


class ChildSampler:
    """Reads a process's children every 5 ms in a greenlet of the test process, and keeps any it saw."""

    def __init__(self) -> None:
        self.pid: int | None = None
        self.samples = 0
        self.seen: set[int] = set()
        self.greenlet = gevent.spawn(self.run)

    def run(self) -> None:
        while True:
            if self.pid is not None:
                self.seen.update(children_of(self.pid))
                self.samples += 1
            gevent.sleep(0.005)


@dataclass
class CredentialsRequest:
    path: str
    authorization: str | None
    children: list[int] | None  # of `watched_pid` as the request came in; None when nothing was watched
    answered: int  # the status given


class CredentialsEndpoint:
    """`failing`: answer 500 (botocore and the daemon retry it, then give up) once `fail_after` keys were handed
    out (0: at once; 1: the start's fetch succeeds, every renewal fails, whenever it comes); `lifetime`: seconds
    until the keys handed out expire."""

    def __init__(self, lifetime: float) -> None:
        self.lifetime = lifetime
        self.failing = False
        self.fail_after = 0
        self.watched_pid: int | None = None
        self.requests: list[CredentialsRequest] = []
        self.tokens: list[str] = []  # handed out, in order
        self.server = pywsgi.WSGIServer(("127.0.0.1", free_port()), self.app, log=None)

    def app(self, environ: dict[str, Any], start_response: Any) -> list[bytes]:
        children = None if self.watched_pid is None else children_of(self.watched_pid)
        record = CredentialsRequest(environ.get("PATH_INFO", ""), environ.get("HTTP_AUTHORIZATION"), children, 500)
        self.requests.append(record)
        if self.failing and len(self.tokens) >= self.fail_after:
            return self.answer(start_response, "500 Internal Server Error", b'{"message": "failing on purpose"}')
        record.answered = 200
        token = f"token-{len(self.tokens) + 1}"
        self.tokens.append(token)
        expires = datetime.datetime.now(datetime.timezone.utc) + datetime.timedelta(seconds=self.lifetime)
        body = json.dumps({"AccessKeyId": f"ASIA{len(self.tokens):016d}", "SecretAccessKey": "secret",
                           "Token": token, "Expiration": expires.strftime("%Y-%m-%dT%H:%M:%SZ")}).encode()
        return self.answer(start_response, "200 OK", body)

    @staticmethod
    def answer(start_response: Any, status: str, body: bytes) -> list[bytes]:
        start_response(status, [("Content-Type", "application/json"), ("Content-Length", str(len(body)))])
        return [body]

    def start(self) -> None:
        self.server.start()

    def stop(self) -> None:
        self.server.stop()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_port}/v2/credentials"


def assert_still_delivers_signed_with(proc: Daemon, sqs: Any, queue: Queue, app: HttpApp, proxy: CountingProxy,
                                      session_token: str) -> None:
    """After a renewal failed: a message sent now is delivered and deleted, the daemon stops cleanly, and every
    SQS request it made was signed with the first keys (their session token)."""
    sqs.send_message(QueueUrl=queue.url, MessageBody="still signed")
    assert app.wait_for_requests(1, timeout=30)[0].body == b"still signed"
    wait_until(lambda: count_messages(sqs, queue.url) == 0, 30, message="not deleted after a failed renewal")
    assert proc.stop(timeout=30) == 0
    assert {request.security_token for request in proxy.requests} == {session_token}


def assert_delivers_after_renewals(proc: Daemon, sqs: Any, queue: Queue, app: HttpApp, proxy: CountingProxy,
                                   handed_out: Any) -> None:
    """After renewals: a message sent now is delivered and deleted, the daemon stops cleanly, every receive was
    signed with a session token the source handed out (`handed_out`), and at least two renewals were logged."""
    sqs.send_message(QueueUrl=queue.url, MessageBody="after renewals")
    assert app.wait_for_requests(1, timeout=30)[0].body == b"after renewals"
    wait_until(lambda: count_messages(sqs, queue.url) == 0, 30, message="not deleted with renewed credentials")
    assert proc.stop(timeout=30) == 0
    assert None not in signed_with(proxy) and signed_with(proxy) <= set(handed_out)
    assert proc.output().count("AWS credentials renewed") >= 2


def assert_never_a_child(endpoint: Any, sampler: ChildSampler) -> None:
    """A credentials source the daemon asked itself (container endpoint, IMDS, STS): no child at any of its
    requests, and none seen by the sampler either."""
    assert endpoint.requests and all(request.children == [] for request in endpoint.requests), endpoint.requests
    assert sampler.samples > 10 and not sampler.seen, (sampler.samples, sampler.seen)


def signed_with(proxy: CountingProxy) -> set[str | None]:
    """The session tokens the daemon's receives were signed with."""
    return {request.security_token for request in proxy.requests if request.action == "ReceiveMessage"}
