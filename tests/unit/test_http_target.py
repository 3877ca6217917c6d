"""targets/http.py: the aws-sqsd header set, Retry-After, and how statuses become outcomes."""

from __future__ import annotations

import email.utils
import hashlib
import random
import time
import urllib.parse
from collections.abc import Iterator

import pytest

from tests.unit.sqs_messages import SENDER_ID, binary_attribute, make_message, raw_message, string_attribute
from workerless_gevent import __version__
from workerless_gevent.config.model import HttpTargetConfig
from workerless_gevent.message import Message
from workerless_gevent.targets import Outcome, Result
from workerless_gevent.targets.http import HttpTarget, build_headers, parse_retry_after
from workerless_gevent.targets.http_headers import ENCODED_HEADER




@pytest.fixture
def target() -> Iterator[HttpTarget]:
    made = HttpTarget(HttpTargetConfig(name="default", url="http://127.0.0.1:9/x"))
    yield made
    made.close()


def test_headers_are_the_aws_sqsd_set() -> None:
    message = make_message(message_id="m-1", receive_count=3, message_attributes={
        "color": string_attribute("red"),
        "size": string_attribute("3.5", "Number"),
        "blob": binary_attribute(b"\x00\x01"),
    })
    assert build_headers("payments", message, "application/json") == {
        "Content-Type": "application/json",
        "X-Aws-Sqsd-Msgid": "m-1",
        "X-Aws-Sqsd-Queue": "payments",
        "X-Aws-Sqsd-First-Received-At": "2023-11-14T22:13:21.456Z",
        "X-Aws-Sqsd-Receive-Count": "3",
        "X-Aws-Sqsd-Sender-Id": SENDER_ID,
        "X-Aws-Sqsd-Sent-At": "2023-11-14T22:13:20.123Z",
        "X-Aws-Sqsd-Attr-color": "red",
        "X-Aws-Sqsd-Attr-size": "3.5",
    }


def test_content_type_comes_from_config() -> None:
    assert build_headers("payments", make_message(), "text/plain; charset=utf-8")["Content-Type"] == (
        "text/plain; charset=utf-8")


def test_timestamps_are_iso_8601_utc_ending_in_z() -> None:
    headers = build_headers("payments", make_message(), "application/json")
    for name in ("X-Aws-Sqsd-First-Received-At", "X-Aws-Sqsd-Sent-At"):
        assert headers[name].endswith("Z")
        assert len(headers[name]) == len("2023-11-14T22:13:21.456Z")


def test_missing_system_attributes_give_empty_or_default_headers() -> None:
    message = Message.from_sqs("payments", {"MessageId": "m", "ReceiptHandle": "h", "Body": ""}, 0.0, 0.0)
    headers = build_headers("payments", message, "application/json")
    assert headers["X-Aws-Sqsd-First-Received-At"] == ""
    assert headers["X-Aws-Sqsd-Sent-At"] == ""
    assert headers["X-Aws-Sqsd-Receive-Count"] == "1"
    assert headers["X-Aws-Sqsd-Sender-Id"] == ""


def test_binary_attributes_are_dropped() -> None:
    message = make_message(message_attributes={"blob": binary_attribute(b"abc"),
                                               "gz": binary_attribute(b"abc", "Binary.gzip")})
    headers = build_headers("payments", message, "application/json")
    assert not [name for name in headers if name.startswith("X-Aws-Sqsd-Attr-")]


def test_periodic_task_headers() -> None:
    message = make_message(message_attributes={
        "beanstalk.sqsd.task_name": string_attribute("cleanup"),
        "beanstalk.sqsd.scheduled_time": string_attribute("2024-01-01T00:05:00Z"),
        "beanstalk.sqsd.path": string_attribute("/tasks/cleanup"),
    })
    headers = build_headers("default", message, "application/json")
    assert headers["X-Aws-Sqsd-Taskname"] == "cleanup"
    assert headers["X-Aws-Sqsd-Scheduled-At"] == "2024-01-01T00:05:00Z"
    assert headers["X-Aws-Sqsd-Path"] == "/tasks/cleanup"


