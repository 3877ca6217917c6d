"""A TCP proxy on 127.0.0.1 that a test can take down and bring back on the same port.

Put it in front of moto to make "the SQS endpoint is down" real: while stopped, connections are
refused and the ones open at the time are cut, exactly as when an endpoint goes away.
"""

from __future__ import annotations

import socket
import ssl
from typing import Any

import gevent
from gevent.server import StreamServer

from .ports import ReservedPort


class TcpProxy:
    """`TcpProxy(upstream_url)`; `.url` keeps its port across `stop()` and `start()`."""

    def __init__(self, upstream_url: str, ssl_context: ssl.SSLContext | None = None) -> None:
        """With `ssl_context`, clients speak TLS to it (https URL) and it forwards plain bytes upstream."""
        host_port = upstream_url.split("://", 1)[-1].rstrip("/")
        host, _, port = host_port.rpartition(":")
        self.upstream = (host, int(port))
        self.reserved = ReservedPort()  # refuses connections while no server of ours listens there
        self.port = self.reserved.port
        self.ssl_context = ssl_context
        self.url = f"{'https' if ssl_context else 'http'}://127.0.0.1:{self.port}"
        self.connections = 0
        self._server: StreamServer | None = None
        self._pipes: set[gevent.Greenlet] = set()
        self._sockets: set[socket.socket] = set()

    @property
    def is_up(self) -> bool:
        return self._server is not None

    def start(self) -> None:
        if self._server is None:
            tls = {} if self.ssl_context is None else {"ssl_context": self.ssl_context}
            server = StreamServer(("127.0.0.1", self.port), self._handle, **tls)
            server.start()  # SO_REUSEADDR is on, so the same port binds again right away
            self._server = server
            self.reserved.release()

    def stop(self) -> None:
        """Refuse new connections and cut every open one."""
        if self._server is not None:
            self._server.stop(timeout=0)
            self._server = None
            self.reserved.hold()
        for sock in list(self._sockets):
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            sock.close()
        gevent.killall(list(self._pipes), block=True, timeout=2)
        self._sockets.clear()

    def close(self) -> None:
        """Stop for good, the port let go."""
        self.stop()
        self.reserved.release()

    def _handle(self, client: socket.socket, address: Any) -> None:
        self.connections += 1
        try:
            upstream = socket.create_connection(self.upstream, timeout=5)
        except OSError:
            client.close()
            return
        upstream.settimeout(None)
        self._sockets.update((client, upstream))
        pipes = [gevent.spawn(self._pipe, client, upstream), gevent.spawn(self._pipe, upstream, client)]
        self._pipes.update(pipes)
        try:
            gevent.joinall(pipes)
        finally:
            self._pipes.difference_update(pipes)
            for sock in (client, upstream):
                self._sockets.discard(sock)
                sock.close()

    @staticmethod
    def _pipe(source: socket.socket, sink: socket.socket) -> None:
        try:
            while True:
                data = source.recv(65536)
                if not data:
                    break
                sink.sendall(data)
        except OSError:
            pass
        finally:
            # Half-close so the other direction sees end-of-stream, as a real endpoint would.
            try:
                sink.shutdown(socket.SHUT_WR)
            except OSError:
                pass
