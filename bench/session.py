"""The running bench: its settings, the node services and workers it started, and one backlog run.

Every scenario (bench/scenarios.py, bench/polling.py, bench/scale.py) is a function of a Bench: it
creates queues through `bench.sqs`, resets `bench.sink`, starts workers with `bench.worker` (so
`close` can stop them) and returns its figures.
"""

from __future__ import annotations

import os
import time
from typing import Any

import harness
import scale
from harness import (DynamoStandIn, Idempotent, OtlpSink, Proxy, Sink, Sqs, Traced, Worker, make_baseline, make_daemon,
                     spread, unique)


class Settings:
    def __init__(self, quick: bool, runs: int | None, latency_messages: int | None = None) -> None:
        self.quick = quick
        self.runs = runs or (1 if quick else 3)
        self.throughput_messages = 1000 if quick else 5000
        self.slow_messages = 500 if quick else 2000
        self.slow_delay_ms = 20
        self.request_messages = 500 if quick else 2000
        self.idle_window = 6.0 if quick else 30.0
        self.idle_poll_for = 2
        self.wake_tries = 5 if quick else 20
        self.wake_poll_for = 20
        self.memory_delay_ms = 500  # long enough that every slot is busy even at concurrency 500
        # c=1000: 10 messages per slot, so that the baseline's slots (10 per receive) are all busy too
        self.memory_messages = {50: 150, 500: 1500, 1000: 3000} if quick else {50: 500, 500: 5000, 1000: 10000}
        self.priority_low = 500 if quick else 2000
        self.priority_high = 50 if quick else 200
        self.priority_delay_ms = 5
        self.priority_concurrency = 10
        self.latency_messages = latency_messages or (5000 if quick else 50000)
        self.latency_rtts_ms = (0, 10, 30)
        self.latency_concurrency = 50
        self.scale = scale.ScaleSettings(quick)


class Bench:
    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        harness.ensure_fauxqs()
        self.fauxqs = harness.Fauxqs()
        self.sink = Sink()
        self.sqs = Sqs(self.fauxqs.direct_url)  # setup never waits for the round trip the workers get
        self.scale_settings = settings.scale
        self._proxy: Proxy | None = None
        self._dynamodb: DynamoStandIn | None = None
        self._otlp: OtlpSink | None = None
        self.workers: list[Worker] = []

    @property
    def proxy(self) -> Proxy:
        if self._proxy is None:
            self._proxy = Proxy(self.fauxqs.port)
        return self._proxy

    @property
    def dynamodb(self) -> DynamoStandIn:
        """The DynamoDB stand-in of the idempotency scenario, started on first use."""
        if self._dynamodb is None:
            self._dynamodb = DynamoStandIn()
        return self._dynamodb

    @property
    def otlp(self) -> OtlpSink:
        """The OTLP/HTTP collector of the tracing scenario, started on first use."""
        if self._otlp is None:
            self._otlp = OtlpSink()
        return self._otlp

    def drop_queues(self, names: list[str], urls: list[str]) -> None:
        """A scenario's queues gone from fauxqs, and from its request counts."""
        for url in urls:
            self.sqs.delete(url)
        for name in names:
            self.fauxqs.forget(name)

    def close(self) -> None:
        for worker in self.workers:
            if worker.exit_code is None:
                worker.kill()
        for service in (self._proxy, self._dynamodb, self._otlp, self.sink, self.fauxqs):
            if service is not None:
                service.stop()

    def worker(self, kind: str, label: str, *, endpoint: str | None = None, queues: list[str], concurrency: int,
               poll_for: int = 1, max_messages: int | None = None, drain: bool = False,
               max_connections: int | None = None, lambda_function: str | None = None,
               idempotent: Idempotent | None = None, traced: Traced | None = None,
               target_keys: dict[str, Any] | None = None) -> Worker:
        endpoint = endpoint or self.fauxqs.url
        if kind == "daemon":
            extra: list[str] = []
            if max_messages:
                extra.append(f"--max-messages={max_messages}")
            if drain:
                extra.append("--drain")
            worker = make_daemon(label, endpoint, queues=queues, sink_url=self.sink.url, concurrency=concurrency,
                                 poll_for=poll_for, max_connections=max_connections, extra=tuple(extra),
                                 lambda_function=lambda_function,  # Invoke goes to the sink (bench/sink.mjs)
                                 lambda_endpoint=self.sink.url if lambda_function else None,
                                 idempotent=idempotent, traced=traced, target_keys=target_keys)
        else:
            if idempotent is not None or traced is not None or target_keys:
                raise ValueError("the plain baseline has no idempotent delivery, no tracing and no target keys")
            worker = make_baseline(label, endpoint, queues=queues, sink_url=self.sink.url, concurrency=concurrency,
                                   poll_for=poll_for, max_messages=max_messages)
        self.workers.append(worker)
        return worker.start()

    def backlog_run(self, kind: str, label: str, *, concurrency: int, messages: int, delay_ms: float,
                    max_connections: int | None = None, lambda_function: str | None = None,
                    idempotent: Idempotent | None = None, traced: Traced | None = None,
                    target_keys: dict[str, Any] | None = None) -> dict[str, Any]:
        """Load a backlog, start the worker, sample until the sink has seen every message (a batch POST counts
        its messages: bench/sink.mjs)."""
        name = unique(label)
        url = self.sqs.create(name)
        self.sqs.send_many(url, messages, "bulk")
        self.sink.reset(delay_ms)
        worker = self.worker(kind, label, queues=[name], concurrency=concurrency, max_messages=messages,
                             max_connections=max_connections, lambda_function=lambda_function,
                             idempotent=idempotent, traced=traced, target_keys=target_keys)
        helper_cpu = self._sample_until_delivered(worker, messages)
        code = worker.wait(30)
        if code is None:
            code = worker.stop()
        stats = self.sink.stats()  # after the exit, so the last answers of a slow sink are in
        left = self.sqs.left(url)  # delivered but never deleted: SQS would deliver them again
        self.sqs.delete(url)
        by_action = self.fauxqs.requests(name)  # the worker's own requests, counted by fauxqs
        self.fauxqs.forget(name)
        delivered = stats["count"]
        if delivered < messages:
            raise RuntimeError(f"{label}: only {delivered}/{messages} delivered (exit {code}); "
                               f"see {worker.log_path}")
        # first arrival to last answer: with a slow sink the last wave's wait counts too
        span_s = ((stats["last_done"] or stats["last"]) - stats["first"]) / 1000
        return {
            "messages": delivered,
            "msgs_per_s": delivered / span_s if span_s > 0 else None,
            **cpu_figures(worker, messages, helper_cpu),
            "peak_rss_mb": worker.peak_rss_mb(),
            "peak_tree_rss_mb": worker.peak_tree_rss_mb(),
            "sink_max_in_flight": stats["max_in_flight"],
            "sink_posts": stats.get("posts"),
            "sink_mean_held_ms": stats["mean_held_ms"],
            "sqs_requests": sum(by_action.values()),
            "sqs_requests_per_msg": sum(by_action.values()) / max(1, delivered),
            "sqs_by_action": by_action,
            "left_in_queue": left,
            "exit_code": code,
        }

    def idle_run(self, kind: str, label: str, *, concurrency: int, seconds: float = 3.0) -> float | None:
        """The process tree's RSS in MB once started on an empty queue and idle for `seconds` (the last of
        samples every 100 ms): the figure a drain's peak is compared with."""
        name = unique(label)
        url = self.sqs.create(name)
        worker = self.worker(kind, label, queues=[name], concurrency=concurrency)
        try:
            worker.wait_started()
            deadline = time.monotonic() + seconds
            while time.monotonic() < deadline:
                worker.sample(None)
                time.sleep(0.1)
            return (worker.samples[-1].tree_kb or 0) / 1024 or None
        finally:
            worker.stop()
            self.sqs.delete(url)
            self.fauxqs.forget(name)

    def _sample_until_delivered(self, worker: Worker, messages: int) -> list[tuple[float | None, ...]]:
        """Sample the worker until the sink has every message; the CPU of fauxqs, the sink and this runner (its
        sampling) at the first delivery and at the end, each with the time (last)."""
        deadline = time.monotonic() + 60 + messages / 50
        helpers = (self.fauxqs.pid, self.sink.pid, os.getpid())
        helper_cpu: list[tuple[float | None, ...]] = []
        while True:
            sample = worker.sample(self.sink)
            if sample.count > 0 and not helper_cpu:
                helper_cpu.append((*(harness.proc_cpu_seconds(pid) for pid in helpers), time.monotonic()))
            if sample.count >= messages or worker.poll() is not None or time.monotonic() > deadline:
                break
            time.sleep(0.01)
        helper_cpu.append((*(harness.proc_cpu_seconds(pid) for pid in helpers), time.monotonic()))
        return helper_cpu


