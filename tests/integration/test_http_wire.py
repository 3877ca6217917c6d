"""wire.http.Connections, the keep-alive HTTP/1.1 client of the hot path, against raw servers on 127.0.0.1.

Each server here is a plain socket server whose handler decides, request by request, what goes back
on the wire: well-formed answers, answers in pieces or one byte at a time, interim 1xx answers,
garbage, extra answers, silence, or a closed socket. The server also counts what a client cannot
hide: connections opened, connections open at once, requests received, and which connections the
client closed.
"""

from __future__ import annotations

import os
import socket
import statistics
import ssl
import time
from collections.abc import Callable, Iterator, Sequence
from http.client import HTTPException
from pathlib import Path
from typing import Any

import gevent
import gevent.event
import gevent.socket
import pytest
from gevent.server import StreamServer
from httptools import HttpResponseParser

from tests.support import wait_until
from tests.support.collector import left_in_cycles
from tests.support.moto import free_port
from tests.support.raw_http import read_request
from tests.support.tls import self_signed_certificate
from workerless_gevent.wire.http import Connections, tls_context
from workerless_gevent.wire.watchdog import DeadlineExceeded
from workerless_gevent.wire.parsing import Reply, ReplyParser

PACE = 0.001  # between the writes of an answer sent in pieces, so each piece likely gets a read of its own
BIG = bytes(range(256)) * 1024  # 256 KiB: several reads of wire.http's 64 KiB blocks
KEEP = ("Retry-After", "X-AMZN-RequestId")  # as callers spell them; replies name them in lower case


class Peer:
    """One accepted connection, as the server sees it."""

    def __init__(self, sock: socket.socket, index: int) -> None:
        self.sock = sock
        self.index = index  # 1 for the server's first connection
        self.requests: list[bytes] = []
        self.eof = False  # the client closed it: the server read EOF (or a reset)
        self.closed = False  # the server closed it

    def send(self, *parts: bytes, paced: bool = False) -> None:
        for number, part in enumerate(parts):
            if paced and number:
                gevent.sleep(PACE)
            self.sock.sendall(part)

    def trickle(self, data: bytes) -> None:
        """One byte per write."""
        self.send(*(data[index:index + 1] for index in range(len(data))), paced=True)

    def close(self) -> None:
        self.closed = True
        self.sock.close()

    def half_close(self) -> None:
        """No more bytes from the server, but it still reads: a request sent now would be seen."""
        self.sock.shutdown(socket.SHUT_WR)


Handler = Callable[[Peer, bytes], None]


class RawServer:
    """A TCP (or TLS) server on 127.0.0.1 that reads HTTP requests and lets `handler(peer, request)` act
    on each: send (or not), close, or wait. It goes on reading the connection unless the handler closed it."""

    def __init__(self, handler: Handler, ssl_context: ssl.SSLContext | None = None) -> None:
        self.handler = handler
        self.peers: list[Peer] = []
        self.requests: list[bytes] = []
        self.open = 0
        self.max_open = 0
        tls: dict[str, Any] = {} if ssl_context is None else {"ssl_context": ssl_context}
        self.server = StreamServer(("127.0.0.1", 0), self.handle, **tls)
        self.server.start()
        self.port: int = self.server.server_port

    def handle(self, sock: socket.socket, address: Any) -> None:
        peer = Peer(sock, len(self.peers) + 1)
        self.peers.append(peer)
        self.open += 1
        self.max_open = max(self.max_open, self.open)
        try:
            self.serve(peer)
        except OSError:  # reset by the client
            peer.eof = True
        finally:
            self.open -= 1
            if not peer.closed:
                sock.close()

    def serve(self, peer: Peer) -> None:
        buffer = b""
        while True:
            read = read_request(peer.sock, buffer)
            if read is None:
                peer.eof = True
                return
            request, buffer = read
            peer.requests.append(request)
            self.requests.append(request)
            self.handler(peer, request)
            if peer.closed:
                return

    def stop(self) -> None:
        self.server.stop(timeout=1)


def request(tag: str = "x", body: bytes = b"{}") -> bytes:
    return (f"POST /{tag} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
            f"Content-Length: {len(body)}\r\n\r\n").encode() + body


def tag_of(request: bytes) -> str:
    return request.split(b" ", 2)[1].decode()[1:]


def reply(status: int = 200, body: bytes = b"ok", headers: Sequence[tuple[str, str]] = (),
          version: str = "1.1") -> bytes:
    lines = [f"HTTP/{version} {status} Whatever", *(f"{name}: {value}" for name, value in headers),
             f"Content-Length: {len(body)}"]
    return ("\r\n".join(lines) + "\r\n\r\n").encode() + body


def chunked(head: bytes, *chunks: bytes) -> list[bytes]:
    """A chunked answer's writes: the head, one write per chunk (the first with an extension), the end."""
    parts = [head + b"Transfer-Encoding: chunked\r\n\r\n"]
    for number, chunk in enumerate(chunks):
        extension = b";name=value" if number == 0 else b""
        parts.append(b"%x%s\r\n%s\r\n" % (len(chunk), extension, chunk))
    return parts + [b"0\r\n\r\n"]


