"""One request on a fresh connection, for the credentials endpoints the daemon asks itself (aws.container, the
ECS/EKS container endpoint; aws.instance_metadata, EC2's IMDS; aws.web_identity, STS).

botocore asks them on a new connection each time, with one timeout to connect and one per read; here the same
two, on our wire (wire.http.Connections), and the whole exchange ends by twice that, so a server that trickles
bytes cannot hold a start or a renewal. Imported only once gevent has patched (the wire imports gevent and ssl).
"""

from __future__ import annotations

import time
import urllib.parse
from collections.abc import Mapping

import gevent.socket

from ..wire.http import Connections, host_header, tls_context
from ..wire.parsing import HTTPParseError, Reply


class Unanswered(Exception):
    """No complete answer: refused, reset, closed, timed out or not HTTP. `silent`: the request went out and
    the server said nothing for the read timeout (botocore's ReadTimeoutError), not a failure to connect."""

    def __init__(self, text: str, silent: bool) -> None:
        super().__init__(text)
        self.silent = silent


class NotConnected(OSError):
    """The connection failed to open (refused, unreachable, timed out): no byte of the request left."""


class FreshConnection(Connections):
    """`wire.http.Connections` that tell a failure to connect from a silence after the request went."""

    def _connect(self, deadline: float | None = None) -> gevent.socket.socket:
        try:
            return super()._connect(deadline)
        except OSError as error:  # a timeout to connect too (TimeoutError is an OSError)
            raise NotConnected(f"{type(error).__name__}: {error}") from error


def encode_request(method: str, url: str, headers: Mapping[str, str], body: bytes = b"") -> bytes:
    """The request as bytes, `Connection: close`; ValueError for a header value HTTP cannot carry."""
    parts = urllib.parse.urlsplit(url)
    target = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
    lines = [f"{method} {target} HTTP/1.1", f"Host: {host_header(parts.hostname or '', parts.port, parts.scheme)}"]
    for name, value in headers.items():
        if "\r" in value or "\n" in value:  # botocore refuses it too (a token file ending in a newline)
            raise ValueError(f"{name}: not a legal header value")
        lines.append(f"{name}: {value}")
    if method != "GET":
        lines.append(f"Content-Length: {len(body)}")
    lines.append("Connection: close")
    try:
        return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + body
    except UnicodeEncodeError:
        raise ValueError("not a legal header value") from None


def request_once(url: str, request: bytes, timeout_seconds: float, ca_bundle: str | None = None) -> Reply:
    """Send `request` (encode_request's) to `url` and read the whole answer; Unanswered when none came."""
    parts = urllib.parse.urlsplit(url)
    tls = tls_context(ca_bundle) if parts.scheme == "https" else None
    connections = FreshConnection(parts.hostname or "", parts.port or (443 if tls else 80), limit=1,
                                  connect_timeout=timeout_seconds, read_timeout=timeout_seconds, tls=tls)
    try:
        return connections.exchange(request, deadline=time.monotonic() + 2 * timeout_seconds)
    except NotConnected as error:
        raise Unanswered(str(error), silent=False) from None
    except TimeoutError as error:  # silent for the read timeout, or the whole exchange past its deadline
        raise Unanswered(f"{type(error).__name__}: {error}", silent=True) from None
    except (OSError, HTTPParseError) as error:  # reset, closed before a complete answer, TLS, not HTTP
        raise Unanswered(f"{type(error).__name__}: {error}", silent=False) from None
    finally:
        connections.close()