def test_task_without_scheduled_time_gets_an_empty_header() -> None:
    message = make_message(message_attributes={"beanstalk.sqsd.task_name": string_attribute("cleanup")})
    headers = build_headers("default", message, "application/json")
    assert headers["X-Aws-Sqsd-Scheduled-At"] == ""
    assert "X-Aws-Sqsd-Path" not in headers


def test_no_task_headers_for_ordinary_messages() -> None:
    headers = build_headers("default", make_message(), "application/json")
    assert not {"X-Aws-Sqsd-Taskname", "X-Aws-Sqsd-Scheduled-At", "X-Aws-Sqsd-Path"} & set(headers)


def test_path_attribute_alone_gives_the_path_header() -> None:
    message = make_message(message_attributes={"beanstalk.sqsd.path": string_attribute("/other")})
    assert build_headers("default", message, "application/json")["X-Aws-Sqsd-Path"] == "/other"


def on_the_wire(value: str) -> str:
    """A header value as an app reads it: the request is written as latin-1, so UTF-8 comes as its bytes."""
    return value.encode("latin-1").decode("utf-8")


@pytest.mark.parametrize(
    ("value", "sent"),
    [
        pytest.param("plain ASCII, with: punctuation!", "plain ASCII, with: punctuation!", id="printable-unchanged"),
        pytest.param("50%", "50%", id="percent-alone-unchanged"),
        pytest.param("%41", "%41", id="percent-escape-lookalike-unchanged"),
        pytest.param("café", "café", id="non-ascii-as-utf-8"),
        pytest.param("日本 😀", "日本 😀", id="cjk-and-emoji-as-utf-8"),
        pytest.param("\u202eevil", "\u202eevil", id="bidi-control-is-not-a-c0-control"),
        pytest.param("inner  spaces", "inner  spaces", id="inner-spaces"),
    ],
)
def test_values_http_can_carry_go_as_they_are_in_utf_8(value: str, sent: str) -> None:
    message = make_message(message_attributes={"note": string_attribute(value)})
    headers = build_headers("payments", message, "application/json")
    assert on_the_wire(headers["X-Aws-Sqsd-Attr-note"]) == sent
    assert ENCODED_HEADER not in headers


@pytest.mark.parametrize(
    ("value", "sent"),
    [
        pytest.param("line\nbreak", "line%0Abreak", id="newline"),
        pytest.param("a\r\nX-Injected: 1", "a%0D%0AX-Injected:%201", id="header-injection"),
        pytest.param("tab\there", "tab%09here", id="tab"),
        pytest.param("nul\x00", "nul%00", id="nul"),
        pytest.param("del\x7f", "del%7F", id="del"),
        pytest.param("100% é\n", "100%25%20%C3%A9%0A", id="percent-and-non-ascii-encoded-too"),
        pytest.param(" leading", "%20leading", id="leading-space"),
        pytest.param("trailing ", "trailing%20", id="trailing-space"),
    ],
)
def test_values_http_would_change_are_percent_encoded_and_named(value: str, sent: str) -> None:
    message = make_message(message_attributes={"note": string_attribute(value), "plain": string_attribute("x y")})
    headers = build_headers("payments", message, "application/json")
    assert headers["X-Aws-Sqsd-Attr-note"] == sent
    assert urllib.parse.unquote(sent) == value
    assert headers[ENCODED_HEADER] == "X-Aws-Sqsd-Attr-note"
    assert headers["X-Aws-Sqsd-Attr-plain"] == "x y"


def test_task_header_values_follow_the_same_rule() -> None:
    message = make_message(message_attributes={
        "beanstalk.sqsd.task_name": string_attribute("nettoyage-é"),
        "beanstalk.sqsd.path": string_attribute("/tâches\n"),
    })
    headers = build_headers("default", message, "application/json")
    assert on_the_wire(headers["X-Aws-Sqsd-Taskname"]) == "nettoyage-é"
    assert headers["X-Aws-Sqsd-Path"] == "/t%C3%A2ches%0A"
    assert headers["X-Aws-Sqsd-Attr-beanstalk.sqsd.path"] == "/t%C3%A2ches%0A"
    assert headers[ENCODED_HEADER] == "X-Aws-Sqsd-Attr-beanstalk.sqsd.path, X-Aws-Sqsd-Path"


