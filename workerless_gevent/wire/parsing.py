"""Reading one HTTP answer with httptools' binding of llhttp (the C parser Node.js uses): the status,
only the headers the caller names, and the body when wanted; interim 1xx answers skipped, bytes
after the answer noticed.

httptools looks its callbacks up once per parser and hands over each header whole, once; the
binding before it (geventhttpclient's) looked each one up by name at every call and called twice
per header, a seventh of a message's instructions. httptools has no `llhttp_finish`, so the end of
the connection is judged here as llhttp would judge it: it ends a body sent without a length, and
any other answer it cuts short is an `HTTPParseError`.

httptools' parser holds its protocol's bound methods, and the protocol here holds the parser: a cycle,
which only the cyclic collector would free. At c=1,000 that left a thousand parsers at a time to its
older generations (the process tree 17 MB larger, the CPU a message up a tenth), so whoever feeds a
ReplyParser lets its parser go with `release` once done with it (wire.http: at the end of every exchange,
whatever its outcome)."""

from __future__ import annotations

import sys
from dataclasses import dataclass
from http.client import HTTPException

from httptools import HttpParserCallbackError, HttpParserError, HttpParserUpgrade, HttpResponseParser

LENGTH = b"content-length"
CODINGS = b"transfer-encoding"


class HTTPParseError(HTTPException):
    """Not HTTP, or an answer that broke off where it could not end."""


class AnswerTooLarge(HTTPParseError):
    """An answer whose body is longer than the caller keeps: the rest is not read, and the connection is closed."""

    def __init__(self, status: int, headers: dict[str, str], max_body_bytes: int) -> None:
        super().__init__(f"HTTP {status} with a body over {max_body_bytes} bytes")
        self.status = status
        self.headers = headers  # the ones asked for
        self.max_body_bytes = max_body_bytes


@dataclass(slots=True)  # not frozen: a frozen dataclass sets each field through object.__setattr__, per answer
class Reply:
    status: int
    headers: dict[str, str]  # only the names asked for, lower-case
    body: bytes


class ReplyParser:
    """llhttp's callbacks, keeping the status, the named headers and (optionally) the body.

    One is made per answer, so what does not change is kept on the class."""

    began = False
    done = False  # the final (non-1xx) answer is complete
    status = 0  # its status: the parser moves on to any answer that comes after it
    trailing = False  # bytes came after it
    alive = False  # the connection may carry the next exchange
    _headers_complete = False  # of the answer under way (not of an interim 1xx one)
    _sized = False  # it has a Content-Length
    _chunked = False  # its (last) Transfer-Encoding ends with chunked
    _keep: bool | None = None  # headers are kept for this answer's status; None until its first header

    max_body_bytes = sys.maxsize  # of a body kept: past it, AnswerTooLarge (a class of its own: `limited`)

    def __init__(self, keep_headers: frozenset[str], keep_body: bool, keep_headers_of_errors_only: bool = False) -> None:
        self.keep_headers = keep_headers
        self.keep_body = keep_body
        self.keep_headers_of_errors_only = keep_headers_of_errors_only
        self.headers: dict[str, str] = {}
        self.body = bytearray()
        self.parser = HttpResponseParser(self)

    @classmethod
    def limited(cls, max_body_bytes: int) -> type[ReplyParser]:
        """A parser class that keeps at most this much of a body: the limit costs an answer without one nothing."""
        return type(f"{cls.__name__}UpTo{max_body_bytes}", (cls,), {"max_body_bytes": max_body_bytes})

    def feed(self, data: bytes) -> None:
        """Parse the next bytes read; empty bytes are the end of the connection. Not after `release`."""
        if not data:
            self._end_of_connection()
            return
        try:
            self.parser.feed_data(data)
        except HttpParserCallbackError as error:  # one of the callbacks below raised: that, not a parse error
            if error.__context__ is None:
                raise HTTPParseError(f"{type(error).__name__}: {error}") from None
            raise error.__context__ from None
        except (HttpParserError, HttpParserUpgrade) as error:  # an upgrade (101) is not an answer we can use
            raise HTTPParseError(f"{type(error).__name__}: {error}") from None

    def release(self) -> None:
        """Let the parser go, whatever state the exchange ended in (it and this object hold each other)."""
        del self.parser

    def should_keep_alive(self) -> bool:
        return self.alive

    def _end_of_connection(self) -> None:
        if not self.began or self.done:
            return
        if self._headers_complete and not (self._sized or self._chunked):  # a body that ends with the connection
            self.done = True
            self.status = self.parser.get_status_code()
            return
        raise HTTPParseError("the connection ended inside the answer")

    def on_message_begin(self) -> None:
        if self.done:
            self.trailing = True  # and the answer we have stays as it is
            self._keep = False  # and no header of what follows it is looked at
            return
        self.began = True
        self.headers.clear()  # an interim 1xx answer's headers are not the final answer's
        self._headers_complete = self._sized = self._chunked = False
        self._keep = None

    def on_header(self, name: bytes, value: bytes) -> None:
        if len(name) == 14 or len(name) == 17:  # the two names that say how the body is delimited
            lowered = name.lower()
            if lowered == LENGTH:
                self._sized = True
            elif lowered == CODINGS:  # the last coding of the last such line counts, as llhttp has it
                self._chunked = value.rpartition(b",")[2].strip(b" \t").lower() == b"chunked"
        if self._keep is None:
            code = self.parser.get_status_code()
            self._keep = bool(self.keep_headers) and not (self.keep_headers_of_errors_only and 200 <= code < 300)
        if self._keep and not self.trailing:
            key = name.decode("latin-1").lower()
            # The first of a repeated header counts, as with Retry-After in most clients.
            if key in self.keep_headers and key not in self.headers:
                self.headers[key] = value.decode("latin-1")

    def on_headers_complete(self) -> None:
        self._headers_complete = True

    def on_body(self, data: bytes) -> None:
        if self.keep_body and not self.trailing:
            self.body += data
            if len(self.body) > self.max_body_bytes:
                raise AnswerTooLarge(self.parser.get_status_code(), self.headers, self.max_body_bytes)

    def on_message_complete(self) -> None:
        if self.done:  # an answer after the final one
            return
        code = self.parser.get_status_code()
        if code < 200:  # an interim answer: the end of the connection after it cuts the final one short
            self._headers_complete = False
        else:
            self.done = True
            self.status = code
            self.alive = self.parser.should_keep_alive()
