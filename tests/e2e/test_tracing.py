"""[tracing] through real processes: the daemon's spans reach a real OTLP/HTTP receiver (decoded with the
OpenTelemetry proto package), in the producer's trace, and the app's request carries the delivery span."""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.helpers import send_traced, workerless_send
from tests.support import (Daemon, HttpApp, MotoServer, Queue, RecordedRequest, build_config_file, count_messages,
                           wait_until)
from tests.support.otlp import OtlpReceiver, ReceivedSpan
from tests.support.process import REPO_ROOT

TRACE = "Root=1-5759e988-bd862e3fe1be46a994272793;Parent=53995c3f42cd8ad8;Sampled=1"
PRODUCER_TRACE_ID, PRODUCER_SPAN_ID = "0af7651916cd43dd8448eb211c80319c", "b7ad6b7169203331"
PRODUCER = f"00-{PRODUCER_TRACE_ID}-{PRODUCER_SPAN_ID}-01"


@pytest.fixture
def receiver() -> Iterator[OtlpReceiver]:
    made = OtlpReceiver()
    made.start()
    yield made
    made.stop()


def traced_env(aws_env: dict[str, str], receiver: OtlpReceiver, **more: str) -> dict[str, str]:
    return {**aws_env, "OTEL_EXPORTER_OTLP_ENDPOINT": receiver.endpoint, "OTEL_BSP_SCHEDULE_DELAY": "100",
            "OTEL_SERVICE_NAME": "orders-worker", **more}


def traced_config(tmp_path: Path, queue: Queue, target: dict[str, Any], **queue_keys: Any) -> Path:
    return build_config_file(tmp_path, concurrency=2, log_format="json",
                             queues=[{"name": queue.name, **queue_keys}], targets={"default": target},
                             tables={"tracing": {"exporter": "otlp"}, "metrics": {"interval": 2}})


def send(sqs: Any, queue: Queue, body: str, traceparent: str | None = PRODUCER) -> str:
    attributes = {"traceparent": {"DataType": "String", "StringValue": traceparent}} if traceparent else {}
    return str(sqs.send_message(QueueUrl=queue.url, MessageBody=body, MessageAttributes=attributes)["MessageId"])


def parent_of_request(headers: dict[str, str]) -> tuple[str, str]:
    _, trace_id, span_id, _ = headers["traceparent"].split("-")
    return trace_id, span_id


def one_traced_request(daemon: Callable[..., Daemon], env: dict[str, str], receiver: OtlpReceiver, http_app: HttpApp,
                       queue: Queue, tmp_path: Path) -> tuple[RecordedRequest, ReceivedSpan]:
    """A daemon with [tracing] delivers the queue's one message: the app's request and the delivery's span."""
    proc = daemon(["-c", str(traced_config(tmp_path, queue, {"type": "http", "url": f"{http_app.url}/"}))],
                  env=traced_env(env, receiver))
    (request,) = http_app.wait_for_requests(1, timeout=60)
    wait_until(lambda: receiver.named(f"{queue.name} process"), 30, message="no span")
    assert proc.stop(timeout=30) == 0
    (span,) = receiver.named(f"{queue.name} process")
    return request, span


def log_lines(proc: Daemon) -> list[dict[str, Any]]:
    return [json.loads(line) for line in proc.output().splitlines() if line.startswith("{")]


def test_a_delivery_is_a_consumer_span_in_the_producers_trace_and_the_app_is_its_child(
    daemon: Callable[..., Daemon], aws_env: dict[str, str], receiver: OtlpReceiver, http_app: HttpApp, sqs: Any,
    make_queue: Callable[..., Queue], tmp_path: Path,
) -> None:
    queue = make_queue()
    message_id = send(sqs, queue, "traced")
    request, span = one_traced_request(daemon, aws_env, receiver, http_app, queue, tmp_path)
    assert span.kind == "CONSUMER"
    assert (span.trace_id, span.parent_span_id) == (PRODUCER_TRACE_ID, PRODUCER_SPAN_ID)
    assert {key: span.attributes[key] for key in ("messaging.system", "messaging.operation.type",
                                                  "messaging.destination.name", "messaging.message.id",
                                                  "http.response.status_code", "workerless.receive_count")} == {
        "messaging.system": "aws_sqs", "messaging.operation.type": "process", "messaging.destination.name": queue.name,
        "messaging.message.id": message_id, "http.response.status_code": 200, "workerless.receive_count": 1}
    assert span.attributes["workerless.queue_wait_ms"] >= 0
    assert span.status_code != 2
    assert span.resource["service.name"] == "orders-worker"
    # the app's spans become the delivery's children
    assert parent_of_request(request.headers) == (PRODUCER_TRACE_ID, span.span_id)


