"""Flow control through the real daemon: caps seen at the app, a rate over a window, backpressure
that converges without dead letters, a Lambda batching window, and filters."""

from __future__ import annotations

import collections
import json
from pathlib import Path
from typing import Any, Callable

import gevent

from tests.e2e.helpers import http_get, send_batch
from tests.e2e.test_status_endpoints import samples
from tests.support import (Daemon, FakeLambda, HttpApp, Invocation, LambdaReply, Queue, build_config_file,
                           count_messages, lambda_result, status_url, wait_until)
from tests.support.http_app import RecordedRequest, Reply


def start(daemon: Callable[..., Daemon], env: dict[str, str], tmp_path: Path, **config: Any) -> Daemon:
    return daemon(["-c", str(build_config_file(tmp_path, **config))], env=env)


class Concurrency:
    """Per queue and overall, how many requests the app holds at once, at most."""

    def __init__(self, app: HttpApp, seconds: float, reply: Reply = (200, {}, b"")) -> None:
        self.now: collections.Counter[str] = collections.Counter()
        self.peak: collections.Counter[str] = collections.Counter()
        self.seconds = seconds
        self.reply = reply
        app.respond = self.respond

    def respond(self, request: RecordedRequest) -> Reply:
        queue = request.headers["x-aws-sqsd-queue"]
        for key in (queue, "all"):
            self.now[key] += 1
            self.peak[key] = max(self.peak[key], self.now[key])
        try:
            gevent.sleep(self.seconds)
        finally:
            for key in (queue, "all"):
                self.now[key] -= 1
        return self.reply


def test_queue_and_target_caps_hold_at_the_app_and_lower_queues_use_the_free_slots(
    daemon: Callable[..., Daemon], aws_env: dict[str, str], http_app: HttpApp,
    sqs: Any, make_queue: Callable[..., Queue], tmp_path: Path,
) -> None:
    exports, payments = make_queue(), make_queue()
    seen = Concurrency(http_app, 0.2)
    send_batch(sqs, exports.url, [f"e{i}" for i in range(40)])
    send_batch(sqs, payments.url, [f"p{i}" for i in range(40)])
    proc = start(daemon, aws_env, tmp_path, concurrency=10, polling={"poll_for": 1},
                 queues=[{"name": exports.name, "max_concurrency": 2}, {"name": payments.name}],
                 targets={"default": {"type": "http", "url": f"{http_app.url}/work", "max_concurrency": 5}})
    wait_until(lambda: len(http_app.requests) >= 80, 60, message=lambda: f"{len(http_app.requests)} of 80")
    wait_until(lambda: count_messages(sqs, exports.url) + count_messages(sqs, payments.url) == 0, 30)
    assert proc.stop(timeout=30) == 0
    assert len(http_app.requests) == 80
    assert seen.peak["all"] == 5  # the target's cap, reached and never passed
    assert seen.peak[exports.name] == 2  # the queue's cap inside it, although it is first in priority
    assert seen.peak[payments.name] >= 3  # the lower queue took the slots the capped one could not use


def test_a_rate_limit_bounds_every_10s_window_and_a_backlog_runs_at_the_rate(
    daemon: Callable[..., Daemon], aws_env: dict[str, str], http_app: HttpApp,
    sqs: Any, make_queue: Callable[..., Queue], tmp_path: Path,
) -> None:
    queue = make_queue()
    send_batch(sqs, queue.url, [str(i) for i in range(200)])
    proc = start(daemon, aws_env, tmp_path, concurrency=20, polling={"poll_for": 1},
                 queues=[{"name": queue.name}],
                 targets={"default": {"type": "http", "url": f"{http_app.url}/work", "rate_limit": 25}})
    wait_until(lambda: len(http_app.requests) >= 200, 60, message=lambda: f"{len(http_app.requests)} of 200")
    assert proc.stop(timeout=30) == 0
    arrivals = sorted(request.arrived for request in http_app.requests)
    for first in arrivals:
        assert sum(1 for moment in arrivals if first <= moment < first + 10) <= 25 * 10 + 25
    # Beyond one burst, the run is paced by the rate: (n - burst) deliveries need (n - burst) / rate seconds.
    rate = (len(arrivals) - 25) / (arrivals[-1] - arrivals[0])
    print(f"rate_limit 25/s: {rate:.2f}/s beyond the burst ({rate / 25:.3f} of the rate)")
    # The bound is the rate limit's own promise (5 % for arrival jitter); the floor is loose on purpose: a busy
    # test machine slows the daemon, and bench/flow.py measures the steady rate on a quiet one.
    assert 0.8 * 25 <= rate <= 1.05 * 25


