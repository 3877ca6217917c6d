"""An independently written Beanstalk worker integration, django-eb-sqs-worker (PyPI), runs behind workerless.

The Django app is the HTTP target, in its own process; tasks are enqueued with the library's own `@task`
API to moto's SQS, and its periodic task comes from a cron.yaml written as the library's README says.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import textwrap
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import eb_sqs_worker  # noqa: F401  the library must be installed (test extra), not skipped
import pytest

from tests.support import (
    Daemon,
    MotoServer,
    Queue,
    build_config_file,
    count_messages,
    wait_until,
)

APP_FILES = {
    "ebapp/__init__.py": "",
    "ebapp/settings.py": """
        import os

        SECRET_KEY = "test-only"
        DEBUG = False
        ALLOWED_HOSTS = ["127.0.0.1", "localhost"]
        INSTALLED_APPS = ["eb_sqs_worker", "ebapp"]
        MIDDLEWARE = []
        ROOT_URLCONF = "ebapp.urls"
        DATABASES = {}
        USE_TZ = True
        AWS_EB_DEFAULT_REGION = os.environ["AWS_REGION"]
        AWS_ACCESS_KEY_ID = os.environ["AWS_ACCESS_KEY_ID"]
        AWS_SECRET_ACCESS_KEY = os.environ["AWS_SECRET_ACCESS_KEY"]
        AWS_EB_DEFAULT_QUEUE_NAME = os.environ["EB_QUEUE"]
        AWS_EB_HANDLE_SQS_TASKS = True
        """,
    "ebapp/apps.py": """
        from django.apps import AppConfig


        class EbAppConfig(AppConfig):
            name = "ebapp"

            def ready(self):
                from . import tasks  # registers the @task functions
        """,
    "ebapp/tasks.py": """
        import json
        import os

        from eb_sqs_worker.decorators import task


        def record(entry):
            with open(os.environ["EB_RESULTS"], "a") as handle:
                handle.write(json.dumps(entry) + "\\n")


        @task
        def resize_image(**kwargs):
            record({"task": "resize_image", "kwargs": kwargs})
            return kwargs


        @task(task_name="nightly_report")
        def nightly_report():
            record({"task": "nightly_report"})
            return True
        """,
    "ebapp/urls.py": """
        from eb_sqs_worker.urls import urlpatterns as eb_sqs_urlpatterns

        urlpatterns = [] + eb_sqs_urlpatterns
        """,
    "serve.py": """
        from gevent import monkey

        monkey.patch_all()

        import os
        import django
        from django.core.wsgi import get_wsgi_application
        from gevent.pywsgi import WSGIServer

        os.environ.setdefault("DJANGO_SETTINGS_MODULE", "ebapp.settings")
        django.setup()
        server = WSGIServer(("127.0.0.1", 0), get_wsgi_application())
        server.start()
        print(f"listening on {server.server_port}", flush=True)
        server.serve_forever()
        """,
    "enqueue.py": """
        import os
        import django

        os.environ.setdefault("DJANGO_SETTINGS_MODULE", "ebapp.settings")
        django.setup()
        from ebapp.tasks import resize_image

        resize_image(image_id=42, sizes=[64, 128], note="from the web tier")
        """,
    # The cron.yaml of the library's README, with a schedule that comes due every minute.
    "cron.yaml": """
        version: 1
        cron:
         - name: "nightly_report"
           url: "/sqs/"
           schedule: "* * * * *"
        """,
}


@pytest.fixture
def django_app(tmp_path: Path, aws_env: dict[str, str], make_queue: Callable[..., Queue]) -> Iterator[dict[str, Any]]:
    """The Django worker app serving on 127.0.0.1; yields its url, env, directory and queue."""
    for name, text in APP_FILES.items():
        path = tmp_path / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text).lstrip("\n"))
    queue = make_queue(name=f"eb-worker-{uuid.uuid4().hex[:8]}")
    env = {**aws_env, "EB_QUEUE": queue.name, "EB_RESULTS": str(tmp_path / "results.jsonl"),
           "PYTHONPATH": str(tmp_path), "DJANGO_SETTINGS_MODULE": "ebapp.settings", "PYTHONUNBUFFERED": "1"}
    log_path = tmp_path / "django.log"
    with open(log_path, "wb") as log:
        server = subprocess.Popen([sys.executable, str(tmp_path / "serve.py")], cwd=tmp_path, env=env,
                                  stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT)
    try:
        # The whole line, newline included: unbuffered, a line may be read before its last write.
        port = wait_until(lambda: next(iter(re.findall(r"^listening on (\d+)\n", log_path.read_text(), re.M)), None),
                          timeout=30, message=lambda: log_path.read_text())
        yield {"url": f"http://127.0.0.1:{port}", "env": env, "dir": tmp_path, "queue": queue}
    finally:
        server.terminate()
        server.wait(10)
        print(f"--- django app ---\n{log_path.read_text()[-4000:]}")


def results(app: dict[str, Any]) -> list[dict[str, Any]]:
    path = app["dir"] / "results.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def test_django_eb_sqs_worker_tasks_and_periodic_tasks_run_through_workerless(
    django_app: dict[str, Any], daemon: Callable[..., Daemon], aws_env: dict[str, str], sqs: Any,
    moto_server: MotoServer, claims_table: str,
) -> None:
    queue: Queue = django_app["queue"]
    config = build_config_file(django_app["dir"], shutdown_timeout=5, queues=[{"name": queue.name}],
                               targets={"default": {"type": "http", "url": f"{django_app['url']}/sqs/"}},
                               tables={"periodic": {"file": "cron.yaml", "queue": queue.name,
                                                    "claims_table": claims_table}})
    enqueued = subprocess.run([sys.executable, str(django_app["dir"] / "enqueue.py")], cwd=django_app["dir"],
                              env=django_app["env"], capture_output=True, text=True, timeout=60)
    assert enqueued.returncode == 0, enqueued.stdout + enqueued.stderr
    assert count_messages(sqs, queue.url) == 1
    proc = daemon(["-c", str(config)], env=aws_env)
    wait_until(lambda: {entry["task"] for entry in results(django_app)} == {"resize_image", "nightly_report"},
               timeout=30, message=lambda: f"results {results(django_app)}; log:\n{proc.output()[-3000:]}")
    wait_until(lambda: count_messages(sqs, queue.url) == 0, timeout=10, message="messages left undeleted")
    assert proc.stop(timeout=20) == 0
    slots = moto_server.client("dynamodb").scan(TableName=claims_table)["Items"]
    resize = [entry for entry in results(django_app) if entry["task"] == "resize_image"]
    assert resize == [{"task": "resize_image",
                       "kwargs": {"image_id": 42, "sizes": [64, 128], "note": "from the web tier"}}]
    # One run per scheduled minute: the start's catch-up slot, and the next one if the test crossed a minute.
    reports = [entry for entry in results(django_app) if entry["task"] == "nightly_report"]
    # (A slot that came due just as the daemon stopped waits in the queue.)
    assert reports == [{"task": "nightly_report"}] * len(reports) and len(slots) in (1, 2)
    assert len(reports) + count_messages(sqs, queue.url) == len(slots)
    assert f"delivered={1 + len(reports)} failed=0" in proc.output()
