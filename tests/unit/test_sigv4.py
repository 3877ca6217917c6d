"""sigv4.py: the headers Signer returns are the ones botocore's SigV4Auth puts on the same request.

botocore is the reference, run for real: `SigV4Auth.add_auth` on an AWSRequest built as
SqsWire.sign builds it. add_auth always takes its time from the clock
(`botocore.compat.get_current_datetime`) and overwrites `request.context["timestamp"]`, so there
is no public way to hand it a time. Two ways around that without patching anything:
- at the current second: let add_auth sign first, then give Signer the instant of its X-Amz-Date;
- at a chosen time (midnight, fixed dates): the steps of add_auth after its clock read, with
  `context["timestamp"]` set instead. `test_pinned_botocore_is_add_auth` shows the two agree.
"""

from __future__ import annotations

import calendar
import json
import time
from datetime import datetime, timedelta, timezone
from typing import Any
from urllib.parse import urlsplit

import botocore.exceptions
import pytest
from botocore.auth import SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.credentials import Credentials, RefreshableCredentials

from workerless_gevent.wire.sigv4 import RestSigner, Signer

REGION = "eu-west-1"
ACCESS_KEY = "AKIDEXAMPLE"
SECRET_KEY = "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY"
TOKEN = "IQoJb3JpZ2luX2VjEXAMPLE//////////wEaCXVzLWVhc3QtMSJHMEUCIQD+session/token=="
QUEUE_URL = "https://sqs.eu-west-1.amazonaws.com/123456789012/jobs"
# ~600 bytes, as a ReceiveMessage or a DeleteMessageBatch of a few entries is
RECEIVE_BODY = json.dumps({"QueueUrl": QUEUE_URL, "MaxNumberOfMessages": 10, "WaitTimeSeconds": 20,
                           "VisibilityTimeout": 300, "MessageSystemAttributeNames": ["All"],
                           "MessageAttributeNames": ["All"]}, separators=(",", ":")).encode()
DELETE_BODY = json.dumps({"QueueUrl": QUEUE_URL, "Entries": [
    {"Id": str(n), "ReceiptHandle": "AQEB" + "x" * 90} for n in range(5)]}, separators=(",", ":")).encode()
UNICODE_BODY = json.dumps({"QueueUrl": QUEUE_URL, "MessageBody": "h\u00e9llo \u2713 \U0001f600 \u65e5\u672c"},
                          ensure_ascii=False).encode("utf-8")


def botocore_headers(credentials: Any, url: str, host: str, target: str, body: bytes,
                     timestamp: str | None = None) -> list[tuple[str, str]]:
    """The headers SqsWire.sign gets from botocore: add_auth on its clock, or the same steps at `timestamp`."""
    request = AWSRequest(method="POST", url=url, data=body, headers={
        "Host": host, "X-Amz-Target": target, "Content-Type": "application/x-amz-json-1.0",
        "x-amzn-query-mode": "true"})
    auth = SigV4Auth(credentials, "sqs", REGION)
    if timestamp is None:
        auth.add_auth(request)
    else:  # add_auth after its `context["timestamp"] = get_current_datetime()...`, step by step
        request.context["timestamp"] = timestamp
        auth._modify_request_before_signing(request)
        signature = auth.signature(auth.string_to_sign(request, auth.canonical_request(request)), request)
        auth._inject_signature_to_request(request, signature)
    return list(request.headers.items())


def epoch(timestamp: str) -> int:
    return calendar.timegm(time.strptime(timestamp, "%Y%m%dT%H%M%SZ"))


def signer_for(credentials: Any, url: str, host: str) -> Signer:
    return Signer(credentials, REGION, "sqs", host, urlsplit(url).path or "/")


