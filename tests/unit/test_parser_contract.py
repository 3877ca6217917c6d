"""What wire/parsing.py relies on in httptools' llhttp binding, and what ReplyParser makes of it.

`workerless_gevent.wire.parsing.ReplyParser` is the protocol object of an `httptools.HttpResponseParser`
and relies on: `feed_data` (bytes in any pieces), `get_status_code` and `should_keep_alive` (also from
inside callbacks), `HttpParserError` (and `HttpParserUpgrade`) for bytes that are not an answer, and the
parser calling `on_message_begin()`, `on_header(name: bytes, value: bytes)` once per whole header,
`on_headers_complete()`, `on_body(bytes-like)` and `on_message_complete()`. httptools has no
`llhttp_finish`: ReplyParser judges the end of the connection itself, as llhttp would. A new httptools
may change any of this: these tests then fail with the version in the message (pyproject.toml bounds it
to >=0.6.4,<1).
"""

from __future__ import annotations

import signal
import subprocess
import sys
from importlib.metadata import version
from typing import Any

import httptools
import pytest

from tests.support.collector import left_in_cycles
from workerless_gevent.wire.parsing import HTTPParseError, ReplyParser

VERSION = version("httptools")
WHO = f"httptools {VERSION} (httptools.HttpResponseParser, used by workerless_gevent/wire/parsing.py)"
ANSWER = b"HTTP/1.1 201 Created\r\nX-Name: value\r\nContent-Length: 5\r\n\r\nhello"


class Recording:
    """Every callback wire/parsing.py implements, recorded with what it was given."""

    def __init__(self) -> None:
        self.calls: list[tuple[Any, ...]] = []
        self.parser = httptools.HttpResponseParser(self)

    def on_message_begin(self) -> None:
        self.calls.append(("message_begin",))

    def on_header(self, name: bytes, value: bytes) -> None:
        self.calls.append(("header", bytes(name), bytes(value), self.parser.get_status_code()))

    def on_headers_complete(self) -> None:
        self.calls.append(("headers_complete",))

    def on_body(self, data: bytes) -> None:
        self.calls.append(("body", bytes(data), type(data)))

    def on_message_complete(self) -> None:
        self.calls.append(("message_complete", self.parser.get_status_code(), self.parser.should_keep_alive()))

    def names(self) -> list[str]:
        return [call[0] for call in self.calls]

    def body(self) -> bytes:
        return b"".join(call[1] for call in self.calls if call[0] == "body")

    def feed(self, *pieces: bytes) -> None:
        for piece in pieces:
            try:
                self.parser.feed_data(piece)
            except httptools.HttpParserError:
                raise
            except Exception as error:
                pytest.fail(f"{WHO}: feed_data({piece!r}) raised {type(error).__name__}: {error} (expected none)")


def check(condition: bool, what: str, got: object) -> None:
    assert condition, f"{WHO} no longer {what}; got {got!r}. Adapt wire.parsing.ReplyParser or pin httptools."


def parse(*pieces: bytes, keep: frozenset[str] = frozenset(), errors_only: bool = False) -> ReplyParser:
    parser = ReplyParser(keep, True, errors_only)
    for piece in pieces:
        parser.feed(piece)
    return parser


# --- httptools ----------------------------------------------------------------------------------

def test_the_module_has_what_parsing_imports() -> None:
    check(isinstance(httptools.HttpResponseParser, type), "exports a class HttpResponseParser",
          httptools.HttpResponseParser)
    check(issubclass(httptools.HttpParserError, Exception) and issubclass(httptools.HttpParserUpgrade, Exception),
          "has HttpParserError and HttpParserUpgrade as Exceptions", dir(httptools))
    for method in ("feed_data", "get_status_code", "should_keep_alive"):
        check(callable(getattr(httptools.HttpResponseParser, method, None)), f"has a method {method}()",
              dir(httptools.HttpResponseParser))


def test_callbacks_come_in_order_with_whole_headers_and_a_bytes_like_body() -> None:
    recording = Recording()
    recording.feed(ANSWER)
    expected = ["message_begin", "header", "header", "headers_complete", "body", "message_complete"]
    check(recording.names() == expected, "calls on_* in this order: " + ", ".join(expected), recording.calls)
    check(recording.calls[1][1:] == (b"X-Name", b"value", 201) and recording.calls[2][1:3] == (b"Content-Length", b"5"),
          "calls on_header(name, value) once per header with bytes, get_status_code() already set", recording.calls)
    body = recording.calls[4]
    check(body[1] == b"hello" and issubclass(body[2], (bytes, bytearray)), "passes the body to on_body as bytes", body)
    check(recording.calls[-1] == ("message_complete", 201, True),
          "has get_status_code() == 201 and should_keep_alive() in on_message_complete", recording.calls[-1])


