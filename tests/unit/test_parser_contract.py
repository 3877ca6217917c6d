"""The private API of geventhttpclient's C response parser that wire/http.py builds on.

`workerless_gevent.wire.parsing.ReplyParser` subclasses `geventhttpclient._parser.HTTPResponseParser`
and relies on: `feed` (an empty feed is EOF), `get_code` (also from inside callbacks),
`should_keep_alive`, `HTTPParseError`, and the parser calling these methods of the instance by
name: `_on_message_begin()`, `_on_status(str)`, `_on_header_field(str)`, `_on_header_value(str)`,
`_on_headers_complete() -> falsy to read the body`, `_on_body(bytes-like)`,
`_on_message_complete()`. The callbacks are looked up on the instance at each call: ReplyParser
swaps the two header callbacks for a C no-op (`set().discard`) in its instance dict mid-answer.
None of that is public, so a new geventhttpclient may change it: these tests then fail with the
version in the message (pyproject.toml bounds it to >=2.5,<3).
"""

from __future__ import annotations

import signal
import subprocess
import sys
from importlib.metadata import version
from typing import Any

import pytest
from geventhttpclient._parser import HTTPParseError, HTTPResponseParser

VERSION = version("geventhttpclient")
WHO = f"geventhttpclient {VERSION} (geventhttpclient._parser.HTTPResponseParser, used by workerless_gevent/wire/http.py)"
ANSWER = b"HTTP/1.1 201 Created\r\nX-Name: value\r\nContent-Length: 5\r\n\r\nhello"


class Recording(HTTPResponseParser):
    """Every callback wire/http.py implements, recorded with what it was given."""

    def __init__(self) -> None:
        super().__init__()
        self.calls: list[tuple[Any, ...]] = []

    def _on_message_begin(self) -> None:
        self.calls.append(("message_begin",))

    def _on_status(self, text: str) -> None:
        self.calls.append(("status", text, self.get_code()))

    def _on_header_field(self, text: str) -> None:
        self.calls.append(("header_field", text))

    def _on_header_value(self, text: str) -> None:
        self.calls.append(("header_value", text))

    def _on_headers_complete(self) -> bool:
        self.calls.append(("headers_complete",))
        return False

    def _on_body(self, data: bytes) -> None:
        self.calls.append(("body", bytes(data), type(data)))

    def _on_message_complete(self) -> None:
        self.calls.append(("message_complete", self.get_code()))

    def names(self) -> list[str]:
        return [call[0] for call in self.calls]

    def joined(self, kind: str) -> str:
        return "".join(call[1] for call in self.calls if call[0] == kind)


def feed_all(parser: HTTPResponseParser, *pieces: bytes) -> None:
    for piece in pieces:
        try:
            parser.feed(piece)
        except HTTPParseError:
            raise
        except Exception as error:
            pytest.fail(f"{WHO}: feed({piece!r}) raised {type(error).__name__}: {error} (expected none)")


def check(condition: bool, what: str, got: object) -> None:
    assert condition, f"{WHO} no longer {what}; got {got!r}. Adapt wire.parsing.ReplyParser or pin geventhttpclient."


def test_the_parser_module_has_what_http_wire_imports() -> None:
    check(isinstance(HTTPResponseParser, type), "exports a class HTTPResponseParser", HTTPResponseParser)
    check(issubclass(HTTPParseError, Exception), "has HTTPParseError as an Exception", HTTPParseError.__mro__)
    for method in ("feed", "get_code", "should_keep_alive"):
        check(callable(getattr(HTTPResponseParser, method, None)), f"has a method {method}()", dir(HTTPResponseParser))


def test_callbacks_come_in_order_with_text_and_a_bytes_like_body() -> None:
    parser = Recording()
    feed_all(parser, ANSWER)
    expected = ["message_begin", "status", "header_field", "header_value", "header_field", "header_value",
                "headers_complete", "body", "message_complete"]
    check(parser.names() == expected, "calls the _on_* callbacks in this order: " + ", ".join(expected), parser.calls)
    status = parser.calls[1]
    check(status[1] == "Created" and status[2] == 201, "calls _on_status(reason: str) with get_code() already set",
          status)
    check(parser.calls[2][1:] == ("X-Name",) and parser.calls[3][1:] == ("value",),
          "passes header names and values to _on_header_field/_on_header_value as str", parser.calls[2:4])
    body = parser.calls[7]
    check(body[1] == b"hello" and issubclass(body[2], (bytes, bytearray)),
          "passes the body to _on_body as bytes or bytearray", body)
    check(parser.calls[-1] == ("message_complete", 201), "has get_code() == 201 in _on_message_complete",
          parser.calls[-1])
    check(parser.get_code() == 201, "returns the status from get_code()", parser.get_code())
    check(bool(parser.should_keep_alive()), "says should_keep_alive() for an HTTP/1.1 answer", parser.should_keep_alive())


def test_an_answer_and_its_header_lines_may_come_in_pieces() -> None:
    whole = Recording()
    feed_all(whole, ANSWER)
    for cut in range(1, len(ANSWER)):
        parser = Recording()
        feed_all(parser, ANSWER[:cut], ANSWER[cut:])
        check(parser.joined("header_value") == "value5" and parser.joined("header_field") == "X-NameContent-Length",
              f"hands over header pieces that join up when the answer is split at byte {cut}", parser.calls)
        check(b"".join(call[1] for call in parser.calls if call[0] == "body") == b"hello"
              and parser.names()[-1] == "message_complete" and parser.get_code() == 201,
              f"completes an answer split at byte {cut}", parser.calls)


