"""STS on 127.0.0.1, answering AssumeRoleWithWebIdentity as STS does (pointed at with AWS_ENDPOINT_URL_STS): each
call hands out new keys and a new session token expiring `lifetime` seconds later, in STS's XML. It records every
request's form (the role, the session name, the web identity token) with the watched process's children as it
came in (the moment a daemon that assumed the role through a child would have one), and can fail on demand."""

from __future__ import annotations

import datetime
import urllib.parse
from dataclasses import dataclass
from typing import Any

from gevent import pywsgi

from .credentials_endpoint import children_of

NAMESPACE = "https://sts.amazonaws.com/doc/2011-06-15/"


@dataclass
class StsRequest:
    method: str
    form: dict[str, str]  # the POST's form fields (Action, Version, RoleArn, RoleSessionName, WebIdentityToken)
    signed: bool  # an Authorization header came with it (botocore sends AssumeRoleWithWebIdentity unsigned)
    children: list[int] | None  # of `watched_pid` as the request came in; None when nothing was watched
    answered: int = 0  # the status given
    expires: float | None = None  # the Expiration handed out (epoch seconds, whole as STS writes them)

    @property
    def token(self) -> str | None:
        return self.form.get("WebIdentityToken")


class FakeSts:
    """`error`: answer every call with this (status, code) from now on (400 InvalidIdentityToken is not retried,
    500 InternalFailure is, 3 attempts), once `error_after` keys were handed out (0: at once; 1: every renewal
    fails, whenever it comes); `lifetime`: seconds until the keys handed out expire."""

    def __init__(self, lifetime: float) -> None:
        self.lifetime = lifetime
        self.error: tuple[int, str] | None = None
        self.error_after = 0
        self.watched_pid: int | None = None
        self.requests: list[StsRequest] = []
        self.tokens: list[str] = []  # session tokens handed out, in order
        self.server = pywsgi.WSGIServer(("127.0.0.1", 0), self.app, log=None)

    def app(self, environ: dict[str, Any], start_response: Any) -> list[bytes]:
        children = None if self.watched_pid is None else children_of(self.watched_pid)
        length = int(environ.get("CONTENT_LENGTH") or 0)
        form = dict(urllib.parse.parse_qsl(environ["wsgi.input"].read(length).decode("utf-8"), keep_blank_values=True))
        record = StsRequest(environ["REQUEST_METHOD"], form, "HTTP_AUTHORIZATION" in environ, children)
        self.requests.append(record)
        record.answered, body = self.answer(record)
        start_response(f"{record.answered} X", [("Content-Type", "text/xml"), ("Content-Length", str(len(body)))])
        return [body]

    def answer(self, request: StsRequest) -> tuple[int, bytes]:
        if self.error is not None and len(self.tokens) >= self.error_after:
            status, code = self.error
            return status, (f'<ErrorResponse xmlns="{NAMESPACE}"><Error><Type>Sender</Type><Code>{code}</Code>'
                            f"<Message>failing on purpose</Message></Error><RequestId>r-{len(self.requests)}"
                            "</RequestId></ErrorResponse>").encode()
        if request.method != "POST" or request.form.get("Action") != "AssumeRoleWithWebIdentity":
            return 400, b"<ErrorResponse><Error><Code>InvalidAction</Code><Message>no</Message></Error></ErrorResponse>"
        self.tokens.append(f"sts-session-{len(self.tokens) + 1}")
        expires = (datetime.datetime.now(datetime.timezone.utc)
                   + datetime.timedelta(seconds=self.lifetime)).replace(microsecond=0)
        request.expires = expires.timestamp()
        role, name = request.form.get("RoleArn", ""), request.form.get("RoleSessionName", "")
        return 200, f"""<AssumeRoleWithWebIdentityResponse xmlns="{NAMESPACE}">
  <AssumeRoleWithWebIdentityResult>
    <SubjectFromWebIdentityToken>system:serviceaccount:default:app</SubjectFromWebIdentityToken>
    <AssumedRoleUser><Arn>{role.replace(":iam::", ":sts::").replace(":role/", ":assumed-role/")}/{name}</Arn>
      <AssumedRoleId>AROAEXAMPLE:{name}</AssumedRoleId></AssumedRoleUser>
    <Credentials>
      <AccessKeyId>ASIA{len(self.tokens):016d}</AccessKeyId>
      <SecretAccessKey>secret</SecretAccessKey>
      <SessionToken>{self.tokens[-1]}</SessionToken>
      <Expiration>{expires.strftime("%Y-%m-%dT%H:%M:%SZ")}</Expiration>
    </Credentials>
    <Provider>oidc.eks.eu-west-1.amazonaws.com/id/EXAMPLE</Provider>
    <Audience>sts.amazonaws.com</Audience>
  </AssumeRoleWithWebIdentityResult>
  <ResponseMetadata><RequestId>r-{len(self.requests)}</RequestId></ResponseMetadata>
</AssumeRoleWithWebIdentityResponse>""".encode()

    def start(self) -> None:
        self.server.start()

    def stop(self) -> None:
        self.server.stop()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_port}"