def test_every_value_decodes_back_to_itself_and_fits_a_header_line() -> None:
    rng = random.Random(404)
    alphabet = [chr(code) for code in range(0, 0x2FF)] + ["😀", "\u2028", "\ufeff"]
    for _ in range(2000):
        value = "".join(rng.choice(alphabet) for _ in range(rng.randrange(1, 30)))
        headers = build_headers("payments", make_message(message_attributes={"v": string_attribute(value)}), "x")
        sent = headers["X-Aws-Sqsd-Attr-v"]
        line = f"X-Aws-Sqsd-Attr-v: {sent}\r\n".encode("latin-1")  # what post_request writes
        assert not any(byte < 0x20 or byte == 0x7F for byte in line[:-2]), repr(value)
        assert sent == sent.strip(" \t"), repr(value)
        decoded = urllib.parse.unquote(sent) if ENCODED_HEADER in headers else on_the_wire(sent)
        assert decoded == value, repr(value)


@pytest.mark.parametrize(
    "name",
    [
        pytest.param("bad name", id="space"),
        pytest.param("a:b", id="colon"),
        pytest.param("naïve", id="non-ascii"),
        pytest.param("line\nbreak", id="newline"),
        pytest.param("(paren)", id="separator"),
        pytest.param("name\n", id="trailing-newline"),
    ],
)
def test_attribute_names_that_are_not_tokens_are_skipped(name: str) -> None:
    message = make_message(message_attributes={name: string_attribute("v"), "ok.name-1_x": string_attribute("w")})
    attrs = {key: value for key, value in build_headers("payments", message, "application/json").items()
             if key.startswith("X-Aws-Sqsd-Attr-")}
    assert attrs == {"X-Aws-Sqsd-Attr-ok.name-1_x": "w"}


def test_every_sqs_attribute_name_character_is_a_token() -> None:
    name = "AZaz09_-.x"
    message = make_message(message_attributes={name: string_attribute("v")})
    assert build_headers("payments", message, "application/json")[f"X-Aws-Sqsd-Attr-{name}"] == "v"


# --- Retry-After --------------------------------------------------------------------------------

@pytest.mark.parametrize(
    ("value", "seconds"),
    [("120", 120.0), ("0", 0.0), (" 7 ", 7.0), ("86400", 86400.0)],
)
def test_retry_after_seconds(value: str, seconds: float) -> None:
    assert parse_retry_after(value) == seconds


def test_retry_after_http_date_in_the_future() -> None:
    value = email.utils.formatdate(time.time() + 90, usegmt=True)
    seconds = parse_retry_after(value)
    assert seconds is not None and 88.0 <= seconds <= 90.0


def test_retry_after_http_date_in_the_past_is_now() -> None:
    assert parse_retry_after("Wed, 21 Oct 2015 07:28:00 GMT") == 0.0


@pytest.mark.parametrize("value", ["", "soon", "-5", "1.5", "Wed, 99 Foo 2015"])
def test_retry_after_garbage_is_none(value: str) -> None:
    assert parse_retry_after(value) is None


# --- HttpTarget.judge ---------------------------------------------------------------------------

def test_target_reads_its_url(target: HttpTarget) -> None:
    assert target.path == "/x"
    assert target.messages_per_delivery == 1
    assert target.hard_deadline_seconds == 5 + 180
    assert f"\r\nUser-Agent: aws-sqsd/{__version__} (workerless)\r\n" in target.fixed_headers


def test_url_without_path_posts_to_root() -> None:
    bare = HttpTarget(HttpTargetConfig(name="default", url="http://127.0.0.1:9"))
    try:
        assert bare.path == "/"
    finally:
        bare.close()


@pytest.mark.parametrize("status", [200, 201, 202, 204, 299])
def test_2xx_is_success(target: HttpTarget, status: int) -> None:
    assert target.judge(status, None) == Outcome(Result.SUCCESS, status=status)
    assert target.judge(status, "30").is_success and target.judge(status, "30").status == status
    assert target.pause.remaining_seconds() <= 0


