"""`aws.web_identity`'s AssumeRoleWithWebIdentity as botocore makes and reads it: the request body its Query
serializer writes (the token read as its loader reads the file), and its Query parser's reading of the answer and
of errors (tests/integration/test_web_identity.py sends it to a fake STS beside botocore's own)."""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

import pytest

from workerless_gevent.aws.web_identity import WebIdentity, client_error, credentials_of
from workerless_gevent.wire.parsing import Reply

ROLE = "arn:aws:iam::123456789012:role/app"


def botocores_operation() -> Any:
    import botocore.session

    return botocore.session.Session().get_service_model("sts").operation_model("AssumeRoleWithWebIdentity")


@pytest.mark.parametrize("token", ["eyJhbGciOiJSUzI1NiJ9.eyJzdWIiOiJ4In0.c2ln", "a+b/c=d&e f~g\n", "jeton-été-ü"])
def test_the_request_is_botocores(tmp_path: Path, token: str) -> None:
    """botocore's Query serializer's body and Content-Type, the token read as its loader reads the file."""
    from botocore.serialize import create_serializer
    from botocore.utils import FileWebIdentityTokenLoader, percent_encode_sequence

    token_file = tmp_path / "token"
    token_file.write_bytes(token.encode("utf-8"))
    identity = WebIdentity("https://sts.amazonaws.com", {"AWS_WEB_IDENTITY_TOKEN_FILE": str(token_file),
                                                         "AWS_ROLE_ARN": ROLE, "AWS_ROLE_SESSION_NAME": "s@1"},
                           "/etc/ssl/bundle.pem", random.Random(1))
    head, _, body = identity.request().partition(b"\r\n\r\n")
    params = {"RoleArn": ROLE, "RoleSessionName": "s@1", "WebIdentityToken": FileWebIdentityTokenLoader(str(token_file))()}
    expected = create_serializer("query").serialize_to_request(params, botocores_operation())
    assert body == percent_encode_sequence(expected["body"]).encode("ascii")
    assert f"Content-Type: {expected['headers']['Content-Type']}".encode() in head.split(b"\r\n")
    assert head.startswith(b"POST / HTTP/1.1\r\nHost: sts.amazonaws.com\r\n")


ANSWER = b"""<AssumeRoleWithWebIdentityResponse xmlns="https://sts.amazonaws.com/doc/2011-06-15/">
  <AssumeRoleWithWebIdentityResult>
    <SubjectFromWebIdentityToken>system:serviceaccount:default:app</SubjectFromWebIdentityToken>
    <AssumedRoleUser><Arn>arn:aws:sts::123456789012:assumed-role/app/s</Arn><AssumedRoleId>AROA:s</AssumedRoleId>
    </AssumedRoleUser>
    <Credentials>
      <SessionToken>FwoGZXIvYXdzEBY=</SessionToken><SecretAccessKey>wJalrXUtnFEMI/K7MDENG</SecretAccessKey>
      <Expiration>%s</Expiration><AccessKeyId>ASIAEXAMPLE</AccessKeyId>
    </Credentials>
    <Provider>oidc.eks.eu-west-1.amazonaws.com/id/EXAMPLE</Provider><Audience>sts.amazonaws.com</Audience>
  </AssumeRoleWithWebIdentityResult>
  <ResponseMetadata><RequestId>ad4156e9-bce1-11e2-82e6-6b6efEXAMPLE</RequestId></ResponseMetadata>
</AssumeRoleWithWebIdentityResponse>"""


def botocores_parse(body: bytes, status: int) -> dict[str, Any]:
    from botocore.parsers import create_parser

    operation = botocores_operation()
    return dict(create_parser("query").parse({"body": body, "headers": {}, "status_code": status},
                                             operation.output_shape))


@pytest.mark.parametrize("expiration", [b"2030-01-02T03:04:05Z", b"2030-01-02T03:04:05.123Z",
                                        b"2030-01-02T04:04:05+01:00"])
def test_the_answer_is_read_as_botocore_reads_it(expiration: bytes) -> None:
    body = ANSWER % expiration
    credentials = botocores_parse(body, 200)["Credentials"]
    frozen, expires_at = credentials_of(body)
    assert frozen == (credentials["AccessKeyId"], credentials["SecretAccessKey"], credentials["SessionToken"])
    assert expires_at == credentials["Expiration"].timestamp()


@pytest.mark.parametrize(("status", "body"), [
    (400, b'<ErrorResponse xmlns="https://sts.amazonaws.com/doc/2011-06-15/"><Error><Type>Sender</Type>'
          b"<Code>InvalidIdentityToken</Code><Message>Token expired: current date/time 1 must be before 0</Message>"
          b"</Error><RequestId>r-1</RequestId></ErrorResponse>"),
    (400, b"<ErrorResponse><Error><Code>IDPCommunicationError</Code><Message>no answer</Message></Error>"
          b"</ErrorResponse>"),
    (503, b"<html>Service Unavailable</html>"),
    (500, b""),
])
def test_an_error_answer_is_read_as_botocore_reads_it(status: int, body: bytes) -> None:
    expected = botocores_parse(body, status)["Error"]
    error = client_error(Reply(status=status, headers={}, body=body)).response["Error"]
    assert (error["Code"], error["Message"]) == (expected["Code"], expected.get("Message", ""))
