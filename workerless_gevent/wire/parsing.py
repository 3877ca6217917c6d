"""Reading one HTTP answer with geventhttpclient's C (llhttp) parser: the status, only the headers the
caller names, and the body when wanted; interim 1xx answers skipped, bytes after the answer noticed."""

from __future__ import annotations

from dataclasses import dataclass

from geventhttpclient._parser import HTTPResponseParser

_ignore = set[str]().discard  # a C callable that takes one argument and returns None


@dataclass(slots=True)  # not frozen: a frozen dataclass sets each field through object.__setattr__, per answer
class Reply:
    status: int
    headers: dict[str, str]  # only the names asked for, lower-case
    body: bytes


class ReplyParser(HTTPResponseParser):
    """llhttp's callbacks, keeping the status, the named headers and (optionally) the body.

    One is made per answer, so what does not change is kept on the class."""

    began = False
    done = False  # the final (non-1xx) answer is complete
    status = 0  # its status: get_code() moves on to any answer that comes after it
    trailing = False  # bytes came after it
    _field = ""
    _in_value = True
    _kept: str | None = None
    _skipping = False

    def __init__(self, keep_headers: frozenset[str], keep_body: bool, keep_headers_of_errors_only: bool = False) -> None:
        super().__init__()
        self.keep_headers = keep_headers
        self.keep_body = keep_body
        self.keep_headers_of_errors_only = keep_headers_of_errors_only
        self.headers: dict[str, str] = {}
        self.body = bytearray()

    def _on_message_begin(self) -> None:
        if self.done:
            self.trailing = True  # and the answer we have stays as it is
            return
        self.began = True
        self.headers.clear()  # an interim 1xx answer's headers are not the final answer's
        if self._skipping:
            del self._on_header_field, self._on_header_value
            self._skipping = False

    def _on_status(self, text: str) -> None:
        # llhttp calls back twice per header: when none is wanted, a C no-op takes those calls.
        if not self.keep_headers or (self.keep_headers_of_errors_only and 200 <= self.get_code() < 300):
            self.__dict__.update(_on_header_field=_ignore, _on_header_value=_ignore)
            self._skipping = True

    def _on_header_field(self, text: str) -> None:
        # llhttp may hand over a name or a value in pieces when it spans two reads.
        self._field = text if self._in_value else self._field + text
        self._in_value = False

    def _on_header_value(self, text: str) -> None:
        if not self._in_value:
            self._in_value = True
            name = self._field.lower()
            # The first of a repeated header counts, as with Retry-After in most clients.
            wanted = name in self.keep_headers and name not in self.headers and not self.trailing
            self._kept = name if wanted else None
            if self._kept is not None:
                self.headers[self._kept] = text
        elif self._kept is not None:
            self.headers[self._kept] += text

    def _on_headers_complete(self) -> bool:
        self._in_value = True
        return False  # a body follows when the headers say so

    def _on_body(self, data: bytes) -> None:
        if self.keep_body and not self.trailing:
            self.body += data

    def _on_message_complete(self) -> None:
        if self.get_code() >= 200 and not self.done:
            self.done = True
            self.status = self.get_code()