def within(seconds: float) -> gevent.Timeout:
    """A guard: a call that should return at once fails the test instead of hanging it."""
    return gevent.Timeout(seconds, AssertionError(f"still blocked after {seconds:g}s"))


@pytest.fixture
def serve() -> Iterator[Callable[..., RawServer]]:
    """`serve(handler, ssl_context=None) -> RawServer`, stopped at teardown."""
    made: list[RawServer] = []

    def make(handler: Handler, ssl_context: ssl.SSLContext | None = None) -> RawServer:
        made.append(RawServer(handler, ssl_context))
        return made[-1]

    yield make
    for server in made:
        server.stop()


@pytest.fixture
def pool() -> Iterator[Callable[..., Connections]]:
    """`pool(port, **settings) -> Connections` to 127.0.0.1, closed at teardown."""
    made: list[Connections] = []

    def make(port: int, **settings: Any) -> Connections:
        settings.setdefault("limit", 1)
        settings.setdefault("connect_timeout", 2)
        settings.setdefault("read_timeout", 5)
        made.append(Connections("127.0.0.1", port, **settings))
        return made[-1]

    yield make
    for connections in made:
        connections.close()


def answer_with(*parts: bytes, paced: bool = False) -> Handler:
    return lambda peer, request: peer.send(*parts, paced=paced)


# ------------------------------------------------------------------ bodies and headers


@pytest.mark.parametrize("keep_body", [True, False])
def test_a_content_length_body_is_kept_or_dropped_and_only_named_headers_come_back(
    serve: Callable[..., RawServer], pool: Callable[..., Connections], keep_body: bool
) -> None:
    answer = reply(200, BIG, [("x-amzn-requestid", "r-1"), ("retry-after", "7"), ("Retry-After", "99"),
                              ("X-Other", "not asked for"), ("Content-Type", "application/octet-stream")])
    server = serve(answer_with(answer))
    connections = pool(server.port, keep_headers=KEEP, keep_body=keep_body)
    expected = Reply(200, {"x-amzn-requestid": "r-1", "retry-after": "7"}, BIG if keep_body else b"")
    assert connections.exchange(request("first")) == expected
    # a dropped body is still read to its end: the connection serves the next exchange
    assert connections.exchange(request("second")) == expected
    assert len(server.peers) == 1 and [tag_of(r) for r in server.requests] == ["first", "second"]
    assert pool(server.port).exchange(request("third")).headers == {}  # no names asked for, none kept


def test_a_request_larger_than_the_socket_buffer_goes_out_whole(
    serve: Callable[..., RawServer], pool: Callable[..., Connections]
) -> None:
    server = serve(lambda peer, request: peer.send(reply(200, str(len(request)).encode())))
    connections = pool(server.port)
    big = request("big", BIG * 16)  # 4 MiB: one send() cannot take it all
    assert connections.exchange(big).body == str(len(big)).encode()
    assert server.requests == [big]


def test_a_chunked_body_in_several_writes_is_joined_and_the_connection_kept(
    serve: Callable[..., RawServer], pool: Callable[..., Connections]
) -> None:
    parts = chunked(b"HTTP/1.1 200 OK\r\nRetry-After: 3\r\n", b"hello", b" ", BIG, b"world")
    server = serve(answer_with(*parts, paced=True))
    connections = pool(server.port, keep_headers=KEEP)
    for tag in ("first", "second"):
        assert connections.exchange(request(tag)) == Reply(200, {"retry-after": "3"}, b"hello " + BIG + b"world")
    assert len(server.peers) == 1 and len(server.requests) == 2


@pytest.mark.parametrize("quick_ack", [False, True])
def test_an_answer_written_one_byte_at_a_time_is_parsed_whole(
    serve: Callable[..., RawServer], pool: Callable[..., Connections], quick_ack: bool
) -> None:
    answer = b"".join(chunked(b"HTTP/1.1 202 Accepted\r\nX-Amzn-RequestId: r-\xc3\xa9-9\r\nRetry-After: 120\r\n",
                              b"abc", b"defgh"))
    server = serve(lambda peer, request: peer.trickle(answer))
    connections = pool(server.port, keep_headers=KEEP, quick_ack=quick_ack)
    expected = Reply(202, {"x-amzn-requestid": "r-\xc3\xa9-9", "retry-after": "120"}, b"abcdefgh")
    assert connections.exchange(request("first")) == expected
    assert connections.exchange(request("second")) == expected
    assert len(server.peers) == 1


def test_headers_split_across_reads_inside_names_and_values(
    serve: Callable[..., RawServer], pool: Callable[..., Connections]
) -> None:
    parts = [b"HTTP/1.1 429 Too Many\r\nRetry-Af", b"ter: 1", b"20\r\nX-Amzn-Req", b"uestId", b":", b" r-", b"42",
             b"\r", b"\nX-Amzn-RequestId: second\r\nX-Other: x\r\nContent-Length: 2\r\n", b"\r\n", b"n", b"o"]
    server = serve(answer_with(*parts, paced=True))
    connections = pool(server.port, keep_headers=KEEP)
    assert connections.exchange(request()) == Reply(429, {"retry-after": "120", "x-amzn-requestid": "r-42"}, b"no")
    assert connections.exchange(request()).status == 429 and len(server.peers) == 1


