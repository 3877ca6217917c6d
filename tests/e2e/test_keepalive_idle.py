"""An app server that closes idle keep-alive connections after 1 s (gunicorn's async workers do
after 2 s, Node and uvicorn after 5 s) loses no delivery and gets none twice."""

from __future__ import annotations

import socket
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import gevent
import pytest
from gevent.server import StreamServer

from tests.support import Daemon, Queue, count_messages, wait_until
from tests.support.config_file import build_config_file
from tests.support.raw_http import read_request

IDLE_CLOSE_SECONDS = 1.0
MESSAGES = 20
SPACING_SECONDS = 1.5


class IdleClosingApp:
    """HTTP/1.1 keep-alive app on 127.0.0.1 that answers 200 and closes a connection idle for 1 s."""

    def __init__(self) -> None:
        self.bodies: list[bytes] = []
        self.arrived: list[float] = []  # time.monotonic() of each body, in order
        self.connections = 0
        self.server = StreamServer(("127.0.0.1", 0), self.handle)
        self.server.start()
        self.url = f"http://127.0.0.1:{self.server.server_port}"

    def handle(self, sock: socket.socket, address: Any) -> None:
        self.connections += 1
        sock.settimeout(IDLE_CLOSE_SECONDS)  # the wait for the next request is the idle time
        buffer = b""
        try:
            while True:
                read = read_request(sock, buffer)
                if read is None:
                    return
                request, buffer = read
                self.bodies.append(request.partition(b"\r\n\r\n")[2])
                self.arrived.append(time.monotonic())
                sock.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n")
        except (TimeoutError, OSError):
            return  # idle too long (or gone): close, as the app servers above do
        finally:
            sock.close()

    def stop(self) -> None:
        self.server.stop(timeout=1)


@pytest.fixture
def idle_closing_app() -> Iterator[IdleClosingApp]:
    app = IdleClosingApp()
    yield app
    app.stop()


@pytest.mark.slow
def test_deliveries_spaced_past_the_apps_idle_timeout_are_neither_lost_nor_repeated(
    daemon: Callable[..., Daemon], aws_env: dict[str, str], idle_closing_app: IdleClosingApp, sqs: Any,
    make_queue: Callable[..., Queue], tmp_path: Path,
) -> None:
    queue = make_queue()
    config = build_config_file(tmp_path, concurrency=2, queues=[{"name": queue.name, "error_visibility_timeout": 60}],
                               targets={"default": {"type": "http", "url": f"{idle_closing_app.url}/work"}})
    proc = daemon(["-c", str(config)], env=aws_env)
    proc.wait_for_output("workerless started", timeout=30)
    for number in range(MESSAGES):
        # the pacing of the scenario, not a wait: each message is sent SPACING_SECONDS after the previous one
        # arrived, so its connection was idle past IDLE_CLOSE_SECONDS however late a loaded machine ran
        next_send = idle_closing_app.arrived[-1] + SPACING_SECONDS if number else time.monotonic()
        gevent.sleep(max(0.0, next_send - time.monotonic()))
        sqs.send_message(QueueUrl=queue.url, MessageBody=f"m{number}")
        wait_until(lambda: f"m{number}".encode() in idle_closing_app.bodies, 10,
                   message=lambda: f"m{number} not delivered; app got {idle_closing_app.bodies}")
    wait_until(lambda: count_messages(sqs, queue.url) == 0, 15, message="not every message was deleted")
    assert proc.stop(timeout=20) == 0
    assert sorted(idle_closing_app.bodies) == sorted(f"m{n}".encode() for n in range(MESSAGES))  # none twice
    assert "failure" not in proc.output() and "Failed" not in proc.output()
    assert idle_closing_app.connections >= MESSAGES  # every delivery found its connection closed by the app