@pytest.mark.parametrize("status", [429, 503])
def test_429_and_503_with_retry_after_are_retries_that_pause(target: HttpTarget, status: int) -> None:
    outcome = target.judge(status, "30")
    assert outcome == Outcome(Result.RETRY, f"HTTP {status}", f"HTTP {status}, Retry-After 30s", 30.0, status)
    assert target.pause.remaining_seconds() == pytest.approx(30.0, abs=1.0)


def test_retry_after_as_http_date(target: HttpTarget) -> None:
    outcome = target.judge(503, email.utils.formatdate(time.time() + 60, usegmt=True))
    assert outcome.result is Result.RETRY
    assert outcome.retry_after_seconds is not None and 58.0 <= outcome.retry_after_seconds <= 60.0


def test_pause_keeps_the_longest_request(target: HttpTarget) -> None:
    target.judge(429, "60")
    target.judge(429, "5")
    assert target.pause.remaining_seconds() == pytest.approx(60.0, abs=1.0)


@pytest.mark.parametrize(
    ("status", "retry_after"),
    [
        pytest.param(503, None, id="503-without-retry-after"),
        pytest.param(429, None, id="429-without-retry-after"),
        pytest.param(503, "later", id="503-unparseable-retry-after"),
        pytest.param(500, "5", id="500-ignores-retry-after"),
        pytest.param(301, None, id="301"),
        pytest.param(302, None, id="302"),
        pytest.param(304, None, id="304"),
        pytest.param(400, None, id="400"),
        pytest.param(404, None, id="404"),
        pytest.param(413, None, id="413"),
        pytest.param(500, None, id="500"),
        pytest.param(502, None, id="502"),
        pytest.param(504, None, id="504"),
        pytest.param(100, None, id="100"),
    ],
)
def test_other_statuses_are_failures(status: int, retry_after: str | None) -> None:
    target = HttpTarget(HttpTargetConfig(name="default", url="http://127.0.0.1:9/x", overload="failure"))
    assert target.judge(status, retry_after) == Outcome(Result.FAILURE, f"HTTP {status}",
                                                        f"the app answered HTTP {status}", status=status)
    assert target.pause.remaining_seconds() <= 0
    target.close()


@pytest.mark.parametrize(("status", "retry_after"), [(429, None), (503, None), (503, "later"), (429, "")])
def test_busy_without_a_usable_retry_after_is_an_overload_by_default(
    target: HttpTarget, status: int, retry_after: str | None,
) -> None:
    outcome = target.judge(status, retry_after)
    assert outcome == Outcome(Result.OVERLOADED, f"HTTP {status}", f"the app answered HTTP {status} without Retry-After",
                              status=status)
    assert outcome.result is Result.OVERLOADED
    assert target.pause.remaining_seconds() <= 0  # overload shrinks the in-flight limit; it pauses nothing
    assert target.judge(500, None).result is Result.FAILURE


def test_header_message_is_built_from_raw_boto3_message() -> None:
    message = Message.from_sqs("payments", raw_message(message_id="abc"), 0.0, 0.0)
    assert build_headers("payments", message, "application/json")["X-Aws-Sqsd-Msgid"] == "abc"


@pytest.mark.parametrize(("key", "sent"), [
    pytest.param("A-1 %20", "A-1 %20", id="printable-ascii-as-it-is"),
    pytest.param("k" * 20_000, "sha256:" + hashlib.sha256(b"k" * 20_000).hexdigest(), id="too-long"),
    pytest.param("tâche\n", "sha256:" + hashlib.sha256("tâche\n".encode()).hexdigest(), id="not-printable-ascii"),
])
def test_the_idempotency_key_header_carries_the_short_form_never_encoded(key: str, sent: str) -> None:
    message = make_message()
    message.idempotency_key = key
    headers = build_headers("payments", message, "application/json")
    assert headers["X-Workerless-Idempotency-Key"] == sent
    assert ENCODED_HEADER not in headers
