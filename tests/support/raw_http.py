"""Reading HTTP/1.1 requests off a raw socket, for servers that decide byte by byte what to answer."""

from __future__ import annotations

import socket


def read_request(sock: socket.socket, buffer: bytes) -> tuple[bytes, bytes] | None:
    """The next request (head and Content-Length body) and what came after it; None at EOF."""
    while b"\r\n\r\n" not in buffer:
        data = sock.recv(65536)
        if not data:
            return None
        buffer += data
    head, _, rest = buffer.partition(b"\r\n\r\n")
    length = next((int(line.split(b":", 1)[1]) for line in head.split(b"\r\n")
                   if line.lower().startswith(b"content-length:")), 0)
    while len(rest) < length:
        data = sock.recv(65536)
        if not data:
            return None
        rest += data
    return head + b"\r\n\r\n" + rest[:length], rest[length:]