def test_backpressure_converges_on_what_the_app_accepts_and_dead_letters_nothing(
    daemon: Callable[..., Daemon], aws_env: dict[str, str], http_app: HttpApp,
    sqs: Any, make_queue: Callable[..., Queue], tmp_path: Path,
) -> None:
    queue, dead = make_queue(), make_queue()
    capacity, busy_answers = 4, []
    accepted = [0]

    def respond(request: RecordedRequest) -> Reply:  # 4 at once; above that, 429 without Retry-After
        if accepted[0] >= capacity:
            busy_answers.append(request.arrived)
            return 429, {}, b"busy"
        accepted[0] += 1
        try:
            gevent.sleep(0.05)
        finally:
            accepted[0] -= 1
        return 200, {}, b""

    http_app.respond = respond
    bodies = [str(i) for i in range(300)]
    send_batch(sqs, queue.url, bodies)
    proc = start(daemon, aws_env, tmp_path, concurrency=20, polling={"poll_for": 1},
                 queues=[{"name": queue.name, "max_retries": 2, "error_visibility_timeout": 1,
                          "dead_letter_queue": dead.name}],
                 targets={"default": {"type": "http", "url": f"{http_app.url}/work"}})
    delivered = lambda: {r.body.decode() for r in http_app.requests if r.arrived not in set(busy_answers)}  # noqa: E731
    wait_until(lambda: len(delivered()) == 300, 120, message=lambda: f"{len(delivered())} of 300 delivered")
    wait_until(lambda: count_messages(sqs, queue.url) == 0, 30)
    assert proc.stop(timeout=30) == 0
    assert count_messages(sqs, dead.url) == 0  # an overload is not a failure: nothing dead-lettered
    requests = sorted(request.arrived for request in http_app.requests)
    later = [moment for moment in requests if moment >= requests[0] + 3]
    busy_later = [moment for moment in busy_answers if moment >= requests[0] + 3]
    print(f"backpressure: {len(busy_answers)} busy answers of {len(requests)}; after 3 s: "
          f"{len(busy_later)} of {len(later)}")
    assert len(busy_later) <= 0.35 * len(later)  # converged: the sawtooth around 4 costs a few 429s


def test_a_batching_window_fills_lambda_batches_beyond_one_receive(
    daemon: Callable[..., Daemon], aws_env: dict[str, str], fake_lambda: FakeLambda,
    sqs: Any, make_queue: Callable[..., Queue], tmp_path: Path,
) -> None:
    queue = make_queue()

    def fail_every_tenth(invocation: Invocation) -> LambdaReply:
        failed = [{"itemIdentifier": r["messageId"]} for r in invocation.payload["Records"]
                  if int(r["body"]) % 10 == 0 and r["attributes"]["ApproximateReceiveCount"] == "1"]
        return lambda_result({"batchItemFailures": failed})

    fake_lambda.respond = fail_every_tenth
    send_batch(sqs, queue.url, [str(i) for i in range(120)])
    proc = daemon(["-c", str(build_config_file(
        tmp_path, concurrency=2, polling={"poll_for": 1},
        queues=[{"name": queue.name, "error_visibility_timeout": 1}],
        targets={"default": {"type": "lambda", "function": "worker-fn", "batch_size": 50,
                             "max_batching_window": 2}}))],
        env={**aws_env, "AWS_ENDPOINT_URL_LAMBDA": fake_lambda.url})
    wait_until(lambda: count_messages(sqs, queue.url) == 0, 60, message=lambda: f"{count_messages(sqs, queue.url)} left")
    assert proc.stop(timeout=30) == 0
    sizes = [len(invocation.payload["Records"]) for invocation in fake_lambda.invocations]
    records = [r for invocation in fake_lambda.invocations for r in invocation.payload["Records"]]
    assert max(sizes) == 50 and all(size <= 50 for size in sizes), sizes  # several receives, one invoke
    first = collections.Counter(r["body"] for r in records if r["attributes"]["ApproximateReceiveCount"] == "1")
    again = collections.Counter(r["body"] for r in records if r["attributes"]["ApproximateReceiveCount"] != "1")
    assert set(first) == {str(i) for i in range(120)}
    assert set(again) == {str(i) for i in range(0, 120, 10)}  # batchItemFailures named exactly these