def test_a_500_retried_and_a_dead_letter_are_error_spans_with_events_and_their_log_lines_carry_the_ids(
    daemon: Callable[..., Daemon], aws_env: dict[str, str], receiver: OtlpReceiver, http_app: HttpApp, sqs: Any,
    make_queue: Callable[..., Queue], tmp_path: Path,
) -> None:
    queue, dead = make_queue(), make_queue()
    answers = iter([500])
    http_app.respond = lambda request: (next(answers, 200) if request.body == b"retried" else 500, {}, b"")
    send(sqs, queue, "retried")
    send(sqs, queue, "doomed", traceparent=None)
    config = traced_config(tmp_path, queue, {"type": "http", "url": f"{http_app.url}/"}, error_visibility_timeout=1,
                           max_retries=2, dead_letter_queue=dead.name)
    proc = daemon(["-c", str(config)], env=traced_env(aws_env, receiver))
    wait_until(lambda: count_messages(sqs, queue.url) == 0 and count_messages(sqs, dead.url) == 1, 60,
               message=lambda: f"{count_messages(sqs, queue.url)} left, {count_messages(sqs, dead.url)} dead")
    wait_until(lambda: len(receiver.named(f"{queue.name} process")) >= 4, 30,
               message=lambda: f"{len(receiver.spans)} spans")
    assert proc.stop(timeout=30) == 0
    spans = receiver.named(f"{queue.name} process")
    retried = [span for span in spans if span.trace_id == PRODUCER_TRACE_ID]
    assert [span.status_code for span in retried] == [2, 0]  # ERROR, then unset (a success)
    failed = retried[0]
    assert failed.attributes["error.type"] == "HTTP 500" and failed.attributes["http.response.status_code"] == 500
    assert [name for name, _ in failed.events] == ["retry scheduled"]
    doomed = [span for span in spans if span.trace_id != PRODUCER_TRACE_ID]
    assert len(doomed) == 2 and all(span.parent_span_id == "" for span in doomed)  # a new trace per delivery
    assert [name for name, _ in doomed[-1].events] == ["dead-lettered"]
    warnings = [line for line in log_lines(proc) if line["level"] == "WARNING" and "outcome=failure" in line["message"]]
    assert warnings and all("trace_id" in line and "span_id" in line for line in warnings)
    ids = {(span.trace_id, span.span_id) for span in spans}
    assert all((line["trace_id"], line["span_id"]) in ids for line in warnings)


def test_the_sampler_and_limits_come_from_otel_variables_and_an_unsampled_delivery_still_carries_its_context(
    daemon: Callable[..., Daemon], aws_env: dict[str, str], receiver: OtlpReceiver, http_app: HttpApp, sqs: Any,
    make_queue: Callable[..., Queue], tmp_path: Path,
) -> None:
    """OTEL_TRACES_SAMPLER=parentbased_always_off: the producer's sampled message is recorded (its parent
    decides), within OTEL_SPAN_ATTRIBUTE_VALUE_LENGTH_LIMIT; an unsampled producer's message and a message
    without a context are not exported, yet the app gets a traceparent in the producer's trace (a new span id,
    flags 00), and the delivery's log lines carry those ids."""
    queue = make_queue()
    unsampled_producer = f"00-{PRODUCER_TRACE_ID[::-1]}-{PRODUCER_SPAN_ID}-00"
    sampled_id = send(sqs, queue, "sampled")
    send(sqs, queue, "unsampled", traceparent=unsampled_producer)
    send(sqs, queue, "no context", traceparent=None)
    http_app.respond = lambda request: (500 if request.body == b"unsampled" else 200, {}, b"")
    config = traced_config(tmp_path, queue, {"type": "http", "url": f"{http_app.url}/"}, max_retries=5,
                           error_visibility_timeout=600)
    env = traced_env(aws_env, receiver, OTEL_TRACES_SAMPLER="parentbased_always_off",
                     OTEL_SPAN_ATTRIBUTE_VALUE_LENGTH_LIMIT="8")
    proc = daemon(["-c", str(config)], env=env)
    requests = {request.body: request for request in http_app.wait_for_requests(3, timeout=60)}
    wait_until(lambda: receiver.named(f"{queue.name} process"), 30, message="no span")
    assert proc.stop(timeout=30) == 0
    (span,) = receiver.named(f"{queue.name} process")  # the sampled parent's only
    assert (span.trace_id, span.parent_span_id) == (PRODUCER_TRACE_ID, PRODUCER_SPAN_ID)
    assert span.attributes["messaging.message.id"] == sampled_id[:8]
    assert requests[b"sampled"].headers["traceparent"] == f"00-{PRODUCER_TRACE_ID}-{span.span_id}-01"
    version, trace_id, span_id, flags = requests[b"unsampled"].headers["traceparent"].split("-")
    assert (version, trace_id, flags) == ("00", PRODUCER_TRACE_ID[::-1], "00") and span_id != PRODUCER_SPAN_ID
    _, fresh_trace_id, _, fresh_flags = requests[b"no context"].headers["traceparent"].split("-")
    assert fresh_trace_id not in (PRODUCER_TRACE_ID, trace_id) and fresh_flags == "00"
    failed = [line for line in log_lines(proc) if line["level"] == "WARNING" and "outcome=failure" in line["message"]]
    assert failed and all((line["trace_id"], line["span_id"]) == (trace_id, span_id) for line in failed)