def cpu_figures(worker: Worker, messages: int, helper_cpu: list[tuple[float | None, ...]]) -> dict[str, Any]:
    """CPU per message of the worker, and of fauxqs, the sink and the runner, from the first delivery to the last;
    the share of a core each used then (a helper near 100 % would be the bottleneck, not the worker)."""
    with_cpu = [s for s in worker.samples if s.cpu is not None]
    first = next(s for s in with_cpu if s.count > 0)
    last = next((s for s in with_cpu if s.count >= messages), with_cpu[-1])
    delivered = max(1, last.count - first.count)
    wall = last.at - first.at
    used = [(b - a) if a is not None and b is not None else None
            for a, b in zip(*helper_cpu)] if len(helper_cpu) == 2 else [None] * 4
    helper_us = [cpu / delivered * 1e6 if cpu is not None else None for cpu in used[:3]]
    helper_wall = used[3]
    share = [cpu / helper_wall if cpu is not None and helper_wall else None for cpu in used[:3]]
    return {"cpu_us_per_msg": (last.cpu - first.cpu) / delivered * 1e6,
            "cpu_share_of_one_core": (last.cpu - first.cpu) / wall if wall > 0 else None,
            "fauxqs_cpu_us_per_msg": helper_us[0], "sink_cpu_us_per_msg": helper_us[1],
            "runner_cpu_us_per_msg": helper_us[2], "fauxqs_cpu_share": share[0], "sink_cpu_share": share[1],
            "runner_cpu_share": share[2]}


def summarize(runs: dict[str, list[dict[str, Any]]], keys: tuple[str, ...]) -> dict[str, Any]:
    """Median [min-max] of each key for the daemon and the baseline, and the ratio of their medians."""
    out: dict[str, Any] = {}
    for kind, results in runs.items():
        out[kind] = {key: spread([r.get(key) for r in results]) for key in keys}
    for key in keys:
        daemon, baseline = out["daemon"][key]["median"], out["baseline"][key]["median"]
        if daemon is not None and baseline:
            out.setdefault("ratio_daemon_to_baseline", {})[key] = daemon / baseline
    return out