def test_an_answer_and_its_header_lines_may_come_in_pieces() -> None:
    for cut in range(1, len(ANSWER)):
        recording = Recording()
        recording.feed(ANSWER[:cut], ANSWER[cut:])
        headers = [call[1:3] for call in recording.calls if call[0] == "header"]
        check(headers == [(b"X-Name", b"value"), (b"Content-Length", b"5")],
              f"hands over each header whole when the answer is split at byte {cut}", recording.calls)
        check(recording.body() == b"hello" and recording.names()[-1] == "message_complete",
              f"completes an answer split at byte {cut}", recording.calls)


def test_keep_alive_follows_the_version_and_connection_header() -> None:
    for answer, keep in [
        (b"HTTP/1.1 204 No Content\r\n\r\n", True),
        (b"HTTP/1.1 204 No Content\r\nConnection: close\r\n\r\n", False),
        (b"HTTP/1.0 204 No Content\r\nContent-Length: 0\r\n\r\n", False),
        (b"HTTP/1.0 204 No Content\r\nConnection: keep-alive\r\nContent-Length: 0\r\n\r\n", True),
    ]:
        recording = Recording()
        recording.feed(answer)
        check(recording.calls[-1][2] is keep, f"gives should_keep_alive() == {keep} for {answer!r}", recording.calls)
        check(parse(answer).should_keep_alive() is keep, f"(ReplyParser) keeps alive == {keep} for {answer!r}", answer)