@pytest.mark.parametrize(("answer", "expected"), [
    (reply(200, b"plain", [("Retry-After", "5"), ("X-Empty", ""), ("retry-after", "6"), ("X-Amzn-RequestId", "r")]),
     (200, {"retry-after": "5", "x-amzn-requestid": "r"}, b"plain")),
    (b"".join(chunked(b"HTTP/1.1 503 Busy\r\nRetry-After: 9\r\n", b"a", b"bc")), (503, {"retry-after": "9"}, b"abc")),
    (b"HTTP/1.1 100 Continue\r\nRetry-After: 1\r\n\r\n" + reply(204, b"", [("X-Amzn-RequestId", "final")]),
     (204, {"x-amzn-requestid": "final"}, b"")),
    (b"HTTP/1.0 200 OK\r\nRetry-After: 2\r\n\r\nuntil the end", (200, {"retry-after": "2"}, b"until the end")),
], ids=["content-length", "chunked", "interim", "until-eof"])
def test_the_parser_fed_one_byte_at_a_time_gives_the_same_answer(
    answer: bytes, expected: tuple[int, dict[str, str], bytes]
) -> None:
    # the socket tests cannot force every read to hold one byte; this does, at every split point
    def parse(pieces: list[bytes]) -> tuple[int, dict[str, str], bytes]:
        parser = ReplyParser(frozenset(name.lower() for name in KEEP), True)
        for piece in [*pieces, b""]:  # b"" is EOF
            if not parser.done:
                parser.feed(piece)
        assert parser.done and not parser.trailing
        return parser.status, parser.headers, bytes(parser.body)

    assert parse([answer]) == expected
    assert parse([answer[index:index + 1] for index in range(len(answer))]) == expected


# ------------------------------------------------------------------ interim answers, EOF, Connection: close


@pytest.mark.parametrize("paced", [True, False], ids=["separate-writes", "one-write"])
def test_interim_answers_are_skipped_for_the_final_one(
    serve: Callable[..., RawServer], pool: Callable[..., Connections], paced: bool
) -> None:
    parts = [b"HTTP/1.1 100 Continue\r\nRetry-After: 1\r\n\r\n",
             b"HTTP/1.1 102 Processing\r\nX-Amzn-RequestId: interim\r\n\r\n",
             b"HTTP/1.1 201 Created\r\nX-Amzn-RequestId: final\r\nContent-Length: 4\r\n\r\ndone"]
    server = serve(answer_with(*parts, paced=paced) if paced else answer_with(b"".join(parts)))
    connections = pool(server.port, keep_headers=KEEP)
    # neither the interim status nor the interim Retry-After (absent from the final answer) leaks
    assert connections.exchange(request()) == Reply(201, {"x-amzn-requestid": "final"}, b"done")
    assert connections.exchange(request()) == Reply(201, {"x-amzn-requestid": "final"}, b"done")
    assert len(server.peers) == 1


@pytest.mark.parametrize("head", [b"HTTP/1.0 200 OK\r\nRetry-After: 4\r\n\r\n",
                                  b"HTTP/1.1 200 OK\r\nRetry-After: 4\r\nConnection: close\r\n\r\n"],
                         ids=["http-1.0", "http-1.1-close"])
def test_a_body_without_length_ends_at_eof_and_the_connection_is_not_reused(
    serve: Callable[..., RawServer], pool: Callable[..., Connections], head: bytes
) -> None:
    def answer(peer: Peer, request: bytes) -> None:
        peer.send(head, BIG, b"tail", paced=True)
        peer.close()

    server = serve(answer)
    connections = pool(server.port, keep_headers=KEEP)
    for count in (1, 2):
        assert connections.exchange(request()) == Reply(200, {"retry-after": "4"}, BIG + b"tail")
        assert len(server.peers) == count


@pytest.mark.parametrize("answer", [b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nhalf",
                                    b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhel",
                                    b"HTTP/1.1 200 OK\r\nContent-Le", b"HTTP/1.1 100 Continue\r\n\r\n",
                                    b"HTTP/1.1 103 Early Hints\r\nLink: </style.css>\r\n\r\n"],
                         ids=["short-body", "short-chunk", "short-head", "interim-only", "hints-only"])
def test_an_answer_cut_short_by_eof_is_an_error_not_a_short_body(
    serve: Callable[..., RawServer], pool: Callable[..., Connections], answer: bytes
) -> None:
    def cut(peer: Peer, request: bytes) -> None:
        if tag_of(request) == "cut":
            peer.send(answer)
            peer.close()
        else:
            peer.send(reply())

    server = serve(cut)
    connections = pool(server.port)
    with within(5), pytest.raises(HTTPException):
        connections.exchange(request("cut"), resend_if_stale=True)
    assert len(server.requests) == 1  # an answer had begun: not resent
    assert connections.exchange(request("after")) == Reply(200, {}, b"ok")


