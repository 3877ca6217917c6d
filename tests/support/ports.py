"""A port kept for a server that stops and starts again on it (an outage), or that starts late.

A port picked free, closed, and bound again later is free for anyone meanwhile: another test process's
bind to port 0 may be handed it, and the daemon under test then talks to that process (a moto port race
once failed 42 tests that way). Kept here, the port is bound by a socket that does not listen: a
connection to it is refused, as to a dead endpoint, and no other bind can take it. SO_REUSEADDR on both
sides lets our own server bind it before the keeper lets go, so there is no gap at all."""

from __future__ import annotations

import socket


class ReservedPort:
    """`port` is bound by the keeper from the start; `release()` once a server of ours listens on it, `hold()`
    again when that server stops, `release()` for good at the end."""

    def __init__(self) -> None:
        self._keeper: socket.socket | None = None
        self.port = 0
        self.hold()

    def hold(self) -> None:
        if self._keeper is not None:
            return
        keeper = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        keeper.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            keeper.bind(("127.0.0.1", self.port))
        except OSError:
            keeper.close()
            raise
        self.port = keeper.getsockname()[1]
        self._keeper = keeper

    def release(self) -> None:
        keeper, self._keeper = self._keeper, None
        if keeper is not None:
            keeper.close()
