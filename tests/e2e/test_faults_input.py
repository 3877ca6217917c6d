"""Failure table, bad input: odd bodies go out byte-exact; attributes no header can carry never crash."""

from __future__ import annotations

import hashlib
import urllib.parse
from collections.abc import Callable
from pathlib import Path
from typing import Any

from tests.support import Daemon, FakeLambda, Queue, build_config_file, count_messages, wait_until
from tests.support.faults import FaultyApp, faulty_app_fixture  # noqa: F401 (fixture)

KIB = 1024

# Every body SQS accepts: any of #x9 #xA #xD #x20-#xD7FF #xE000-#xFFFD #x10000-#x10FFFF.
ODD_BODIES = [
    "plain ascii",
    "emoji 😀 family 👩‍👩‍👧‍👦 flag 🏳️‍🌈 skin 👍🏽",
    "RTL עברית مرحبا \u200f\u202eoverride\u202c",
    "combining e\u0301 zalgo z\u0351\u0358\u0336 CJK 漢字 かな",
    " ",
    "\t",
    "\n",
    "\r\n\r\n",
    " \t \n \r ",
    "{\"unterminated\": [1, 2,",
    "not json at all",
    "{\"valid\": \"json\", \"n\": 1}",
    "\ufffd\ue000\U0010ffff\U00010000 edges of the allowed ranges",
    "trailing spaces   ",
    "   leading spaces",
    "null",
    "\"a quoted string\"",
    "x" * (256 * KIB),  # the old SQS limit, exactly
    "é" * (128 * KIB),  # 256 KiB of two-byte UTF-8
    "😀" * (64 * KIB - 1) + "end",  # just under 256 KiB of four-byte UTF-8
    "y" * (1024 * KIB - 64),  # near today's 1 MiB limit
]


def send_each(sqs: Any, url: str, bodies: list[str]) -> None:
    for body in bodies:  # one by one: a batch's total must stay under 1 MiB
        sqs.send_message(QueueUrl=url, MessageBody=body)


def describe(body: bytes | str) -> str:
    return repr(body[:40]) + (f"... ({len(body)})" if len(body) > 40 else "")


def test_odd_bodies_are_posted_byte_exact(
    daemon: Callable[..., Daemon], tmp_path: Path, aws_env: dict[str, str], faulty_app: FaultyApp,
    sqs: Any, make_queue: Callable[..., Queue],
) -> None:
    queue = make_queue()
    config = build_config_file(tmp_path, concurrency=4, queues=[{"name": queue.name}],
                               targets={"default": {"type": "http", "url": f"{faulty_app.url}/work",
                                                    "content_type": "text/plain; charset=utf-8"}})
    proc = daemon(["-c", str(config)], env=aws_env)
    proc.wait_for_output("workerless started", timeout=60)
    send_each(sqs, queue.url, ODD_BODIES)
    expected = sorted(body.encode("utf-8") for body in ODD_BODIES)
    wait_until(lambda: sorted(faulty_app.succeeded_bodies()) == expected, 60,
               message=lambda: f"got {[describe(b) for b in faulty_app.succeeded_bodies()]}\n{proc.output()[-2000:]}")
    wait_until(lambda: count_messages(sqs, queue.url) == 0, 15, message="not deleted")
    assert proc.stop(timeout=30) == 0
    assert count_messages(sqs, queue.url) == 0
    assert sorted(faulty_app.succeeded_bodies()) == expected
    assert len(faulty_app.requests) == len(ODD_BODIES)
    for request in faulty_app.requests:
        assert request.headers["content-length"] == str(len(request.body))
        assert request.headers["content-type"] == "text/plain; charset=utf-8"
    assert "outcome=failure" not in proc.output()
    # bodies never reach the log at INFO
    assert "emoji" not in proc.output() and "unterminated" not in proc.output()


def test_odd_bodies_reach_lambda_exact(
    daemon: Callable[..., Daemon], tmp_path: Path, aws_env: dict[str, str], fake_lambda: FakeLambda,
    sqs: Any, make_queue: Callable[..., Queue],
) -> None:
    queue = make_queue()
    config = build_config_file(tmp_path, concurrency=4, queues=[{"name": queue.name}],
                               targets={"default": {"type": "lambda", "function": "fn-fake", "timeout": 30}})
    proc = daemon(["-c", str(config)], env={**aws_env, "AWS_ENDPOINT_URL_LAMBDA": fake_lambda.url})
    proc.wait_for_output("workerless started", timeout=60)
    send_each(sqs, queue.url, ODD_BODIES)

    def delivered() -> list[str]:
        return [record["body"] for invocation in list(fake_lambda.invocations)
                for record in invocation.payload["Records"]]

    wait_until(lambda: len(delivered()) >= len(ODD_BODIES), 60, message=lambda: proc.output()[-2000:])
    wait_until(lambda: count_messages(sqs, queue.url) == 0, 15, message="not deleted")
    assert proc.stop(timeout=30) == 0
    assert count_messages(sqs, queue.url) == 0
    assert sorted(delivered()) == sorted(ODD_BODIES)
    for invocation in fake_lambda.invocations:
        for record in invocation.payload["Records"]:
            assert record["md5OfBody"] == hashlib.md5(record["body"].encode("utf-8")).hexdigest()


