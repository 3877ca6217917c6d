"""wire.connecting: where the connections of a pool go, against real servers on loopback.

The hub's resolver is wrapped to count the lookups asked of it (each one a hop to gevent's thread pool)
and, for a name made up here, to answer with addresses of our choosing; everything else is real: the
sockets, the connects, the servers and their answers.
"""

from __future__ import annotations

import socket
from collections.abc import Iterator
from typing import Any

import gevent
import gevent.event
import gevent.socket
import pytest
from gevent.server import StreamServer

from tests.support import wait_until
from tests.support.moto import free_port
from tests.support.raw_http import read_request
from workerless_gevent.wire import connecting
from workerless_gevent.wire.connecting import Addresses, literal_family
from workerless_gevent.wire.http import Connections
from workerless_gevent.wire.parsing import Reply

REQUEST = b"POST / HTTP/1.1\r\nHost: app\r\nContent-Length: 2\r\n\r\n{}"
ANSWER = b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\nok"
MADE_UP = "two-addresses.test"  # a name only the counting resolver knows


class CountingResolver:
    """The hub's resolver, counting lookups; `MADE_UP` resolves to `made_up` (family, sockaddr) pairs once
    `answer` is set (a lookup on its way until then), or fails with `failure` if that is set."""

    def __init__(self, resolver: Any) -> None:
        self.resolver = resolver
        self.lookups: list[str] = []
        self.made_up: list[tuple[int, Any]] = []
        self.answer = gevent.event.Event()
        self.answer.set()
        self.failure: OSError | None = None

    def getaddrinfo(self, host: str, *args: Any, **kwargs: Any) -> Any:
        self.lookups.append(host)
        if host != MADE_UP:
            return self.resolver.getaddrinfo(host, *args, **kwargs)
        self.answer.wait()
        if self.failure is not None:
            raise self.failure
        return [(family, socket.SOCK_STREAM, socket.IPPROTO_TCP, "", sockaddr) for family, sockaddr in self.made_up]

    def __getattr__(self, name: str) -> Any:
        return getattr(self.resolver, name)


@pytest.fixture
def resolver(monkeypatch: pytest.MonkeyPatch) -> CountingResolver:
    hub = gevent.get_hub()
    counting = CountingResolver(hub.resolver)
    monkeypatch.setattr(hub, "resolver", counting)
    monkeypatch.setattr(connecting, "NAME_SECONDS", 60.0)  # far longer than any test here, on any machine
    return counting


class App:
    """Answers each connection's one request and closes it, as an app without keep-alive does."""

    def __init__(self, listener: Any = ("127.0.0.1", 0)) -> None:
        self.connections = 0
        self.server = StreamServer(listener, self.handle)
        self.server.start()
        self.port: int = self.server.server_port

    def handle(self, sock: socket.socket, address: Any) -> None:
        self.connections += 1
        if read_request(sock, b"") is not None:
            sock.sendall(ANSWER)


@pytest.fixture
def app() -> Iterator[App]:
    served = App()
    yield served
    served.server.stop(timeout=1)


def exchange_twice(host: str, port: int) -> None:
    connections = Connections(host, port, limit=1, connect_timeout=2, read_timeout=5)
    try:
        for _ in range(2):
            assert connections.exchange(REQUEST) == Reply(200, {}, b"ok")
    finally:
        connections.close()


def test_an_address_as_written_is_connected_to_without_a_lookup(app: App, resolver: CountingResolver) -> None:
    exchange_twice("127.0.0.1", app.port)
    assert app.connections == 2 and resolver.lookups == []


def test_an_ipv6_address_is_connected_to_without_a_lookup(resolver: CountingResolver) -> None:
    try:
        listener = gevent.socket.socket(socket.AF_INET6, socket.SOCK_STREAM)
        listener.bind(("::1", 0))
    except OSError as error:
        pytest.skip(f"no IPv6 loopback here: {error}")
    listener.listen(8)
    app = App(listener)
    try:
        exchange_twice("::1", app.port)
    finally:
        app.server.stop(timeout=1)
    assert app.connections == 2 and resolver.lookups == []


def test_a_name_is_looked_up_once_for_the_connections_of_a_few_seconds(app: App, resolver: CountingResolver) -> None:
    exchange_twice("localhost", app.port)
    assert app.connections == 2 and resolver.lookups == ["localhost"]