def test_an_empty_feed_is_eof_which_ends_a_body_without_a_length() -> None:
    parser = Recording()
    feed_all(parser, b"HTTP/1.1 200 OK\r\nConnection: close\r\n\r\nuntil the end")
    check("message_complete" not in parser.names(), "waits for EOF to end a body without Content-Length",
          parser.calls)
    feed_all(parser, b"")
    check(parser.names()[-1] == "message_complete", "treats feed(b'') as EOF that completes the body", parser.calls)
    check(not parser.should_keep_alive(), "says not should_keep_alive() after Connection: close",
          parser.should_keep_alive())


def test_keep_alive_follows_the_version_and_connection_header() -> None:
    for answer, keep in [
        (b"HTTP/1.1 204 No Content\r\n\r\n", True),
        (b"HTTP/1.1 204 No Content\r\nConnection: close\r\n\r\n", False),
        (b"HTTP/1.0 204 No Content\r\nContent-Length: 0\r\n\r\n", False),
        (b"HTTP/1.0 204 No Content\r\nConnection: keep-alive\r\nContent-Length: 0\r\n\r\n", True),
    ]:
        parser = Recording()
        feed_all(parser, answer)
        check(bool(parser.should_keep_alive()) is keep, f"gives should_keep_alive() == {keep} for {answer!r}",
              parser.should_keep_alive())


def test_chunked_bodies_and_interim_answers() -> None:
    parser = Recording()
    feed_all(parser, b"HTTP/1.1 100 Continue\r\n\r\n"
                     b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n2\r\nde\r\n0\r\n\r\n")
    check(parser.names().count("message_begin") == 2, "calls _on_message_begin once per answer, a 1xx one included",
          parser.calls)
    completes = [call for call in parser.calls if call[0] == "message_complete"]
    check(completes == [("message_complete", 100), ("message_complete", 200)],
          "completes the interim 100 answer, then the final one, with get_code() following them", completes)
    body = b"".join(call[1] for call in parser.calls if call[0] == "body")
    check(body == b"abcde", "passes a chunked body to _on_body without the chunk framing", body)


def test_callbacks_are_looked_up_on_the_instance_at_each_call() -> None:
    seen: list[str] = []

    class Swapping(Recording):
        def _on_status(self, text: str) -> None:
            super()._on_status(text)
            if not seen:  # the first answer: what ReplyParser does when it keeps no header
                self.__dict__.update(_on_header_field=seen.append, _on_header_value=set[str]().discard)

    parser = Swapping()
    feed_all(parser, ANSWER)
    check(seen == ["X-Name", "Content-Length"] and "header_field" not in parser.names(),
          "looks _on_header_field up on the instance at each call (an instance attribute set mid-answer wins)",
          (seen, parser.calls))
    check(parser.names()[-1] == "message_complete", "accepts a C callable such as set().discard as a callback",
          parser.calls)
    del parser._on_header_field, parser._on_header_value  # type: ignore[attr-defined]
    feed_all(parser, ANSWER)  # the next answer on the same connection goes to the class's methods again
    check(parser.names().count("header_field") == 2, "goes back to the class's callbacks once the instance's are deleted",
          parser.calls)


def test_bad_bytes_raise_http_parse_error_and_keep_raising() -> None:
    parser = Recording()
    with pytest.raises(HTTPParseError):
        feed_all(parser, b"NOT HTTP AT ALL\r\n\r\n")
    with pytest.raises(HTTPParseError):
        feed_all(parser, ANSWER)  # wire.http closes the connection: a failed parser stays failed


def test_bytes_after_a_complete_close_answer_raise_http_parse_error() -> None:
    # wire.http keeps the complete answer and marks the connection not reusable (ReplyParser.trailing).
    parser = Recording()
    feed_all(parser, b"HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 2\r\n\r\nok")
    check(parser.names()[-1] == "message_complete", "completes a Connection: close answer with a length",
          parser.calls)
    try:
        parser.feed(b"HTTP/1.1 200 OK\r\n\r\n")
    except HTTPParseError:
        pass
    else:
        check("message_begin" in parser.names()[parser.names().index("message_complete"):],
              "raises HTTPParseError or begins a new message for bytes after a Connection: close answer",
              parser.calls)


def test_a_second_answer_on_a_keep_alive_connection_begins_a_new_message() -> None:
    # ReplyParser sees it as bytes after its answer (trailing) through _on_message_begin.
    parser = Recording()
    feed_all(parser, ANSWER + ANSWER)
    check(parser.names().count("message_begin") == 2 and parser.names().count("message_complete") == 2,
          "calls _on_message_begin/_on_message_complete again for a second answer in the same feed", parser.calls)


# --- a header that is not UTF-8 -----------------------------------------------------------------
# geventhttpclient < 2.5 decoded header text as UTF-8 in C and crashed the process (SIGSEGV) on a
# byte like \xe9. Each case runs in its own interpreter, so a crash fails that case and names the
# signal instead of killing the test run.

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