def test_a_message_with_only_awstraceheader_lands_in_its_xray_trace(
    daemon: Callable[..., Daemon], aws_env: dict[str, str], receiver: OtlpReceiver, http_app: HttpApp, sqs: Any,
    make_queue: Callable[..., Queue], tmp_path: Path,
) -> None:
    queue = make_queue()
    assert workerless_send([queue.name, "xray", f"--trace-header={TRACE}"], aws_env, tmp_path).returncode == 0
    request, span = one_traced_request(daemon, aws_env, receiver, http_app, queue, tmp_path)
    assert (span.trace_id, span.parent_span_id) == ("5759e988bd862e3fe1be46a994272793", "53995c3f42cd8ad8")
    assert parent_of_request(request.headers) == (span.trace_id, span.span_id)
    root = "Root=1-5759e988-bd862e3fe1be46a994272793"
    assert request.headers["x-amzn-trace-id"] == f"{root};Parent={span.span_id};Sampled=1"


def test_a_lambda_batch_is_one_span_linked_to_each_records_context(
    daemon: Callable[..., Daemon], aws_env: dict[str, str], receiver: OtlpReceiver, moto_server: MotoServer,
    moto_lambda_function: str, sqs: Any, make_queue: Callable[..., Queue], tmp_path: Path,
) -> None:
    queue = make_queue()
    producers = send_traced(sqs, queue.url)
    config = traced_config(tmp_path, queue, {"type": "lambda", "function": moto_lambda_function,
                                              "max_batching_window": 2})
    proc = daemon(["-c", str(config)], env=traced_env(aws_env, receiver))
    wait_until(lambda: count_messages(sqs, queue.url) == 0, 60)
    wait_until(lambda: receiver.named(f"{queue.name} process"), 30, message="no span")
    assert proc.stop(timeout=30) == 0
    (span,) = receiver.named(f"{queue.name} process")
    assert span.parent_span_id == "" and span.trace_id not in {trace_id for trace_id, _ in producers}
    assert sorted(span.links) == sorted(producers)
    assert span.attributes["messaging.batch.message_count"] == 3


@pytest.mark.parametrize("trouble", ["down", "slow"])
def test_a_collector_down_or_slow_changes_nothing_in_the_deliveries(
    trouble: str, daemon: Callable[..., Daemon], aws_env: dict[str, str], receiver: OtlpReceiver, http_app: HttpApp,
    sqs: Any, make_queue: Callable[..., Queue], tmp_path: Path,
) -> None:
    queue = make_queue()
    if trouble == "down":
        receiver.stop()
    else:
        receiver.delay = 30.0  # longer than the exporter's timeout
    for start in range(0, 40, 10):
        sqs.send_message_batch(QueueUrl=queue.url, Entries=[
            {"Id": str(index), "MessageBody": f"m{start + index}"} for index in range(10)])
    env = traced_env(aws_env, receiver, OTEL_BSP_MAX_QUEUE_SIZE="5", OTEL_BSP_MAX_EXPORT_BATCH_SIZE="5",
                     OTEL_EXPORTER_OTLP_TIMEOUT="2")
    proc = daemon(["-c", str(traced_config(tmp_path, queue, {"type": "http", "url": f"{http_app.url}/"}))], env=env)
    started = time.monotonic()
    http_app.wait_for_requests(40, timeout=60)
    wait_until(lambda: count_messages(sqs, queue.url) == 0, 30)
    print(f"40 deliveries in {time.monotonic() - started:.1f}s with the collector {trouble}")
    wait_until(lambda: "spans dropped" in proc.output(), 30, message=proc.output)
    assert proc.stop(timeout=30) == 0
    assert "delivered=40 failed=0" in proc.output()