def test_a_name_is_looked_up_again_once_its_addresses_are_older_than_kept(app: App, resolver: CountingResolver) -> None:
    addresses = Addresses("localhost", app.port, keep_seconds=0)
    for _ in range(2):
        addresses.connect(2).close()
    assert resolver.lookups == ["localhost"] * 2


def test_connections_opened_together_share_one_lookup(app: App, resolver: CountingResolver) -> None:
    addresses = Addresses("localhost", app.port)
    opened = [gevent.spawn(addresses.connect, 2) for _ in range(20)]
    gevent.joinall(opened, timeout=10, raise_error=True)
    for connect in opened:
        connect.value.close()
    assert resolver.lookups == ["localhost"]


def test_a_failed_connection_has_the_name_looked_up_again(resolver: CountingResolver) -> None:
    addresses = Addresses("localhost", free_port())
    for _ in range(2):
        with pytest.raises(ConnectionRefusedError):
            addresses.connect(2)
    assert resolver.lookups == ["localhost"] * 2  # the app may have moved: its old address is not kept


def test_the_next_address_is_tried_when_the_first_refuses(app: App, resolver: CountingResolver) -> None:
    resolver.made_up = [(socket.AF_INET, ("127.0.0.1", free_port())), (socket.AF_INET, ("127.0.0.1", app.port))]
    exchange_twice(MADE_UP, app.port)
    assert app.connections == 2 and resolver.lookups == [MADE_UP]  # a refusal with a connection after it keeps them


def test_a_family_this_host_cannot_open_gives_way_to_the_next_address(app: App, resolver: CountingResolver) -> None:
    no_such_family = 12345  # as AF_INET6 is to a host booted without IPv6: the socket itself fails
    resolver.made_up = [(no_such_family, ("::1", app.port)), (socket.AF_INET, ("127.0.0.1", app.port))]
    exchange_twice(MADE_UP, app.port)
    assert app.connections == 2


def test_connections_take_turns_over_the_addresses_of_the_preferred_family(resolver: CountingResolver) -> None:
    apps = [App(), App()]
    try:
        resolver.made_up = [(socket.AF_INET, ("127.0.0.1", app.port)) for app in apps]
        resolver.made_up.append((socket.AF_INET6, ("::1", free_port())))  # another family: tried only after them
        addresses = Addresses(MADE_UP, 80)
        for _ in range(4):
            addresses.connect(2).close()
        wait_until(lambda: sum(app.connections for app in apps) == 4, 5, message="the apps saw fewer connections")
        assert [app.connections for app in apps] == [2, 2]  # as DNS rotating its answers spread them
        assert resolver.lookups == [MADE_UP]
    finally:
        for app in apps:
            app.server.stop(timeout=1)


def test_a_failed_lookup_is_the_answer_of_every_connection_that_waited_for_it(resolver: CountingResolver) -> None:
    resolver.answer.clear()
    resolver.failure = socket.gaierror(socket.EAI_AGAIN, "Temporary failure in name resolution")
    addresses = Addresses(MADE_UP, 80)
    waiting = [gevent.spawn(addresses.connect, 2) for _ in range(10)]
    wait_until(lambda: resolver.lookups == [MADE_UP], 5, message="no lookup started")
    resolver.answer.set()
    gevent.joinall(waiting, timeout=10)
    assert all(isinstance(connect.exception, socket.gaierror) for connect in waiting)
    assert resolver.lookups == [MADE_UP]  # one lookup, one failure for all: not ten in a row
    with pytest.raises(socket.gaierror):
        addresses.connect(2)  # a connection asked for after the failure looks the name up again
    assert resolver.lookups == [MADE_UP] * 2


def test_a_name_without_addresses_is_an_os_error(resolver: CountingResolver) -> None:
    with pytest.raises(OSError, match=MADE_UP):
        Addresses(MADE_UP, 80).connect(2)


@pytest.mark.parametrize(("host", "family"), [
    ("127.0.0.1", socket.AF_INET), ("::1", socket.AF_INET6), ("2001:db8::5", socket.AF_INET6),
    ("localhost", None), ("sqs.eu-west-1.amazonaws.com", None),
    ("fe80::1%eth0", None),  # a zone: the resolver finds its interface
    ("127.1", None),  # inet_aton's short form: the resolver reads it as 127.0.0.1, as before
])
def test_only_an_address_as_written_skips_the_lookup(host: str, family: int | None) -> None:
    assert literal_family(host) == family
