"""The batch handlers of the HTTP contract page, as a user copies them: the one handler works as a Lambda function
behind a Lambda target and, in each framework's few lines, behind an HTTP target with batch_size > 1; a record it
fails is retried alone."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import textwrap
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.helpers import send_batch
from tests.support import (REPO_ROOT, Daemon, FakeLambda, Invocation, LambdaReply, Queue, build_config_file,
                           count_messages, lambda_result, wait_until)

PAGE = REPO_ROOT / "docs" / "concepts" / "http-contract.md"
# The page's `process` is the user's work: here it notes each order it gets and fails the ones asking for it.
PROCESS = """

def process(order: dict) -> None:
    import os
    with open(os.environ["ORDERS"], "a") as orders:
        orders.write(json.dumps(order) + "\\n")
    if order.get("fail"):
        raise ValueError("failing on purpose")
"""
SERVE = """
from gevent import monkey

monkey.patch_all()

import sys

from gevent.pywsgi import WSGIServer

if sys.argv[1] == "django":
    import django
    from django.conf import settings

    settings.configure(ROOT_URLCONF="urls", ALLOWED_HOSTS=["127.0.0.1"], SECRET_KEY="test-only", MIDDLEWARE=[])
    django.setup()
    from django.core.wsgi import get_wsgi_application

    app = get_wsgi_application()
else:
    from flask_app import app
server = WSGIServer(("127.0.0.1", 0), app)
server.start()
print(f"listening on {server.server_port}", flush=True)
server.serve_forever()
"""
FRAMEWORK_FILES = {
    "flask": {"flask_app.py": "# Flask"},
    "django": {"views.py": "# Django", "urls.py": 'from django.urls import path\n\nimport views\n\n'
                                                  'urlpatterns = [path("sqs", views.sqs)]\n'},
}


def handler_blocks() -> dict[str, str]:
    """The python blocks of the page's Batches section, by their first line."""
    section = PAGE.read_text().split("## Batches", 1)[1].split("\n## ", 1)[0]
    blocks = re.findall(r"```python\n(.*?)```", section, flags=re.S)
    return {block.splitlines()[0].split(":")[0].split(" (")[0]: block for block in blocks}


def write_app(directory: Path, framework: str) -> None:
    blocks = handler_blocks()
    (directory / "handler.py").write_text(blocks["# handler.py"] + PROCESS)
    (directory / "serve.py").write_text(SERVE)
    for name, text in FRAMEWORK_FILES[framework].items():
        (directory / name).write_text(blocks[text] if text in blocks else text)


def orders(directory: Path) -> list[dict[str, Any]]:
    path = directory / "orders.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


@pytest.fixture
def app_server(tmp_path: Path, aws_env: dict[str, str]) -> Iterator[Callable[[str], str]]:
    """`app_server(framework) -> url`: the page's app in its own process, serving on 127.0.0.1."""
    servers: list[subprocess.Popen[bytes]] = []
    log_path = tmp_path / "app.log"

    def start(framework: str) -> str:
        write_app(tmp_path, framework)
        env = {**aws_env, "PYTHONPATH": str(tmp_path), "ORDERS": str(tmp_path / "orders.jsonl"),
               "PYTHONUNBUFFERED": "1"}
        with open(log_path, "wb") as log:
            servers.append(subprocess.Popen([sys.executable, str(tmp_path / "serve.py"), framework], cwd=tmp_path,
                                            env=env, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT))
        port = wait_until(lambda: next(iter(re.findall(r"^listening on (\d+)\n", log_path.read_text(), re.M)), None),
                          timeout=30, message=lambda: log_path.read_text())
        return f"http://127.0.0.1:{port}"

    yield start
    for server in servers:
        server.terminate()
        server.wait(10)
    if log_path.exists():
        print(f"--- app ---\n{log_path.read_text()[-4000:]}")


SENT = [{"n": 1}, {"n": 2, "fail": True}, {"n": 3}]


@pytest.mark.parametrize("framework", ["flask", "django"])
def test_the_pages_handler_behind_the_batch_target_retries_only_the_record_it_fails(
    framework: str, app_server: Callable[[str], str], daemon: Callable[..., Daemon], aws_env: dict[str, str],
    sqs: Any, make_queue: Callable[..., Queue], tmp_path: Path,
) -> None:
    url = app_server(framework)
    queue = make_queue()
    send_batch(sqs, queue.url, [json.dumps(order) for order in SENT])
    config = build_config_file(tmp_path, shutdown_timeout=5, polling={"poll_for": 20},
                               queues=[{"name": queue.name, "error_visibility_timeout": 1}],
                               targets={"default": {"type": "http", "url": f"{url}/sqs", "batch_size": 10,
                                                    "max_batching_window": 1}})
    proc = daemon(["-c", str(config)], env=aws_env)
    wait_until(lambda: [order["n"] for order in orders(tmp_path)].count(2) >= 3, 60,
               message=lambda: f"orders: {orders(tmp_path)}")
    assert proc.stop(timeout=30) == 0

    got = [order["n"] for order in orders(tmp_path)]
    assert got[:3] == [1, 2, 3] and set(got[3:]) == {2}, got  # one POST of three, then the failed one alone
    assert count_messages(sqs, queue.url) == 1
    assert "type=BatchItemFailure: the app reported this record as failed" in proc.output()


def test_the_pages_handler_is_a_lambda_function_behind_the_lambda_target(
    daemon: Callable[..., Daemon], aws_env: dict[str, str], fake_lambda: FakeLambda,
    sqs: Any, make_queue: Callable[..., Queue], tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("ORDERS", str(tmp_path / "orders.jsonl"))
    namespace: dict[str, Any] = {}
    exec(compile(handler_blocks()["# handler.py"] + textwrap.dedent(PROCESS), "handler.py", "exec"), namespace)
    fake_lambda.respond = lambda invocation: invoke(namespace["handler"], invocation)
    queue = make_queue()
    send_batch(sqs, queue.url, [json.dumps(order) for order in SENT])
    config = build_config_file(tmp_path, shutdown_timeout=5, polling={"poll_for": 20},
                               queues=[{"name": queue.name, "error_visibility_timeout": 1}],
                               targets={"default": {"type": "lambda", "function": "orders-fn"}})
    proc = daemon(["-c", str(config)], env={**aws_env, "AWS_ENDPOINT_URL_LAMBDA": fake_lambda.url})
    wait_until(lambda: [order["n"] for order in orders(tmp_path)].count(2) >= 3, 60,
               message=lambda: f"orders: {orders(tmp_path)}")
    assert proc.stop(timeout=30) == 0

    got = [order["n"] for order in orders(tmp_path)]
    assert got[:3] == [1, 2, 3] and set(got[3:]) == {2}, got
    assert count_messages(sqs, queue.url) == 1


def invoke(handler: Callable[[Any, Any], Any], invocation: Invocation) -> LambdaReply:
    return lambda_result(handler(invocation.payload, None))