def test_a_connection_close_answer_is_not_reused(
    serve: Callable[..., RawServer], pool: Callable[..., Connections]
) -> None:
    # the server keeps its end open: only the client can close the connection
    server = serve(answer_with(reply(200, b"bye", [("Connection", "close")])))
    connections = pool(server.port)
    assert connections.exchange(request()) == Reply(200, {}, b"bye")
    wait_until(lambda: server.peers[0].eof, 5, message="the client did not close a Connection: close connection")
    assert connections.exchange(request()) == Reply(200, {}, b"bye")
    assert len(server.peers) == 2 and len(server.peers[0].requests) == 1


# ------------------------------------------------------------------ keep-alive and the limit


@pytest.mark.parametrize("quick_ack", [False, True])
def test_sequential_exchanges_share_one_connection(
    serve: Callable[..., RawServer], pool: Callable[..., Connections], quick_ack: bool
) -> None:
    server = serve(lambda peer, request: peer.send(reply(200, tag_of(request).encode())))
    connections = pool(server.port, limit=4, quick_ack=quick_ack)
    for number in range(20):
        assert connections.exchange(request(f"r{number}", body=b"x" * number)).body == f"r{number}".encode()
    assert len(server.peers) == 1 and len(server.requests) == 20


def test_concurrent_exchanges_never_open_more_connections_than_the_limit(
    serve: Callable[..., RawServer], pool: Callable[..., Connections]
) -> None:
    gate = gevent.event.Event()

    def held(peer: Peer, request: bytes) -> None:
        gate.wait()
        peer.send(reply(200, tag_of(request).encode()))

    server = serve(held)
    connections = pool(server.port, limit=3)
    calls = [gevent.spawn(connections.exchange, request(f"c{number}")) for number in range(10)]
    wait_until(lambda: len(server.requests) >= 3, 5, message=lambda: f"{len(server.requests)} requests in flight")
    assert (server.open, len(server.requests)) == (3, 3)
    assert not any(call.ready() for call in calls)
    gate.set()
    gevent.joinall(calls, timeout=5, raise_error=True)
    assert sorted(call.get().body for call in calls) == sorted(f"c{number}".encode() for number in range(10))
    assert server.max_open == 3 and len(server.peers) == 3 and len(server.requests) == 10


# ------------------------------------------------------------------ stale connections


@pytest.mark.parametrize("resend_if_stale", [False, True])
@pytest.mark.parametrize("closing", ["close", "half-close"])
def test_an_idle_connection_the_server_closed_is_noticed_before_sending(
    serve: Callable[..., RawServer], pool: Callable[..., Connections], resend_if_stale: bool, closing: str
) -> None:
    def answer_then_close(peer: Peer, request: bytes) -> None:
        peer.send(reply(200, tag_of(request).encode()))
        if closing == "close":
            peer.close()
        else:
            peer.half_close()  # it still reads: a request sent on the stale connection would be counted

    server = serve(answer_then_close)
    connections = pool(server.port)
    assert connections.exchange(request("first"), resend_if_stale=resend_if_stale).body == b"first"
    assert connections.exchange(request("second"), resend_if_stale=resend_if_stale).body == b"second"
    # each request went out once, each on a connection of its own: none was sent on the closed one
    assert [len(peer.requests) for peer in server.peers] == [1, 1]
    assert len(server.requests) == 2


def closes_the_first_connection_on_its_second_request(peer: Peer, request: bytes) -> None:
    if peer.index == 1 and len(peer.requests) == 2:
        peer.close()  # read the request, then close without a byte of answer
    else:
        peer.send(reply(200, f"{tag_of(request)}@{peer.index}".encode()))


def test_a_reused_connection_closed_without_an_answer_gets_the_request_again_when_asked(
    serve: Callable[..., RawServer], pool: Callable[..., Connections]
) -> None:
    server = serve(closes_the_first_connection_on_its_second_request)
    connections = pool(server.port)
    assert connections.exchange(request("first"), resend_if_stale=True).body == b"first@1"
    assert connections.exchange(request("second"), resend_if_stale=True).body == b"second@2"
    assert server.requests[1:] == [request("second"), request("second")]
    assert [len(peer.requests) for peer in server.peers] == [2, 1]


def test_without_resend_a_reused_connection_closed_without_an_answer_is_a_connection_error(
    serve: Callable[..., RawServer], pool: Callable[..., Connections]
) -> None:
    server = serve(closes_the_first_connection_on_its_second_request)
    connections = pool(server.port)
    assert connections.exchange(request("first")).body == b"first@1"
    with pytest.raises(ConnectionError):
        connections.exchange(request("second"))
    assert len(server.requests) == 2 and len(server.peers) == 1
    assert connections.exchange(request("third")).body == b"third@2"


def test_a_new_connection_closed_without_an_answer_is_never_resent(
    serve: Callable[..., RawServer], pool: Callable[..., Connections]
) -> None:
    server = serve(lambda peer, request: peer.close())
    connections = pool(server.port)
    for count in (1, 2):
        with within(5), pytest.raises(ConnectionError):
            connections.exchange(request(), resend_if_stale=True)
        assert len(server.requests) == count and len(server.peers) == count