@pytest.mark.parametrize(
    ("url", "host", "token", "target", "body"),
    [
        pytest.param("http://127.0.0.1:9324/", "127.0.0.1:9324", None, "AmazonSQS.ReceiveMessage", RECEIVE_BODY,
                     id="http-port-no-token"),
        pytest.param("https://sqs.eu-west-1.amazonaws.com/", "sqs.eu-west-1.amazonaws.com", TOKEN,
                     "AmazonSQS.DeleteMessageBatch", DELETE_BODY, id="https-no-port-token"),
        pytest.param("https://sqs.eu-west-1.amazonaws.com/", "sqs.eu-west-1.amazonaws.com", None,
                     "AmazonSQS.ChangeMessageVisibilityBatch", DELETE_BODY, id="https-no-port-no-token"),
        pytest.param("http://[::1]:4566/", "[::1]:4566", None, "AmazonSQS.ReceiveMessage", RECEIVE_BODY,
                     id="ipv6-port"),
        pytest.param("https://[2001:db8::5]/", "[2001:db8::5]", TOKEN, "AmazonSQS.ReceiveMessage", RECEIVE_BODY,
                     id="ipv6-no-port-token"),
        pytest.param("https://gateway.example.com/sqs/v1/", "gateway.example.com", TOKEN, "AmazonSQS.GetQueueUrl",
                     b'{"QueueName":"jobs"}', id="path"),
        pytest.param("http://gateway.example.com:8080/a//b/./c/../sqs~x%20y", "gateway.example.com:8080", None,
                     "AmazonSQS.ReceiveMessage", RECEIVE_BODY, id="path-normalized-and-encoded"),
        pytest.param("https://sqs.eu-west-1.amazonaws.com/", "sqs.eu-west-1.amazonaws.com", TOKEN,
                     "AmazonSQS.ListQueues", b"", id="empty-body"),
        pytest.param("http://127.0.0.1:9324/", "127.0.0.1:9324", TOKEN, "AmazonSQS.SendMessage", UNICODE_BODY,
                     id="unicode-body"),
    ],
)
def test_same_headers_as_botocore_add_auth(url: str, host: str, token: str | None, target: str, body: bytes) -> None:
    credentials = Credentials(ACCESS_KEY, SECRET_KEY, token)
    expected = botocore_headers(credentials.get_frozen_credentials(), url, host, target, body)
    signed_at = epoch(dict(expected)["X-Amz-Date"]) + 0.999  # botocore drops the fraction too
    headers = signer_for(credentials, url, host).headers(target, body, signed_at)
    assert list(headers.items()) == expected  # names, values and order
    assert ("X-Amz-Security-Token" in headers) == (token is not None)


def test_pinned_botocore_is_add_auth() -> None:
    """The helper's fixed-time path gives what add_auth itself gives at that second."""
    frozen = Credentials(ACCESS_KEY, SECRET_KEY, TOKEN).get_frozen_credentials()
    args = (frozen, "https://sqs.eu-west-1.amazonaws.com/", "sqs.eu-west-1.amazonaws.com",
            "AmazonSQS.ReceiveMessage", RECEIVE_BODY)
    live = botocore_headers(*args)
    assert botocore_headers(*args, timestamp=dict(live)["X-Amz-Date"]) == live


def test_signs_at_the_current_second_by_default() -> None:
    url, host = "https://sqs.eu-west-1.amazonaws.com/", "sqs.eu-west-1.amazonaws.com"
    credentials = Credentials(ACCESS_KEY, SECRET_KEY)
    before = int(time.time())
    headers = signer_for(credentials, url, host).headers("AmazonSQS.ReceiveMessage", RECEIVE_BODY)
    # A second of slack below: the wall clock may be stepped back between the two reads (NTP on a busy VM).
    assert before - 1 <= epoch(headers["X-Amz-Date"]) <= time.time()
    assert list(headers.items()) == botocore_headers(credentials, url, host, "AmazonSQS.ReceiveMessage",
                                                     RECEIVE_BODY, timestamp=headers["X-Amz-Date"])


