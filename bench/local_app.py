"""An HTTP app in the runner's own process on 127.0.0.1: each POST answered with the status its handler gives."""

from __future__ import annotations

import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Callable

Handle = Callable[[Any, bytes], int]  # (the request's headers, its body) -> status


class QuietServer(ThreadingHTTPServer):
    daemon_threads = True

    def handle_error(self, request: Any, client_address: Any) -> None:
        if not isinstance(sys.exc_info()[1], OSError):  # a SIGKILLed daemon resets its connections
            super().handle_error(request, client_address)


class LocalApp:
    def __init__(self, handle: Handle) -> None:
        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"  # keep-alive, as the daemon's pooled client expects

            def do_POST(self) -> None:  # noqa: N802 - http.server's name
                status = handle(self.headers, self.rfile.read(int(self.headers.get("Content-Length") or 0)))
                self.send_response(status)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, *args: Any) -> None:
                pass

        self.server = QuietServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, kwargs={"poll_interval": 0.1}, daemon=True).start()

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()
