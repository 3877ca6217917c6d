"""Opening the connections to one host and port. An IP address as written is connected to at once; a
name's addresses are looked up and kept for a few seconds. gevent makes every lookup in its thread
pool: about 240 µs of the daemon's CPU a connection here, which an app that closes each connection
paid on every message, and a daemon at c=1,000 on each of the thousand it opens at start."""

from __future__ import annotations

import ipaddress
import math
import socket
import time
from typing import Any

import gevent.lock
import gevent.socket

NAME_SECONDS = 5.0  # how long a name's addresses are kept: a change in DNS reaches new connections within this

Address = tuple[int, Any]  # (family, sockaddr)


class Addresses:
    """The addresses of (host, port). A name is looked up again after `keep_seconds`, and at once after a
    connection to none of its addresses opened."""

    def __init__(self, host: str, port: int, keep_seconds: float | None = None) -> None:
        self.host = host
        self.port = port
        self.keep_seconds = NAME_SECONDS if keep_seconds is None else keep_seconds
        family = literal_family(host)
        self.is_literal = family is not None
        self.known: list[Address] = [] if family is None else [(family, (host, port))]
        self.looked_up_at = -math.inf
        self.lookup = gevent.lock.Semaphore()  # one lookup at a time: connections waiting for it take its answer
        self.failure: OSError | None = None  # of the latest lookup, if it failed, and when it ended
        self.failed_at = -math.inf
        self.turns = 0  # connections opened: each starts at the next of the preferred addresses

    def current(self) -> list[Address]:
        if self.is_literal or time.monotonic() < self.looked_up_at + self.keep_seconds:
            return self.known
        asked_at = time.monotonic()
        with self.lookup:
            if time.monotonic() < self.looked_up_at + self.keep_seconds:
                return self.known  # looked up while this one waited
            if self.failure is not None and self.failed_at >= asked_at:
                raise self.failure.with_traceback(None)  # the lookup this one waited for failed: one answer for all
            try:
                found = gevent.socket.getaddrinfo(self.host, self.port, 0, socket.SOCK_STREAM)
            except OSError as error:
                self.failure, self.failed_at = error, time.monotonic()
                raise
            self.known = [(family, sockaddr) for family, _, _, _, sockaddr in found]
            self.looked_up_at = time.monotonic()
            return self.known

    def forget(self) -> None:
        """The next connection looks the name up again."""
        self.looked_up_at = -math.inf

    def in_turn(self) -> list[Address]:
        """The addresses in the order to try them: the lookup's, except that the first family's addresses take
        turns at being first, so that the connections spread over them as DNS rotating its answers spread
        them when each connection looked the name up."""
        known = self.current()
        preferred = next((index for index, (family, _) in enumerate(known) if family != known[0][0]), len(known))
        if preferred < 2:
            return known
        start = self.turns % preferred
        self.turns += 1
        return known[start:preferred] + known[:start] + known[preferred:]

    def connect(self, timeout: float) -> gevent.socket.socket:
        """A connection to the first address that takes one, each tried for `timeout` (as
        `socket.create_connection` tries them)."""
        failure: OSError | None = None
        for family, sockaddr in self.in_turn():
            sock: gevent.socket.socket | None = None
            try:
                sock = gevent.socket.socket(family, socket.SOCK_STREAM)  # a family this host lacks fails here
                sock.settimeout(timeout)
                sock.connect(sockaddr)
                return sock
            except BaseException as error:
                if sock is not None:
                    sock.close()
                if not isinstance(error, OSError):
                    raise
                failure = error
        self.forget()
        raise failure or OSError(f"no address found for {self.host}")


def literal_family(host: str) -> int | None:
    """AF_INET or AF_INET6 when `host` is an IP address as written; None for a name, and for an address
    with a zone (the resolver finds its interface)."""
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        return None
    if "%" in host:
        return None
    return socket.AF_INET if address.version == 4 else socket.AF_INET6


def set_tcp_keepalive(sock: gevent.socket.socket) -> None:
    """Probe a silent peer after 30 s (every 10 s, 3 times): a long poll on a connection that a NAT or
    load balancer dropped then fails in about a minute instead of waiting for the read timeout."""
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_KEEPALIVE, 1)
    for option, value in (("TCP_KEEPIDLE", 30), ("TCP_KEEPINTVL", 10), ("TCP_KEEPCNT", 3)):
        if hasattr(socket, option):
            sock.setsockopt(socket.IPPROTO_TCP, getattr(socket, option), value)
