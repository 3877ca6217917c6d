"""Keep-alive HTTP/1.1 exchanges for the hot path: the POST to the app, and the SQS calls.

geventhttpclient's `HTTPClient` cost about 85 µs of CPU per POST here, most of it in Python around
the wire: header objects merged per request, a `select()` per pooled socket, a response object that
collects every header through callbacks. This parses with llhttp (`parsing.ReplyParser`, through
httptools), which handles chunked bodies, interim 1xx answers and bodies that end at EOF, and does
the rest in a few lines: the caller hands over the whole request as bytes, the pool is a list, and
only the headers the caller names are kept. About 35 µs per POST, measured the same way.
"""

from __future__ import annotations

import math
import select
import socket
import ssl
import time
from collections.abc import Collection, Mapping

import gevent
import gevent.lock
import gevent.socket
from gevent.monkey import get_original

from .connecting import Addresses, set_tcp_keepalive
from .parsing import HTTPParseError, Reply, ReplyParser
from .watchdog import DeadlineExceeded, Watch, watch_exchanges

BLOCK_SIZE = 65536
QUICK_ACK = getattr(socket, "TCP_QUICKACK", None)
_poll = get_original("select", "poll")  # a real, non-yielding poll for the idle check (select fails at fd 1024)
IDLE_TROUBLE = select.POLLIN | select.POLLPRI | select.POLLERR | select.POLLHUP | select.POLLNVAL


class ConnectionClosed(ConnectionError):
    """The server closed the connection before a complete answer."""


class StaleConnection(Exception):
    """A reused connection turned out closed before any answer: the request may go again."""

STALE_ERRORS = (ConnectionClosed, ConnectionResetError, BrokenPipeError, ssl.SSLEOFError, ssl.SSLZeroReturnError)


