"""A trace goes through the queue: `workerless send --trace-header` sets AWSTraceHeader; the app gets it as
X-Amzn-Trace-Id and as W3C traceparent; a Lambda record keeps it as Lambda's own trigger does."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Callable

from tests.e2e.helpers import the_one_lambda_record, workerless_send
from tests.support import Daemon, HttpApp, MotoServer, Queue, count_messages, wait_until

TRACE = "Root=1-5759e988-bd862e3fe1be46a994272793;Parent=53995c3f42cd8ad8;Sampled=1"
TRACEPARENT = "00-5759e988bd862e3fe1be46a994272793-53995c3f42cd8ad8-01"


def test_a_trace_header_sent_with_the_message_reaches_the_app_as_both_headers(
    daemon: Callable[..., Daemon], aws_env: dict[str, str], http_app: HttpApp, sqs: Any,
    make_queue: Callable[..., Queue], tmp_path: Path,
) -> None:
    queue = make_queue()
    sent = workerless_send([queue.name, "traced", f"--trace-header={TRACE}"], aws_env, tmp_path)
    assert sent.returncode == 0, sent.stderr
    own = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
    sent = workerless_send([queue.name, "own traceparent", f"--trace-header={TRACE}", f"--attr=traceparent={own}",
                            "--attr=tracestate=vendor=value"], aws_env, tmp_path)
    assert sent.returncode == 0, sent.stderr
    assert workerless_send([queue.name, "untraced"], aws_env, tmp_path).returncode == 0
    proc = daemon([f"--queues={queue.name}", f"--http={http_app.url}/"], env=aws_env)
    requests = {request.body: request.headers for request in http_app.wait_for_requests(3, timeout=60)}
    wait_until(lambda: count_messages(sqs, queue.url) == 0, 30, message="not deleted")
    assert proc.stop(timeout=30) == 0

    assert requests[b"traced"]["x-amzn-trace-id"] == TRACE
    assert requests[b"traced"]["traceparent"] == TRACEPARENT
    assert "tracestate" not in requests[b"traced"]
    # a traceparent attribute wins over the one derived from AWSTraceHeader, and brings its tracestate
    assert requests[b"own traceparent"]["x-amzn-trace-id"] == TRACE
    assert requests[b"own traceparent"]["traceparent"] == own
    assert requests[b"own traceparent"]["tracestate"] == "vendor=value"
    assert not {"x-amzn-trace-id", "traceparent", "tracestate"} & set(requests[b"untraced"])


def test_a_lambda_record_keeps_the_trace_header_as_lambda_sends_it(
    daemon: Callable[..., Daemon], aws_env: dict[str, str], moto_server: MotoServer, moto_lambda_function: str,
    sqs: Any, make_queue: Callable[..., Queue], tmp_path: Path,
) -> None:
    queue = make_queue()
    sent = workerless_send([queue.name, "traced", f"--trace-header={TRACE}"], aws_env, tmp_path)
    assert sent.returncode == 0, sent.stderr
    proc = daemon([f"--queues={queue.name}", f"--function={moto_lambda_function}"], env=aws_env)
    record = the_one_lambda_record(proc, sqs, queue, moto_server, moto_lambda_function)
    assert record["attributes"]["AWSTraceHeader"] == TRACE
    assert record["messageAttributes"] == {}
