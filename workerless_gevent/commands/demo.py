"""`workerless demo`: the daemon on an embedded AWS emulator, no account or credentials needed.

Starts moto's server and a small local app on free loopback ports, creates the queues of
conf/local.toml and their dead-letter queues, enqueues sample messages on each priority and runs
the real daemon against them (conf/local.toml with its targets pointed at the app) with its status
page on, so the app's output shows the messages arriving in priority order, the lowest queue's as one
batch, and the operator's view is one click away. Ctrl-C, SIGTERM or
SIGHUP (the terminal closing) stops it all: the daemon and the emulator run in sessions of their
own, so nothing but this process can stop them.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import Any

import boto3
import gevent
import gevent.event
from gevent.pywsgi import WSGIServer

ROOT = Path(__file__).resolve().parents[2]  # the checkout: bin/, conf/
SAMPLES = (("events", 5), ("default", 4), ("submissions", 3), ("payments", 3))  # sent lowest priority first
BATCH_PATH = "/batch"  # conf/local.toml's batch target (events): Lambda's SQS event, up to 10 messages a POST
DEAD_LETTER_SUFFIX = "-dlq"  # conf/local.toml gives each queue its dead_letter_queue (the daemon warns without one)


def run_demo() -> int:
    stop_requested = gevent.event.Event()
    for signum in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        gevent.signal_handler(signum, stop_requested.set)
    emulator, endpoint = start_emulator()
    env = demo_environment(endpoint)
    app = WSGIServer(("127.0.0.1", 0), print_request, log=None)
    app.start()
    say(f"local AWS emulator (moto, pid {emulator.pid}) on {endpoint}; "
        f"demo app on http://127.0.0.1:{app.server_port}/")
    daemon = None
    directory = tempfile.TemporaryDirectory(prefix="workerless-demo-")
    try:
        sqs = boto3.session.Session(region_name=env["AWS_DEFAULT_REGION"], aws_access_key_id="demo",
                                    aws_secret_access_key="demo").client("sqs", endpoint_url=endpoint)
        enqueue_samples(sqs)
        if stop_requested.is_set():  # a signal while the emulator was starting
            return 0
        status = f"127.0.0.1:{free_port()}"
        config = demo_config(Path(directory.name), f"http://127.0.0.1:{app.server_port}")
        daemon = subprocess.Popen([sys.executable, str(ROOT / "bin" / "workerless"), "-c", str(config),
                                   f"--status={status}"], env=env, start_new_session=True)
        say(f"daemon (pid {daemon.pid}) started with conf/local.toml (strict priority, concurrency 1); "
            "Ctrl-C stops everything")
        say(f"status page: http://{status}/ (JSON at /status, Prometheus at /metrics)")
        say("to use the command line on the emulator, in another terminal:")
        say(f"  export AWS_ENDPOINT_URL={endpoint} AWS_ACCESS_KEY_ID=demo AWS_SECRET_ACCESS_KEY=demo "
            f"AWS_REGION={env['AWS_DEFAULT_REGION']}")
        while daemon.poll() is None and not stop_requested.wait(0.2):
            pass
        say("stopping")
    finally:
        # Also on an error or a closed terminal: neither child may outlive the demo.
        code = stop(daemon)
        app.stop(timeout=1)
        stop(emulator)
        directory.cleanup()
    return code


def demo_config(directory: Path, app_url: str) -> Path:
    """conf/local.toml with both targets pointed at the demo's app."""
    path = directory / "local.toml"
    path.write_text((ROOT / "conf" / "local.toml").read_text().replace("http://127.0.0.1:8080", app_url))
    return path


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def start_emulator() -> tuple[subprocess.Popen[bytes], str]:
    port = free_port()
    process = subprocess.Popen([sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)],
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    endpoint = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            urllib.request.urlopen(endpoint + "/moto-api/", timeout=1).close()
            return process, endpoint
        except OSError:
            if process.poll() is not None:
                break
            gevent.sleep(0.1)
    process.kill()
    raise SystemExit("workerless demo: the local AWS emulator did not start (is moto[server] installed?)")


def demo_environment(endpoint: str) -> dict[str, str]:
    env = {key: value for key, value in os.environ.items() if not key.startswith("AWS_")}
    env.update(AWS_ENDPOINT_URL=endpoint, AWS_ACCESS_KEY_ID="demo", AWS_SECRET_ACCESS_KEY="demo",
               AWS_DEFAULT_REGION="us-east-1", AWS_EC2_METADATA_DISABLED="true", PYTHONUNBUFFERED="1")
    return env


def enqueue_samples(sqs: Any) -> None:
    for queue, _ in SAMPLES:
        sqs.create_queue(QueueName=queue)
        sqs.create_queue(QueueName=queue + DEAD_LETTER_SUFFIX)
    for queue, count in SAMPLES:
        url = sqs.get_queue_url(QueueName=queue)["QueueUrl"]
        for number in range(1, count + 1):
            body = '{"queue": "%s", "n": %d}' % (queue, number)
            sqs.send_message(QueueUrl=url, MessageBody=body,
                             MessageAttributes={"sample": {"DataType": "Number", "StringValue": str(number)}})
        say(f"enqueued {count} messages on {queue}")


def print_request(environ: dict[str, Any], start_response: Any) -> list[bytes]:
    body = environ["wsgi.input"].read().decode("utf-8", "replace")
    headers = {key[5:].replace("_", "-").title(): value for key, value in environ.items()
               if key.startswith("HTTP_X_AWS_SQSD")}
    if environ["PATH_INFO"] == BATCH_PATH:  # answered as a Lambda function reporting partial failures answers
        records = json.loads(body)["Records"]
        say(f"app got POST {BATCH_PATH} with {len(records)} records, one batch:")
        for record in records:
            say(f"    record {record['messageId']}: {record['body']}")
        # None failed; a record named here ({"itemIdentifier": its messageId}) would be retried alone.
        reply, content_type = json.dumps({"batchItemFailures": []}).encode(), "application/json"
    else:
        say(f"app got POST {environ['PATH_INFO']} {body}")
        reply, content_type = b"ok", "text/plain"
    for name, value in sorted(headers.items()):
        say(f"    {name}: {value}")
    gevent.sleep(0.2)  # pretend to work, so the order is easy to follow
    start_response("200 OK", [("Content-Type", content_type)])
    return [reply]


def stop(process: subprocess.Popen[bytes] | None) -> int:
    """SIGTERM, then SIGKILL after 30 s; the exit code (the daemon's becomes the demo's)."""
    if process is None:
        return 0
    if process.poll() is not None:
        return process.returncode
    process.send_signal(signal.SIGTERM)
    try:
        return process.wait(timeout=30)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()
        return 1


def say(line: str) -> None:
    try:
        print(f"[demo] {line}", flush=True)
    except OSError:  # the terminal went away (SIGHUP): stopping matters more than telling
        pass