class Connections:
    """At most `limit` connections to one server; the callers share it, one exchange per connection."""

    def __init__(self, host: str, port: int, *, limit: int, connect_timeout: float, read_timeout: float,
                 tls: ssl.SSLContext | None = None, quick_ack: bool = False, keep_headers: Collection[str] = (),
                 keep_headers_of_errors_only: bool = False, keep_body: bool = True,
                 keepalive_idle: float = math.inf, tcp_keepalive: bool = False,
                 max_body_bytes: int | None = None) -> None:
        self.address = (host, port)
        self.addresses = Addresses(host, port)
        # A connection idle this long is closed, not reused: servers close idle keep-alive connections
        # after a few seconds (gunicorn 2, Node and uvicorn 5), and a request written as they do is lost.
        self.keepalive_idle = keepalive_idle
        self.tcp_keepalive = tcp_keepalive
        self.tls = tls
        self.connect_timeout = connect_timeout
        self.read_timeout = read_timeout
        # TCP_QUICKACK once part of an answer is in: an app server that writes headers and body in two
        # sends with Nagle on (gevent's pywsgi, Werkzeug) otherwise waits for our delayed ACK, 40 ms.
        self.quick_ack = quick_ack and QUICK_ACK is not None
        self.keep_headers = frozenset(name.lower() for name in keep_headers)
        self.keep_headers_of_errors_only = keep_headers_of_errors_only  # of answers other than 2xx
        self.keep_body = keep_body
        # a longer body kept ends the exchange (parsing.AnswerTooLarge), and the connection
        self.parser_type = ReplyParser if max_body_bytes is None else ReplyParser.limited(max_body_bytes)
        self.slots = gevent.lock.BoundedSemaphore(limit)
        self.idle: list[gevent.socket.socket] = []  # most recently used last
        self.idle_since: dict[gevent.socket.socket, float] = {}
        self.closed = False
        # Sockets block without a timeout of their own: one watchdog enforces them all (`wire.watchdog` says why).
        self.watched: dict[gevent.socket.socket, Watch] = {}
        self.watchdog: gevent.Greenlet | None = None

    def exchange(self, request: bytes, *, deadline: float | None = None, resend_if_stale: bool = False) -> Reply:
        """Send one request and read its answer. Each read may take `read_timeout`, and the whole
        exchange must end by `deadline` (time.monotonic()), else DeadlineExceeded: a server that
        trickles bytes never trips a read timeout. With `resend_if_stale`, a reused connection
        that the server closed before answering anything gets the request once more on a new one."""
        if not self.slots.acquire(timeout=None if deadline is None else max(0.0, deadline - time.monotonic())):
            raise DeadlineExceeded("no connection free before the deadline")
        try:
            sock = self._reuse()
            if sock is not None:
                try:
                    return self._exchange_on(sock, request, deadline, may_be_stale=resend_if_stale)
                except StaleConnection:
                    pass
            return self._exchange_on(self._connect(deadline), request, deadline)
        finally:
            self.slots.release()

    def close(self) -> None:
        self.closed = True
        idle, self.idle = self.idle, []
        self.idle_since.clear()
        for sock in idle:
            sock.close()

    def _exchange_on(self, sock: gevent.socket.socket, request: bytes, deadline: float | None,
                     may_be_stale: bool = False) -> Reply:
        parser = self.parser_type(self.keep_headers, self.keep_body, self.keep_headers_of_errors_only)
        now = time.monotonic()
        watch = self.watched[sock] = Watch(math.inf if deadline is None else deadline, now + self.read_timeout)
        if self.watchdog is None:
            self.watchdog = gevent.spawn(self._watch)
        try:
            if watch.deadline <= now:
                raise DeadlineExceeded("no complete answer before the deadline")
            sent = sock.send(request)  # nearly always all of it: sendall's bookkeeping costs more than this
            if sent < len(request):
                sock.sendall(memoryview(request)[sent:])
            wait_readable(sock)
            while not parser.done:
                if self.quick_ack and parser.began:
                    # Part of the answer is in and more is to come: acknowledge it now. A server that writes
                    # head and body in two sends with Nagle on waits for this ACK; Linux re-arms delayed
                    # ACKs by itself, so it is asked for each time, and only then (a syscall).
                    sock.setsockopt(socket.IPPROTO_TCP, QUICK_ACK, 1)
                data = sock.recv(BLOCK_SIZE)
                if watch.expired is not None:
                    raise watch.timeout_error(self.read_timeout)
                watch.quiet_until = time.monotonic() + self.read_timeout
                try:
                    parser.feed(data)  # an empty feed is EOF, which ends a body sent without a length
                except HTTPParseError:
                    if not parser.done:
                        raise
                    # Not an answer after the complete one (or any bytes after `Connection: close`): the
                    # answer stands, as it does when those bytes come in a later read; not reusable.
                    parser.trailing = True
                if not data and not parser.done:
                    raise ConnectionClosed("connection closed before a complete answer")
        except BaseException as error:  # a timeout too: the connection is in an unknown state
            sock.close()
            if watch.expired is not None and isinstance(error, Exception) and not isinstance(error, TimeoutError):
                raise watch.timeout_error(self.read_timeout) from error
            if may_be_stale and not parser.began and isinstance(error, STALE_ERRORS):
                raise StaleConnection() from error
            raise
        finally:
            del self.watched[sock]
            parser.release()  # on every path: a parser kept would be a cycle for the collector
        if parser.trailing or not parser.should_keep_alive() or self.closed:
            sock.close()
        else:
            self.idle.append(sock)
            self.idle_since[sock] = time.monotonic()
        return Reply(parser.status, parser.headers, bytes(parser.body))

    def _reuse(self) -> gevent.socket.socket | None:
        """The most recently used idle connection that is still open (the server may have closed it)
        and has not been idle past keepalive_idle (the server may be closing it right now)."""
        now = time.monotonic()
        while self.idle:
            sock = self.idle.pop()
            if now - self.idle_since.pop(sock, now) > self.keepalive_idle:
                stale, self.idle = [sock, *self.idle], []  # the rest were idle even longer
                for old in stale:
                    self.idle_since.pop(old, None)
                    old.close()
                return None
            try:
                poller = _poll()
                poller.register(sock.fileno(), IDLE_TROUBLE)
                troubled = poller.poll(0)
            except (OSError, ValueError):
                troubled = True
            if not troubled:
                return sock
            sock.close()  # EOF, or bytes nobody asked for: either way not reusable
        return None

    def _watch(self) -> None:
        """The pool's watchdog, while any exchange is under way (`watchdog.watch_exchanges`)."""
        try:
            watch_exchanges(self.watched)
        finally:
            self.watchdog = None

    def _connect(self, deadline: float | None = None) -> gevent.socket.socket:
        timeout = self.connect_timeout
        if deadline is not None:
            timeout = min(timeout, deadline - time.monotonic())
            if timeout <= 0:
                raise DeadlineExceeded("no connection before the deadline")
        sock = self.addresses.connect(timeout)
        try:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            if self.tcp_keepalive:
                set_tcp_keepalive(sock)
            if self.tls is not None:
                sock = self.tls.wrap_socket(sock, server_hostname=self.address[0])
            sock.settimeout(None)  # blocking reads: the watchdog enforces read_timeout and deadlines
        except BaseException:
            sock.close()
            raise
        return sock


def wait_readable(sock: gevent.socket.socket) -> None:
    """Wait, in the hub, for the first bytes of an answer just asked for. They are not there yet on a real
    network, nor nine times in ten from an app on loopback, so reading at once would fail (EWOULDBLOCK: a
    system call, an exception raised and caught) before gevent waits; gevent's own recv waits this way
    after such a read. A watchdog's shutdown makes the socket readable, and a close ends the wait as it
    ends a read's."""
    sock._wait(sock._read_event)  # gevent's SocketMixin (gevent bounded in pyproject)


def post_request(path: str, fixed_headers: str, headers: Mapping[str, str], body: bytes) -> bytes:
    """One POST as bytes: the request line, header lines written once per pool (`fixed_headers`),
    Content-Length, `headers`, and the body."""
    head = f"POST {path} HTTP/1.1\r\n{fixed_headers}Content-Length: {len(body)}\r\n"
    if headers:  # joined in C: a comprehension of f-strings ran a hundred bytecodes per request, %-formatting more C
        head += "\r\n".join(map(": ".join, headers.items())) + "\r\n"
    return (head + "\r\n").encode("latin-1") + body


def host_header(host: str, port: int | None, scheme: str) -> str:
    """The Host header (and what SigV4 signs): the host as urlsplit gives it (lower case), IPv6 in
    brackets, the port unless it is the scheme's default."""
    if ":" in host:
        host = f"[{host}]"
    if port is not None and port != {"http": 80, "https": 443}.get(scheme):
        host = f"{host}:{port}"
    return host


def tls_context(ca_bundle: str | None) -> ssl.SSLContext:
    return ssl.create_default_context(cafile=ca_bundle)