HOSTILE_ATTRIBUTES = [
    {
        "injection": {"DataType": "String", "StringValue": "a\r\nX-Injected: yes"},
        "newline": {"DataType": "String", "StringValue": "line one\nline two"},
        "tab": {"DataType": "String", "StringValue": "tab\there"},
        "unicode": {"DataType": "String", "StringValue": "ünïcödé ☃ 😀 עברית"},
        "rtl": {"DataType": "String", "StringValue": "\u202eevil"},
        "blob": {"DataType": "Binary", "BinaryValue": b"\x00\r\n\xff"},
        "number": {"DataType": "Number", "StringValue": "-1.5e10"},
        "custom.json": {"DataType": "String.json", "StringValue": "{\"k\": [1, \"ü\"]}"},
        "beanstalk.sqsd.task_name": {"DataType": "String", "StringValue": "task\r\nX-Injected: task"},
        "Content-Length": {"DataType": "String", "StringValue": "999999"},
    },
    {
        "Host": {"DataType": "String", "StringValue": "evil.example"},
        "long": {"DataType": "String", "StringValue": "v" * 4000},
        "percent": {"DataType": "String", "StringValue": "100% %0d%0a"},
        "quotes": {"DataType": "String", "StringValue": "\"quoted\" 'and' `ticks` \\ back"},
        "Number.weird": {"DataType": "Number.float", "StringValue": "3.14"},
        "nul-ish": {"DataType": "String", "StringValue": "\x7f del and \x1f unit sep"},
        "beanstalk.sqsd.path": {"DataType": "String", "StringValue": "/tasks/ünï cöde"},
    },
]


def test_attributes_not_valid_in_headers_are_encoded_or_skipped_never_crash(
    daemon: Callable[..., Daemon], tmp_path: Path, aws_env: dict[str, str], faulty_app: FaultyApp,
    sqs: Any, make_queue: Callable[..., Queue],
) -> None:
    queue = make_queue()
    config = build_config_file(tmp_path, concurrency=4, queues=[{"name": queue.name}],
                               targets={"default": {"type": "http", "url": f"{faulty_app.url}/work"}})
    proc = daemon(["-c", str(config)], env=aws_env)
    proc.wait_for_output("workerless started", timeout=60)
    for index, attributes in enumerate(HOSTILE_ATTRIBUTES):
        sqs.send_message(QueueUrl=queue.url, MessageBody=f"hostile-{index}", MessageAttributes=attributes)
    sqs.send_message(QueueUrl=queue.url, MessageBody="plain")
    expected = sorted([b"plain"] + [f"hostile-{i}".encode() for i in range(len(HOSTILE_ATTRIBUTES))])
    wait_until(lambda: sorted(faulty_app.succeeded_bodies()) == expected, 30,
               message=lambda: f"{[(r.body, r.path) for r in faulty_app.requests]}\n{proc.output()[-3000:]}")
    wait_until(lambda: count_messages(sqs, queue.url) == 0, 15, message="not deleted")
    assert proc.alive()
    assert proc.stop(timeout=30) == 0
    assert count_messages(sqs, queue.url) == 0
    assert sorted(faulty_app.succeeded_bodies()) == expected
    assert len(faulty_app.requests) == len(expected)
    by_body = {request.body: request for request in faulty_app.requests}
    for index, attributes in enumerate(HOSTILE_ATTRIBUTES):
        request = by_body[f"hostile-{index}".encode()]
        headers = request.headers
        assert "x-injected" not in headers
        assert headers["content-length"] == str(len(request.body))
        assert headers["host"] != "evil.example"
        for name, value in attributes.items():
            if "_" in name:
                continue  # gevent's pywsgi drops header names with underscores (CGI can't tell _ from -)
            header = f"x-aws-sqsd-attr-{name}".lower()
            if value["DataType"] == "Binary":
                assert header not in headers  # dropped, as aws-sqsd does
                continue
            sent = value["StringValue"]
            got = headers[header]
            assert "\r" not in got and "\n" not in got, (name, got)
            # what a header line carries goes as it is, in UTF-8 (WSGI hands it over as latin-1); the rest is
            # percent-encoded and named in X-Workerless-Encoded
            encoded = [item.strip().lower() for item in headers.get("x-workerless-encoded", "").split(",")]
            decoded = urllib.parse.unquote(got) if header in encoded else got.encode("latin-1").decode("utf-8")
            assert decoded == sent, (name, got)
            assert (header in encoded) == any(ord(char) < 0x20 or ord(char) == 0x7F for char in sent), (name, got)
    assert by_body[b"hostile-0"].headers["x-aws-sqsd-taskname"] == "task%0D%0AX-Injected:%20task"
    # the path attribute replaces the URL path, percent-encoded so the request line stays valid
    routed = by_body[b"hostile-1"].path.encode("latin-1").decode("utf-8")  # WSGI PATH_INFO is unquoted latin-1
    assert routed == "/tasks/ünï cöde"
    assert by_body[b"hostile-1"].headers["x-aws-sqsd-path"].encode("latin-1").decode("utf-8") == "/tasks/ünï cöde"
    assert [r.path for r in faulty_app.requests if r.body != b"hostile-1"] == ["/work"] * 2
    assert "outcome=failure" not in proc.output()