def test_signing_key_is_kept_for_the_day_and_rolls_over_at_midnight_utc() -> None:
    url, host = "https://sqs.eu-west-1.amazonaws.com/", "sqs.eu-west-1.amazonaws.com"
    credentials = Credentials(ACCESS_KEY, SECRET_KEY, TOKEN)
    signer = signer_for(credentials, url, host)
    last_second = calendar.timegm((2024, 2, 29, 23, 59, 59, 0, 0, 0))
    kept = []
    for now, timestamp in ((last_second - 3600, "20240229T225959Z"), (last_second, "20240229T235959Z"),
                           (last_second + 1, "20240301T000000Z"), (last_second + 86400, "20240301T235959Z")):
        headers = signer.headers("AmazonSQS.ReceiveMessage", RECEIVE_BODY, now)
        assert list(headers.items()) == botocore_headers(credentials, url, host, "AmazonSQS.ReceiveMessage",
                                                         RECEIVE_BODY, timestamp=timestamp)
        assert f"Credential={ACCESS_KEY}/{timestamp[:8]}/{REGION}/sqs/aws4_request," in headers["Authorization"]
        kept.append(signer._signing_key)
    assert kept[0] is kept[1] and kept[2] is kept[3]  # derived once per day
    assert (kept[1][1], kept[2][1]) == ("20240229", "20240301")
    assert kept[1][2] != kept[2][2]


def test_refreshed_credentials_are_signed_with_at_once() -> None:
    """Real RefreshableCredentials expiring within botocore's mandatory window: new keys on every call."""
    issued: list[dict[str, str]] = []

    def refresh() -> dict[str, str]:
        n = len(issued)
        expiry = datetime.now(timezone.utc) + timedelta(minutes=5)
        issued.append({"access_key": f"ASIAROTATED{n}", "secret_key": f"secret-{n}", "token": f"token-{n}",
                       "expiry_time": expiry.isoformat()})
        return issued[-1]

    url, host = "http://127.0.0.1:9324/", "127.0.0.1:9324"
    credentials = RefreshableCredentials.create_from_metadata(refresh(), refresh, "test")
    signer = signer_for(credentials, url, host)
    now = calendar.timegm((2024, 6, 1, 12, 0, 0, 0, 0, 0))
    secrets = []
    for _ in range(3):
        headers = signer.headers("AmazonSQS.ReceiveMessage", RECEIVE_BODY, now)
        latest = issued[-1]
        frozen = Credentials(latest["access_key"], latest["secret_key"], latest["token"]).get_frozen_credentials()
        assert list(headers.items()) == botocore_headers(frozen, url, host, "AmazonSQS.ReceiveMessage",
                                                         RECEIVE_BODY, timestamp="20240601T120000Z")
        assert headers["X-Amz-Security-Token"] == latest["token"]
        secrets.append(signer._signing_key[0])
    assert len(issued) == 4  # the first keys, then one refresh per call
    assert secrets == ["secret-1", "secret-2", "secret-3"]


def test_no_credentials() -> None:
    signer = Signer(None, REGION, "sqs", "127.0.0.1:9324", "/")
    with pytest.raises(botocore.exceptions.NoCredentialsError):
        signer.headers("AmazonSQS.ReceiveMessage", RECEIVE_BODY)


# ------------------------------------------------------------------ RestSigner: Lambda's Invoke


def botocore_rest_headers(credentials: Any, url: str, headers: dict[str, str], body: bytes,
                          timestamp: str) -> dict[str, str]:
    """What add_auth puts on an Invoke as botocore's client builds it (the URL already escaped), at `timestamp`."""
    request = AWSRequest(method="POST", url=url, data=body, headers=dict(headers))
    auth = SigV4Auth(credentials, "lambda", REGION)
    request.context["timestamp"] = timestamp
    auth._modify_request_before_signing(request)
    signature = auth.signature(auth.string_to_sign(request, auth.canonical_request(request)), request)
    auth._inject_signature_to_request(request, signature)
    return dict(request.headers.items())