# ------------------------------------------------------------------ timeouts and deadlines


def silent_on_hang(peer: Peer, request: bytes) -> None:
    if tag_of(request) != "hang":  # for "hang", no answer: the server goes on reading
        peer.send(reply(200, tag_of(request).encode()))


def test_a_silent_server_is_a_timeout_after_read_timeout_and_is_not_resent(
    serve: Callable[..., RawServer], pool: Callable[..., Connections]
) -> None:
    server = serve(silent_on_hang)
    connections = pool(server.port, read_timeout=0.3)
    assert connections.exchange(request("warm")).body == b"warm"  # so the next one is on a reused connection
    started = time.monotonic()
    with within(5), pytest.raises(TimeoutError):
        connections.exchange(request("hang"), resend_if_stale=True)
    assert 0.25 <= time.monotonic() - started < 2
    assert len(server.requests) == 2
    wait_until(lambda: server.peers[0].eof, 5, message="the timed-out connection was left open")
    assert connections.exchange(request("after")).body == b"after"
    assert len(server.peers) == 2


def test_a_caller_deadline_during_an_exchange_releases_the_slot_and_the_connection(
    serve: Callable[..., RawServer], pool: Callable[..., Connections]
) -> None:
    server = serve(silent_on_hang)
    connections = pool(server.port, limit=1, read_timeout=5)
    with pytest.raises(gevent.Timeout) as raised, gevent.Timeout(0.2) as deadline:
        connections.exchange(request("hang"))
    assert raised.value is deadline
    wait_until(lambda: server.peers[0].eof, 5, message="the connection cut by the deadline was left open")
    with within(5):
        assert connections.exchange(request("next")).body == b"next"
    assert len(server.peers) == 2


def test_a_trickling_answer_is_cut_at_the_deadline_though_no_read_times_out(
    serve: Callable[..., RawServer], pool: Callable[..., Connections]
) -> None:
    def trickle_slowly(peer: Peer, request: bytes) -> None:
        if tag_of(request) == "fast":
            peer.send(reply(200, b"fast"))
            return
        if tag_of(request) == "hang":
            return
        peer.send(b"HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\n")
        for _ in range(100):  # a byte every 0.1 s: 10 s in all, never 0.5 s of silence
            gevent.sleep(0.1)
            peer.send(b"x")

    server = serve(trickle_slowly)
    connections = pool(server.port, limit=1, read_timeout=0.5)
    started = time.monotonic()
    with within(5), pytest.raises(DeadlineExceeded):
        connections.exchange(request("slow"), deadline=started + 1.0)
    assert 0.95 <= time.monotonic() - started < 2
    wait_until(lambda: server.peers[0].eof, 5, message="the connection cut at the deadline was left open")
    # the slot came back, and a connection that met its deadline is pooled with its read timeout intact
    assert connections.exchange(request("fast"), deadline=time.monotonic() + 0.3).body == b"fast"
    assert len(connections.idle) == 1 and len(server.peers) == 2
    started = time.monotonic()
    with within(5), pytest.raises(TimeoutError) as raised:
        connections.exchange(request("hang"), deadline=started + 60)
    assert not isinstance(raised.value, DeadlineExceeded) and 0.45 <= time.monotonic() - started < 1.5
    assert len(server.peers) == 2  # on the pooled connection


def test_a_deadline_already_past_sends_nothing(serve: Callable[..., RawServer],
                                               pool: Callable[..., Connections]) -> None:
    server = serve(answer_with(reply(200, b"ok")))
    connections = pool(server.port)
    with pytest.raises(DeadlineExceeded):
        connections.exchange(request("late"), deadline=time.monotonic() - 1)
    assert connections.exchange(request("ontime"), deadline=time.monotonic() + 5).body == b"ok"
    assert [tag_of(r) for r in server.requests] == ["ontime"]


def test_a_caller_deadline_while_waiting_for_a_slot_takes_nothing(
    serve: Callable[..., RawServer], pool: Callable[..., Connections]
) -> None:
    gate = gevent.event.Event()

    def held(peer: Peer, request: bytes) -> None:
        if tag_of(request) == "held":
            gate.wait()
        peer.send(reply(200, tag_of(request).encode()))

    server = serve(held)
    connections = pool(server.port, limit=1)
    first = gevent.spawn(connections.exchange, request("held"))
    wait_until(lambda: len(server.requests) == 1, 5)
    with pytest.raises(gevent.Timeout), gevent.Timeout(0.1):
        connections.exchange(request("queued"))
    gate.set()
    assert first.get(timeout=5).body == b"held"
    with within(5):
        assert connections.exchange(request("after")).body == b"after"
    assert [tag_of(r) for r in server.requests] == ["held", "after"] and len(server.peers) == 1


# ------------------------------------------------------------------ misbehaving servers