def test_chunked_bodies_and_interim_answers() -> None:
    recording = Recording()
    recording.feed(b"HTTP/1.1 100 Continue\r\n\r\n"
                   b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n2\r\nde\r\n0\r\n\r\n")
    check(recording.names().count("message_begin") == 2, "calls on_message_begin once per answer, a 1xx one included",
          recording.calls)
    completes = [call[1] for call in recording.calls if call[0] == "message_complete"]
    check(completes == [100, 200], "completes the interim 100 answer, then the final one", completes)
    check(recording.body() == b"abcde", "passes a chunked body to on_body without the chunk framing", recording.calls)


def test_bad_bytes_raise_and_keep_raising() -> None:
    recording = Recording()
    with pytest.raises(httptools.HttpParserError):
        recording.feed(b"NOT HTTP AT ALL\r\n\r\n")
    with pytest.raises(httptools.HttpParserError):
        recording.feed(ANSWER)  # wire.http closes the connection: a failed parser stays failed


def test_a_second_answer_on_a_keep_alive_connection_begins_a_new_message() -> None:
    # ReplyParser sees it as bytes after its answer (trailing) through on_message_begin.
    recording = Recording()
    recording.feed(ANSWER + ANSWER)
    check(recording.names().count("message_begin") == 2 and recording.names().count("message_complete") == 2,
          "calls on_message_begin/on_message_complete again for a second answer in the same feed", recording.calls)


# --- ReplyParser on it ----------------------------------------------------------------------------

def test_reply_parser_keeps_the_status_the_named_headers_and_the_body() -> None:
    parser = parse(b"HTTP/1.1 503 Slow Down\r\nRetry-After: 7\r\nretry-after: 9\r\nX-Other: 1\r\n"
                   b"Content-Length: 4\r\n\r\nbusy", keep=frozenset({"retry-after"}))
    assert (parser.done, parser.status, parser.headers, bytes(parser.body)) == (True, 503, {"retry-after": "7"}, b"busy")
    assert parser.should_keep_alive() and not parser.trailing


def test_headers_of_errors_only_are_kept_for_errors_even_without_a_reason_phrase() -> None:
    keep = frozenset({"retry-after"})
    for status_line in (b"HTTP/1.1 503 Service Unavailable", b"HTTP/1.1 503 ", b"HTTP/1.1 503"):
        parser = parse(status_line + b"\r\nRetry-After: 7\r\nContent-Length: 0\r\n\r\n", keep=keep, errors_only=True)
        assert (parser.status, parser.headers) == (503, {"retry-after": "7"}), status_line
    ok = parse(b"HTTP/1.1 200\r\nRetry-After: 7\r\nContent-Length: 0\r\n\r\n", keep=keep, errors_only=True)
    assert (ok.status, ok.headers) == (200, {})


def test_an_interim_answer_s_headers_are_not_the_final_answer_s() -> None:
    parser = parse(b"HTTP/1.1 100 Continue\r\nRetry-After: 1\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok",
                   keep=frozenset({"retry-after"}))
    assert (parser.status, parser.headers, bytes(parser.body)) == (200, {}, b"ok")


@pytest.mark.parametrize("answer", [
    b"HTTP/1.1 200 OK\r\nConnection: close\r\n\r\nuntil the end",
    b"HTTP/1.0 200 OK\r\n\r\nuntil the end",
    b"HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip\r\n\r\nuntil the end",  # chunked not last: read to the end
    b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nTransfer-Encoding: gzip\r\n\r\nuntil the end",
    b"HTTP/1.1 200 OK\r\nTransfer-Encoding: xchunked\r\n\r\nuntil the end",
])
def test_the_end_of_the_connection_ends_a_body_sent_without_a_length(answer: bytes) -> None:
    parser = parse(answer)
    assert not parser.done, "the body may go on until the connection ends"
    parser.feed(b"")
    assert (parser.done, parser.status, bytes(parser.body), parser.should_keep_alive()) == (True, 200, b"until the end",
                                                                                            False)


@pytest.mark.parametrize("answer", [
    b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nshort",
    b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n5\r\nabc",
    b"HTTP/1.1 200 OK\r\nContent-Le",
    b"HTTP/1.1 20",
    b"HTTP/1.1 100 Continue\r\n\r\n",  # an interim answer is not the answer
    b"HTTP/1.1 103 Early Hints\r\nLink: </style.css>\r\n\r\n",
    b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 3\r\n\r\nab",
])
def test_the_end_of_the_connection_inside_an_answer_is_a_parse_error(answer: bytes) -> None:
    parser = parse(answer)
    with pytest.raises(HTTPParseError):
        parser.feed(b"")
    assert not parser.done


def test_the_end_of_the_connection_before_any_answer_or_after_one_is_no_error() -> None:
    nothing = parse(b"")
    assert not nothing.began and not nothing.done  # wire.http: closed before an answer (a stale connection)
    whole = parse(ANSWER, b"")
    assert (whole.done, whole.status) == (True, 201)


def test_not_http_and_an_upgrade_are_parse_errors() -> None:
    with pytest.raises(HTTPParseError):
        parse(b"NOT HTTP AT ALL\r\n\r\n")
    with pytest.raises(HTTPParseError):
        parse(b"HTTP/1.1 101 Switching Protocols\r\nConnection: upgrade\r\nUpgrade: websocket\r\n\r\n")


def test_bytes_after_a_complete_answer_leave_it_standing_and_mark_the_connection() -> None:
    parser = parse(ANSWER + ANSWER.replace(b"201 Created", b"500 Oops"))
    assert (parser.done, parser.status, bytes(parser.body), parser.trailing) == (True, 201, b"hello", True)
    closed = parse(b"HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 2\r\n\r\nok")
    assert closed.done and not closed.should_keep_alive()
    try:  # wire.http keeps the complete answer either way and does not reuse the connection
        closed.feed(b"HTTP/1.1 200 OK\r\n\r\n")
    except HTTPParseError:
        pass
    assert (closed.status, bytes(closed.body)) == (200, b"ok")


# --- a header that is not UTF-8 -----------------------------------------------------------------
# The parser before httptools (geventhttpclient < 2.5) decoded header text as UTF-8 in C and crashed the
# process (SIGSEGV) on a byte like \xe9. Each case runs in its own interpreter, so a crash fails that case
# and names the signal instead of killing the test run.

LATIN1_ANSWER = b"HTTP/1.1 200 OK\r\nX-Name: caf\xe9\r\nContent-Length: 2\r\n\r\nok"
LATIN1_LINE = (LATIN1_ANSWER.index(b"X-Name"), LATIN1_ANSWER.index(b"\r\n", LATIN1_ANSWER.index(b"X-Name")) + 2)
KEEPS = {"kept": "x-name", "others-kept": "content-length", "none-kept": ""}
FEED_ONE_ANSWER = """
import sys
from workerless_gevent.wire.parsing import ReplyParser
keep, cut = frozenset(filter(None, sys.argv[1].split(","))), int(sys.argv[2])
answer = bytes.fromhex(sys.argv[3])
parser = ReplyParser(keep, True)
try:
    for piece in ([answer] if cut < 0 else [answer[:cut], answer[cut:]]):
        parser.feed(piece)
except Exception as error:
    print("exception", type(error).__name__)
else:
    print("answer", parser.done, parser.status, sorted(parser.headers.items()), bytes(parser.body))
"""


def feed_in_a_child(keep: str, cut: int) -> str:
    """What ReplyParser made of LATIN1_ANSWER (fed whole, or split before byte `cut`), in a new interpreter:
    "answer ...", "exception <name>", or "crash: ..." naming the signal or exit status."""
    child = subprocess.run([sys.executable, "-c", FEED_ONE_ANSWER, keep, str(cut), LATIN1_ANSWER.hex()],
                           capture_output=True, text=True, timeout=60)
    if child.returncode < 0:
        return f"crash: killed by {signal.Signals(-child.returncode).name}; stderr: {child.stderr[-1500:]!r}"
    if child.returncode != 0:
        return f"crash: exit status {child.returncode}; stderr: {child.stderr[-1500:]!r}"
    return child.stdout.strip()


def describe(keep: str, cut: int) -> str:
    where = "whole" if cut < 0 else f"split before byte {cut} ({LATIN1_ANSWER[:cut]!r} | {LATIN1_ANSWER[cut:]!r})"
    return f"{WHO}: ReplyParser(keep_headers=frozenset({[keep] if keep else []})) fed {where}"


@pytest.fixture(scope="module")
def whole_outcomes() -> dict[str, str]:
    return {keep: feed_in_a_child(keep, -1) for keep in KEEPS.values()}


@pytest.mark.parametrize("keep", KEEPS.values(), ids=KEEPS.keys())
def test_a_non_utf8_header_gives_an_answer_or_a_clean_exception(keep: str, whole_outcomes: dict[str, str]) -> None:
    outcome = whole_outcomes[keep]
    assert not outcome.startswith("crash"), f"{describe(keep, -1)}: {outcome}"
    assert outcome.startswith(("answer True 200 ", "exception ")), f"{describe(keep, -1)}: unexpected {outcome!r}"
    if outcome.startswith("answer"):
        assert outcome.endswith(" b'ok'"), f"{describe(keep, -1)}: the body was lost: {outcome!r}"
        assert ("'x-name'" in outcome) == (keep == "x-name"), f"{describe(keep, -1)}: headers kept: {outcome!r}"


@pytest.mark.parametrize("cut", range(LATIN1_LINE[0], LATIN1_LINE[1] + 1))
@pytest.mark.parametrize("keep", KEEPS.values(), ids=KEEPS.keys())
def test_a_non_utf8_header_split_anywhere_gives_what_the_whole_answer_gives(
    keep: str, cut: int, whole_outcomes: dict[str, str],
) -> None:
    outcome = feed_in_a_child(keep, cut)
    assert not outcome.startswith("crash"), f"{describe(keep, cut)}: {outcome}"
    assert outcome == whole_outcomes[keep], f"{describe(keep, cut)}: {outcome!r}, whole: {whole_outcomes[keep]!r}"


def test_bytes_after_a_complete_answer_are_not_looked_at_even_in_the_same_read() -> None:
    parser = parse(b"HTTP/1.1 204 No Content\r\n\r\nHTTP/1.1 200 OK\r\nRetry-After: 5\r\nContent-Length: 0\r\n\r\n",
                   keep=frozenset({"retry-after"}))
    assert (parser.done, parser.status, parser.headers, parser.trailing) == (True, 204, {}, True)


def test_an_exception_in_a_callback_is_raised_as_itself_not_as_a_parse_error() -> None:
    class Failing(ReplyParser):
        def on_body(self, data: bytes) -> None:
            raise RuntimeError("a bug in a callback")

    with pytest.raises(RuntimeError, match="a bug in a callback"):
        Failing(frozenset(), True).feed(ANSWER)


def test_a_released_reply_parser_is_freed_without_the_cyclic_collector() -> None:
    # httptools' parser holds the ReplyParser's bound methods; a ReplyParser that kept its parser would be a
    # cycle, left to the collector's older generations at high concurrency (the tree grew by 17 MB at c=1,000).
    answers = [ANSWER, b"HTTP/1.1 100 Continue\r\n\r\n" + ANSWER + ANSWER, b"HTTP/1.0 200 OK\r\n\r\nto the end"]

    def parse_all() -> None:
        for answer in answers * 50:
            parser = parse(answer, b"")
            assert parser.done
            parser.release()

    left = left_in_cycles(parse_all, ReplyParser, httptools.HttpResponseParser)
    assert not left, f"{len(left)} parsers in cycles after 150 complete answers"