@pytest.mark.parametrize(
    ("endpoint", "path", "query", "token", "headers", "body"),
    [
        pytest.param("https://lambda.eu-west-1.amazonaws.com", "/2015-03-31/functions/billing/invocations", "",
                     None, {"X-Amz-Invocation-Type": "RequestResponse"}, b'{"Records":[]}', id="name"),
        pytest.param("https://lambda.eu-west-1.amazonaws.com",
                     "/2015-03-31/functions/arn%3Aaws%3Alambda%3Aeu-west-1%3A123456789012%3Afunction%3Abilling"
                     "/invocations", "Qualifier=live", TOKEN, {"X-Amz-Invocation-Type": "RequestResponse"},
                     RECEIVE_BODY, id="arn-qualifier-token"),
        pytest.param("http://127.0.0.1:4566", "/2015-03-31/functions/f%C3%A9%20x/invocations",
                     "Qualifier=v%201%3A%24LATEST", TOKEN, {"X-Amz-Invocation-Type": "Event"}, UNICODE_BODY,
                     id="escaped-name-and-qualifier"),
        pytest.param("https://gateway.example.com:8443/lambda", "/lambda/2015-03-31/functions/fn/invocations",
                     "", None, {}, b"", id="path-prefix-no-type-empty-body"),
    ],
)
def test_rest_signer_signs_as_botocore_add_auth(endpoint: str, path: str, query: str, token: str | None,
                                               headers: dict[str, str], body: bytes) -> None:
    credentials = Credentials(ACCESS_KEY, SECRET_KEY, token)
    host = urlsplit(endpoint).netloc
    signer = RestSigner(credentials, REGION, "lambda", host)
    at = calendar.timegm((2024, 6, 1, 12, 0, 0, 0, 0, 0))
    mine = signer.headers("POST", path, query, headers, body, at)
    url = f"{urlsplit(endpoint).scheme}://{host}{path}" + (f"?{query}" if query else "")
    expected = botocore_rest_headers(credentials.get_frozen_credentials(), url, headers, body, "20240601T120000Z")
    assert mine.pop("Host") == host  # sent by us; botocore signs it from the URL and urllib3 sends it
    assert mine == expected
    assert "SignedHeaders=host;x-amz-date" in mine["Authorization"]


def test_rest_signer_sorts_query_pairs_as_botocore_does() -> None:
    credentials = Credentials(ACCESS_KEY, SECRET_KEY)
    signer = RestSigner(credentials, REGION, "lambda", "lambda.eu-west-1.amazonaws.com")
    path, query = "/2015-03-31/functions/fn/invocations", "b=2&a=%3A&a=1"
    mine = signer.headers("POST", path, query, {}, b"{}", 0)
    expected = botocore_rest_headers(credentials.get_frozen_credentials(),
                                     f"https://lambda.eu-west-1.amazonaws.com{path}?{query}", {}, b"{}",
                                     "19700101T000000Z")
    assert mine["Authorization"] == expected["Authorization"]


def test_rest_signer_follows_refreshed_credentials_and_needs_some() -> None:
    issued: list[dict[str, str]] = []

    def refresh() -> dict[str, str]:
        expiry = datetime.now(timezone.utc) + timedelta(minutes=5)  # inside botocore's mandatory refresh window
        issued.append({"access_key": f"ASIA{len(issued)}", "secret_key": f"secret-{len(issued)}",
                       "token": f"token-{len(issued)}", "expiry_time": expiry.isoformat()})
        return issued[-1]

    signer = RestSigner(RefreshableCredentials.create_from_metadata(refresh(), refresh, "test"), REGION, "lambda",
                        "lambda.eu-west-1.amazonaws.com")
    tokens = [signer.headers("POST", "/p", "", {}, b"", 0)["X-Amz-Security-Token"] for _ in range(2)]
    assert tokens == ["token-1", "token-2"]
    with pytest.raises(botocore.exceptions.NoCredentialsError):
        RestSigner(None, REGION, "lambda", "h").headers("POST", "/p", "", {}, b"")