@pytest.mark.parametrize("garbage", [
    b"SSH-2.0-OpenSSH_9.6\r\n\r\n",
    b"HTTP/1.1 abc Nope\r\nContent-Length: 0\r\n\r\n",
    b"HTTP/1.1 200 OK\r\nBad Header Line\r\nContent-Length: 0\r\n\r\n",
    b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n",
    b"\x16\x03\x01\x00\xa5\x01\x00\x00\xa1\x03\x03",
], ids=["not-http", "bad-status", "bad-header", "bad-chunk", "binary"])
def test_a_garbage_answer_is_an_http_error_and_the_pool_goes_on(
    serve: Callable[..., RawServer], pool: Callable[..., Connections], garbage: bytes
) -> None:
    server = serve(lambda peer, request: peer.send(garbage if peer.index == 1 else reply()))
    connections = pool(server.port, limit=1)
    with within(5), pytest.raises(HTTPException):  # what callers catch, with OSError
        connections.exchange(request(), resend_if_stale=True)
    assert len(server.requests) == 1
    wait_until(lambda: server.peers[0].eof, 5, message="the connection that sent garbage was left open")
    with within(5):
        assert connections.exchange(request()) == Reply(200, {}, b"ok")
        assert connections.exchange(request()) == Reply(200, {}, b"ok")
    assert len(server.peers) == 2


@pytest.mark.parametrize("extra", [
    reply(503, b"second", [("Retry-After", "2"), ("X-Amzn-RequestId", "r-2")]),
    b"HTTP/1.1 500 Partial\r\nRetry-After: 2\r\n",
    b"\x00 not an answer",
], ids=["second-answer", "partial-answer", "garbage"])
@pytest.mark.parametrize("close", [False, True], ids=["keep-alive", "connection-close"])
def test_extra_bytes_after_a_complete_answer_leave_it_as_it_is_and_the_connection_unused(
    serve: Callable[..., RawServer], pool: Callable[..., Connections], extra: bytes, close: bool
) -> None:
    headers = [("Retry-After", "1"), ("Connection", "close")] if close else [("Retry-After", "1")]
    server = serve(answer_with(reply(200, b"first", headers) + extra))  # one write; the server keeps its end open
    connections = pool(server.port, keep_headers=KEEP)
    assert connections.exchange(request()) == Reply(200, {"retry-after": "1"}, b"first")
    wait_until(lambda: server.peers[0].eof, 5, message="the connection with extra bytes was left open")
    assert connections.exchange(request()) == Reply(200, {"retry-after": "1"}, b"first")
    assert len(server.peers) == 2 and len(server.peers[0].requests) == 1


def test_an_answer_arriving_on_an_idle_connection_makes_it_unusable(
    serve: Callable[..., RawServer], pool: Callable[..., Connections]
) -> None:
    late = gevent.event.Event()
    sent = gevent.event.Event()

    def answer_twice(peer: Peer, request: bytes) -> None:
        peer.send(reply(200, b"first"))
        if peer.index == 1:
            gevent.spawn(stray_answer, peer)

    def stray_answer(peer: Peer) -> None:  # once the client holds the connection idle
        late.wait()
        peer.send(reply(500, b"stray"))
        sent.set()

    server = serve(answer_twice)
    connections = pool(server.port)
    assert connections.exchange(request()).body == b"first"
    late.set()
    assert sent.wait(5)
    assert connections.exchange(request()) == Reply(200, {}, b"first")  # not the stray 500
    assert len(server.peers) == 2 and len(server.peers[0].requests) == 1
    wait_until(lambda: server.peers[0].eof, 5, message="the connection with a stray answer was left open")


def test_connection_refused_is_raised_and_releases_the_slot(pool: Callable[..., Connections]) -> None:
    connections = pool(free_port(), limit=1)
    for _ in range(2):
        with within(5), pytest.raises(ConnectionRefusedError):
            connections.exchange(request())


# ------------------------------------------------------------------ close()


def test_close_closes_the_idle_connections(serve: Callable[..., RawServer], pool: Callable[..., Connections]) -> None:
    gate = gevent.event.Event()

    def held(peer: Peer, request: bytes) -> None:
        gate.wait()
        peer.send(reply())

    server = serve(held)
    connections = pool(server.port, limit=2)
    calls = [gevent.spawn(connections.exchange, request()) for _ in range(2)]
    wait_until(lambda: len(server.requests) == 2, 5)
    gate.set()
    gevent.joinall(calls, timeout=5, raise_error=True)
    assert len(server.peers) == 2 and not any(peer.eof for peer in server.peers)
    connections.close()
    wait_until(lambda: all(peer.eof for peer in server.peers), 5, message="close() left idle connections open")


def test_a_connection_in_use_at_close_is_closed_when_its_exchange_ends(
    serve: Callable[..., RawServer], pool: Callable[..., Connections]
) -> None:
    gate = gevent.event.Event()

    def held(peer: Peer, request: bytes) -> None:
        gate.wait()
        peer.send(reply())

    server = serve(held)
    connections = pool(server.port)
    call = gevent.spawn(connections.exchange, request())
    wait_until(lambda: len(server.requests) == 1, 5)
    connections.close()
    assert not server.peers[0].eof  # in use: left to its exchange
    gate.set()
    assert call.get(timeout=5) == Reply(200, {}, b"ok")  # the exchange in flight still completes
    wait_until(lambda: server.peers[0].eof, 5, message="a connection returned after close() was kept")