def test_a_filter_deletes_what_matches_nothing_undelivered_and_counts_it(
    daemon: Callable[..., Daemon], aws_env: dict[str, str], http_app: HttpApp,
    sqs: Any, make_queue: Callable[..., Queue], tmp_path: Path,
) -> None:
    queue = make_queue()
    bodies = [json.dumps({"kind": kind, "n": n}) for n, kind in enumerate(["order", "refund", "order", "audit"] * 5)]
    send_batch(sqs, queue.url, bodies + ["not json"])
    pattern = json.dumps({"body": {"kind": ["order"], "n": [{"numeric": ["<", 16]}]}})
    proc = start(daemon, aws_env, tmp_path, concurrency=4, polling={"poll_for": 1},
                 queues=[{"name": queue.name, "filter": pattern}],
                 targets={"default": {"type": "http", "url": f"{http_app.url}/work"}})
    wait_until(lambda: count_messages(sqs, queue.url) == 0, 30, message=lambda: f"{count_messages(sqs, queue.url)} left")
    assert proc.stop(timeout=30) == 0
    expected = {body for body in bodies if json.loads(body)["kind"] == "order" and json.loads(body)["n"] < 16}
    assert {request.body.decode() for request in http_app.requests} == expected and len(expected) == 8
    assert len(http_app.requests) == 8  # the other 13, the body that is not JSON among them, deleted undelivered


def test_the_limit_the_rate_and_the_counts_are_on_metrics_and_the_status_page(
    daemon: Callable[..., Daemon], aws_env: dict[str, str], http_app: HttpApp,
    sqs: Any, make_queue: Callable[..., Queue], tmp_path: Path,
) -> None:
    queue = make_queue()
    answers = iter([(429, {}, b"busy")] * 3)
    http_app.respond = lambda request: next(answers, (200, {}, b""))
    send_batch(sqs, queue.url, [json.dumps({"kind": "order"})] * 10 + [json.dumps({"kind": "audit"})] * 2)
    proc = start(daemon, aws_env, tmp_path, concurrency=6, polling={"poll_for": 1},
                 queues=[{"name": queue.name, "error_visibility_timeout": 0,
                          "filter": json.dumps({"body": {"kind": ["order"]}})}],
                 targets={"default": {"type": "http", "url": f"{http_app.url}/work", "max_concurrency": 6,
                                      "rate_limit": 5}},
                 tables={"status": {"listen": "127.0.0.1:0"}})
    url = status_url(proc, timeout=20)
    wait_until(lambda: json.loads(http_get(url + "/status")[2])["totals"]["Succeeded"] == 10, 30,
               message=lambda: f"{json.loads(http_get(url + '/status')[2])['totals']}")
    values = samples(http_get(url + "/metrics")[2])
    one = (("queue", queue.name),)
    assert 1 <= values[("workerless_target_limit", (("target", "default"),))] < 6  # shrunk by the 429s
    assert values[("workerless_target_in_flight", (("target", "default"),))] == 0
    assert values[("workerless_rate_limited_total", one)] >= 1  # 13 deliveries at 5/s: some waited
    assert values[("workerless_filtered_total", one)] == 2
    assert values[("workerless_throttled_total", one)] == 3 and values[("workerless_failed_total", one)] == 0
    (target,) = json.loads(http_get(url + "/status")[2])["targets"]
    assert (target["name"], target["max_concurrency"], target["rate_limit"]) == ("default", 6, 5.0)
    page = http_get(url + "/")[2]
    assert "<h2>Targets</h2>" in page and "5/s" in page and "limit now" in page
    assert proc.stop(timeout=20) == 0