def test_without_tracing_no_opentelemetry_is_imported(
    daemon: Callable[..., Daemon], aws_env: dict[str, str], receiver: OtlpReceiver, http_app: HttpApp, sqs: Any,
    make_queue: Callable[..., Queue], tmp_path: Path,
) -> None:
    """Python's own import log (-X importtime) of the real daemon, with and without [tracing]."""
    queue = make_queue()
    plain = build_config_file(tmp_path, name="plain.toml", queues=[{"name": queue.name}],
                              targets={"default": {"type": "http", "url": f"{http_app.url}/"}})
    for config, expected in ((plain, False),
                             (traced_config(tmp_path, queue, {"type": "http", "url": f"{http_app.url}/"}), True)):
        send(sqs, queue, "one")
        before = len(http_app.requests)
        proc = daemon(["-c", str(config)], env={**traced_env(aws_env, receiver), "PYTHONPROFILEIMPORTTIME": "1"})
        http_app.wait_for_requests(before + 1, timeout=60)
        assert proc.stop(timeout=30) == 0
        assert ("| opentelemetry" in proc.output()) is expected, config.name


def test_check_validates_tracing_and_says_when_the_extra_is_missing(tmp_path: Path, aws_env: dict[str, str]) -> None:
    import subprocess
    import sys

    def check(config_text: str, **env: str) -> subprocess.CompletedProcess[str]:
        path = tmp_path / "tracing.toml"
        path.write_text('[[queues]]\nname = "jobs"\n[targets.default]\ntype = "http"\nurl = "http://127.0.0.1:9/"\n'
                        + config_text)
        return subprocess.run([sys.executable, str(REPO_ROOT / "bin" / "workerless"), "check", "-c", str(path)],
                              env={**aws_env, **env}, capture_output=True, text=True, timeout=60)

    bad = check('[tracing]\nexporter = "zipkin"\n')
    assert bad.returncode == 2
    assert bad.stderr.strip().splitlines() == [f'{tmp_path / "tracing.toml"}: tracing.exporter: must be one of otlp '
                                              '(got "zipkin")']
    good = check('[tracing]\nexporter = "otlp"\n')
    assert good.returncode == 0, good.stderr
    assert "tracing: a span per delivery over OTLP/HTTP" in good.stderr
    # OpenTelemetry shadowed by an empty package of its name: as if the extra were not installed
    (tmp_path / "shadow" / "opentelemetry").mkdir(parents=True)
    (tmp_path / "shadow" / "opentelemetry" / "__init__.py").write_text("")
    missing = check('[tracing]\n', PYTHONPATH=str(tmp_path / "shadow") + os.pathsep + aws_env.get("PYTHONPATH", ""))
    assert missing.returncode == 2
    assert missing.stderr.strip().splitlines() == [
        f"{tmp_path / 'tracing.toml'}: tracing: needs OpenTelemetry, the optional extra otel: "
        "pip install 'workerless-gevent[otel]' (got \"opentelemetry.sdk is not installed\")"]


RAISING_SAMPLER = '''
from opentelemetry.sdk.trace import sampling


class RaisingSampler(sampling.Sampler):
    """A plugin sampler with a bug: every decision raises."""

    def should_sample(self, *args, **kwargs):
        raise RuntimeError("the sampler plugin broke")

    def get_description(self):
        return "RaisingSampler"


sampling._KNOWN_SAMPLERS["raising"] = RaisingSampler()
'''


def test_a_tracer_that_raises_leaves_deliveries_untraced_never_failed(
    daemon: Callable[..., Daemon], aws_env: dict[str, str], receiver: OtlpReceiver, http_app: HttpApp, sqs: Any,
    make_queue: Callable[..., Queue], tmp_path: Path,
) -> None:
    """Tracing fails open: a sampler plugin that raises at every decision (registered the way the SDK names its
    samplers, OTEL_TRACES_SAMPLER) costs the spans, not the deliveries; one WARNING says so."""
    plugin = tmp_path / "plugin"
    plugin.mkdir()
    (plugin / "sitecustomize.py").write_text(RAISING_SAMPLER)
    queue = make_queue()
    for index in range(3):
        send(sqs, queue, f"untraced-{index}")
    env = traced_env(aws_env, receiver, OTEL_TRACES_SAMPLER="raising", PYTHONPATH=str(plugin))
    proc = daemon(["-c", str(traced_config(tmp_path, queue, {"type": "http", "url": f"{http_app.url}/"}))], env=env)
    http_app.wait_for_requests(3, timeout=60)
    wait_until(lambda: count_messages(sqs, queue.url) == 0, 60, message=proc.output)
    assert proc.stop(timeout=30) == 0
    warnings = [line for line in log_lines(proc) if "tracing failed, delivering untraced" in line.get("message", "")]
    assert len(warnings) == 1, warnings
    assert "the sampler plugin broke" in warnings[0]["message"]
    assert not any(line.get("outcome") == "failure" for line in log_lines(proc))
    assert receiver.named(f"{queue.name} process") == []