# ------------------------------------------------------------------ TLS


def plain_server(behaviour: str) -> StreamServer:
    """A server that does not speak TLS: it answers a ClientHello with plain HTTP, or hangs up at once."""

    def handle(sock: socket.socket, address: Any) -> None:
        if behaviour == "answers-http":
            sock.recv(65536)
            sock.sendall(b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
        sock.close()

    server = StreamServer(("127.0.0.1", 0), handle)
    server.start()
    return server


@pytest.mark.parametrize("behaviour", ["answers-http", "hangs-up"])
def test_tls_to_a_server_that_does_not_speak_it_fails_at_once(
    pool: Callable[..., Connections], behaviour: str
) -> None:
    server = plain_server(behaviour)
    try:
        connections = pool(server.server_port, limit=1, connect_timeout=5, read_timeout=5, tls=tls_context(None))
        for _ in range(2):  # the slot is released
            started = time.monotonic()
            with within(5), pytest.raises(OSError) as raised:  # ssl.SSLError is one
                connections.exchange(request())
            assert time.monotonic() - started < 2, "waited for a timeout instead of failing"
            if behaviour == "answers-http":
                assert isinstance(raised.value, ssl.SSLError)
    finally:
        server.stop(timeout=1)


def test_a_tls_round_trip_keeps_the_connection_and_notices_a_server_close(
    serve: Callable[..., RawServer], pool: Callable[..., Connections], tmp_path: Path
) -> None:
    cert, key = self_signed_certificate(tmp_path)
    server_context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    server_context.load_cert_chain(cert, key)

    def answer(peer: Peer, request: bytes) -> None:
        peer.send(reply(200, tag_of(request).encode() + BIG, [("Retry-After", "5")]))
        if tag_of(request) == "last-on-this-one":
            peer.close()

    server = serve(answer, server_context)
    connections = pool(server.port, limit=2, tls=tls_context(str(cert)), keep_headers=KEEP, quick_ack=True)
    for tag in ("one", "two", "last-on-this-one"):
        assert connections.exchange(request(tag)) == Reply(200, {"retry-after": "5"}, tag.encode() + BIG)
    assert len(server.peers) == 1
    wait_until(lambda: server.peers[0].closed, 5)
    assert connections.exchange(request("new"), resend_if_stale=False).body == b"new" + BIG
    assert len(server.peers) == 2 and len(server.requests) == 4

    untrusting = pool(server.port, tls=tls_context(None))  # the system CAs do not know this certificate
    with within(5), pytest.raises(ssl.SSLCertVerificationError):
        untrusting.exchange(request("refused"))
    assert len(server.requests) == 4


# ------------------------------------------------------------------ the watchdog


def test_a_send_the_server_never_reads_is_cut_at_the_deadline(pool: Callable[..., Connections]) -> None:
    listener = socket.socket()  # accepts connections (the kernel's backlog) and never reads them
    listener.bind(("127.0.0.1", 0))
    listener.listen(1)
    try:
        connections = pool(listener.getsockname()[1], read_timeout=30)
        started = time.monotonic()
        with within(5), pytest.raises(DeadlineExceeded):
            connections.exchange(request("huge", BIG * 64), deadline=started + 0.5)  # 16 MiB: send() blocks
        assert 0.45 <= time.monotonic() - started < 1.5
        assert not connections.watched
    finally:
        listener.close()


def test_the_watchdog_runs_only_while_exchanges_are_under_way(
    serve: Callable[..., RawServer], pool: Callable[..., Connections]
) -> None:
    server = serve(silent_on_hang)
    connections = pool(server.port, limit=2, read_timeout=5)
    assert connections.exchange(request("quick")).body == b"quick"
    wait_until(lambda: connections.watchdog is None, 5, message="the watchdog outlived the exchanges")
    hanging = gevent.spawn(connections.exchange, request("hang"))
    wait_until(lambda: connections.watched and connections.watchdog is not None, 5)
    hanging.kill(block=True, timeout=5)  # the caller's own timeout or kill: the watch goes with it
    assert not connections.watched
    wait_until(lambda: connections.watchdog is None, 5, message="the watchdog outlived the exchanges")


@pytest.mark.parametrize(("answer", "headers"), [
    (reply(200, b"ok", [("Retry-After", "5")]), {}),
    (reply(503, b"busy", [("Retry-After", "5")]), {"retry-after": "5"}),
    (b"HTTP/1.1 100 Continue\r\n\r\n" + reply(429, b"slow down", [("Retry-After", "7")]), {"retry-after": "7"}),
    (reply(204, b"", [("Retry-After", "5")]) + reply(503, b"", [("Retry-After", "9")]), {}),
], ids=["2xx", "5xx", "interim-then-429", "2xx-then-trailing-503"])
def test_headers_of_errors_only_are_kept_for_answers_other_than_2xx(
    serve: Callable[..., RawServer], pool: Callable[..., Connections], answer: bytes, headers: dict[str, str]
) -> None:
    server = serve(answer_with(answer))
    connections = pool(server.port, keep_headers=KEEP, keep_headers_of_errors_only=True)
    assert connections.exchange(request()).headers == headers
    assert pool(server.port, keep_headers=KEEP).exchange(request()).headers.get("retry-after") == \
        answer.split(b"Retry-After: ", 1)[1].split(b"\r\n", 1)[0].decode()


def test_the_idle_check_works_on_file_descriptors_past_1024(pool: Callable[..., Connections]) -> None:
    import resource

    soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < 1200:
        pytest.skip(f"RLIMIT_NOFILE is {soft}: cannot open past fd 1024")
    filler = [open(os.devnull)]  # noqa: SIM115 - closed below; every free descriptor up to 1100 taken
    try:
        while filler[-1].fileno() < 1100:
            filler.append(open(os.devnull))  # noqa: SIM115
        ours, theirs = gevent.socket.socketpair()  # no yield since the filling: nothing freed a lower one
    finally:
        for handle in filler:
            handle.close()
    try:
        assert ours.fileno() >= 1024  # where select() cannot look
        connections = pool(9)
        connections.idle.append(ours)
        assert connections._reuse() is ours  # open and quiet: reused
        connections.idle.append(ours)
        theirs.close()
        wait_until(lambda: connections._reuse() is None, 5, message="a closed connection was offered for reuse")
        assert ours.fileno() == -1 and not connections.idle
    finally:
        ours.close()
        theirs.close()


@pytest.mark.parametrize("quick_ack", [False, True])
def test_quick_ack_spares_an_app_server_with_nagle_on_the_delayed_ack(
    serve: Callable[..., RawServer], pool: Callable[..., Connections], quick_ack: bool
) -> None:
    # As gevent's pywsgi or Werkzeug do: head and body in two writes, Nagle on (no TCP_NODELAY), so
    # the body waits until the head is acknowledged
    def head_then_body(peer: Peer, request: bytes) -> None:
        answer = reply(200, b"x" * 100)
        peer.sock.sendall(answer[:-100])
        peer.sock.sendall(answer[-100:])

    server = serve(head_then_body)
    connections = pool(server.port, quick_ack=quick_ack)
    for _ in range(40):  # past the kernel's quick-ACK start of a connection
        assert connections.exchange(request("warm")).status == 200
    durations = []
    for number in range(20):
        started = time.monotonic()
        assert connections.exchange(request(f"n{number}")).body == b"x" * 100
        durations.append(time.monotonic() - started)
    # The stall is the peer's delayed ACK, 40 ms at least on Linux: the median exchange is past 30 ms with it
    # and well under without it. The median, since a loaded machine can stall any one exchange by as much.
    median = statistics.median(durations)
    if quick_ack:
        assert median < 0.030, durations
    else:
        assert median > 0.030, durations  # the stall quick_ack exists for is real here


def test_a_connection_idle_past_keepalive_idle_is_closed_not_reused(
    serve: Callable[..., RawServer], pool: Callable[..., Connections],
) -> None:
    """App servers close idle keep-alive connections after a few seconds; a request written just as they
    do is lost. So a connection idle longer than keepalive_idle is never written to again."""
    server = serve(lambda peer, request: peer.send(reply()))
    connections = pool(server.port, limit=2, keepalive_idle=1.0)  # a stall of the loaded test can't reach it
    assert connections.exchange(request("idle")).status == 200
    assert connections.exchange(request("idle")).status == 200  # at once: reused
    assert len(server.peers) == 1
    idle = connections.idle[-1]
    wait_until(lambda: time.monotonic() - connections.idle_since[idle] > 1.0, 5, message="never idle long enough")
    assert connections.exchange(request("idle")).status == 200
    assert len(server.peers) == 2 and idle.fileno() == -1  # a new connection; the idle one was closed
    wait_until(lambda: server.peers[0].eof, 2, message="the server never saw the idle connection close")


@pytest.mark.parametrize("answer", [b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nshort", b"not HTTP\r\n\r\n", b""],
                         ids=["cut-short", "garbage", "closed-before-an-answer"])
def test_a_failed_exchange_leaves_nothing_to_the_cyclic_collector(
    serve: Callable[..., RawServer], pool: Callable[..., Connections], answer: bytes
) -> None:
    # httptools' parser and wire.parsing.ReplyParser hold each other until the exchange lets the parser go,
    # which it does on every path: a cycle per failed exchange would pile up at high concurrency.
    def fail(peer: Peer, request: bytes) -> None:
        if answer:
            peer.send(answer)
        peer.close()

    server = serve(fail)
    connections = pool(server.port)
    failures: list[str] = []

    def exchange() -> None:
        try:
            connections.exchange(request())
        except (HTTPException, OSError) as error:
            failures.append(type(error).__name__)

    exchange()  # the first one's lazy set-up (the watchdog) out of the count

    def twenty() -> None:
        for _ in range(20):
            exchange()

    left = left_in_cycles(twenty, ReplyParser, HttpResponseParser)
    assert len(failures) == 21, failures
    assert not left, f"{len(left)} parsers in cycles after 20 failed exchanges ({failures[-1]})"
