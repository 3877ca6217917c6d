"""The running bench: its settings, the node services and workers it started, and one backlog run.

Every scenario is a function of a Bench: it creates queues through `bench.sqs` (or `bench.backlog`), starts workers
with `bench.worker` or `bench.daemon` (so `close` can stop them) and returns its figures.
"""

from __future__ import annotations

import os
import time
from typing import Any

import harness
import processes
import services
from harness import Idempotent, Sqs, Traced, unique
from processes import Worker, make_baseline
from services import DynamoStandIn, OtlpSink, Proxy, Sink


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

    def pick(self, full: Any, quick: Any) -> Any:
        return quick if self.quick else full


class Bench:
    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        services.ensure_fauxqs()
        self.fauxqs = services.Fauxqs()
        self.sink = Sink()
        self.sqs = Sqs(self.fauxqs.direct_url)  # setup never waits for the round trip the workers get
        self.on_demand: dict[str, Any] = {}
        self.workers: list[Worker] = []

    def service(self, name: str, make: Any) -> Any:
        """A node service only some scenarios need, started on first use."""
        if name not in self.on_demand:
            self.on_demand[name] = make()
        return self.on_demand[name]

    @property
    def proxy(self) -> Proxy:
        return self.service("proxy", lambda: Proxy(self.fauxqs.port))

    @property
    def dynamodb(self) -> DynamoStandIn:
        return self.service("dynamodb", DynamoStandIn)

    @property
    def otlp(self) -> OtlpSink:
        return self.service("otlp", OtlpSink)

    def close(self) -> None:
        for worker in self.workers:
            if worker.exit_code is None:
                worker.kill()
        for service in (*self.on_demand.values(), self.sink, self.fauxqs):
            service.stop()

    # ---------------------------------------------------------------- queues

    def backlog(self, label: str, messages: int, delay_ms: float = 0, tag: str = "bulk") -> tuple[str, str]:
        """A new queue holding `messages`, and the sink reset to answer after `delay_ms`."""
        name = unique(label)
        url = self.sqs.create(name)
        self.sqs.send_many(url, messages, tag)
        self.sink.reset(delay_ms)
        return name, url

    def finish(self, name: str, url: str) -> tuple[int, dict[str, int]]:
        """The messages left in a queue (received, never deleted) and the workers' requests on it; then it goes."""
        left = self.sqs.left(url)
        self.sqs.delete(url)
        by_action = self.fauxqs.requests(name)
        self.fauxqs.forget(name)
        return left, by_action

    def drop_queues(self, names: list[str], urls: list[str]) -> None:
        """A scenario's queues gone from fauxqs, and from its request counts."""
        for url in urls:
            self.sqs.delete(url)
        for name in names:
            self.fauxqs.forget(name)

    # ---------------------------------------------------------------- workers

    def daemon(self, label: str, *, queues: list[Any], concurrency: int, poll_for: int = 1,
               target: dict[str, Any] | None = None, polling: dict[str, Any] | None = None,
               tables: dict[str, dict[str, Any]] | None = None, env: dict[str, str] | None = None,
               extra: tuple[str, ...] = (), endpoint: str | None = None) -> Worker:
        """bin/workerless on a config written for it (not started); queues are names or [[queues]] tables."""
        config = harness.write_config(
            label, concurrency=concurrency, queues=[q if isinstance(q, dict) else {"name": q} for q in queues],
            target=target or {"type": "http", "url": f"{self.sink.url}/"}, tables=tables,
            polling=polling or {"poll_for": poll_for, "batch_size": 10})
        worker = processes.make_daemon(label, endpoint or self.fauxqs.url, config, extra, env)
        self.workers.append(worker)
        return worker

    def worker(self, kind: str, label: str, *, queues: list[str], concurrency: int, poll_for: int = 1,
               max_messages: int | None = None, drain: bool = False, endpoint: str | None = None,
               max_connections: int | None = None, lambda_function: str | None = None,
               idempotent: Idempotent | None = None, traced: Traced | None = None,
               target_keys: dict[str, Any] | None = None) -> Worker:
        """The daemon or the plain baseline on `queues`, started. With lambda_function the daemon's target is that
        function, Invoked at the sink (AWS_ENDPOINT_URL_LAMBDA, which wins over AWS_ENDPOINT_URL)."""
        if kind == "baseline":
            if idempotent is not None or traced is not None or target_keys:
                raise ValueError("the plain baseline has no idempotent delivery, no tracing and no target keys")
            worker = make_baseline(label, endpoint or self.fauxqs.url, queues=queues, sink_url=self.sink.url,
                                   concurrency=concurrency, poll_for=poll_for, max_messages=max_messages)
            self.workers.append(worker)
            return worker.start()
        target: dict[str, Any] = {"type": "http", "url": f"{self.sink.url}/"}
        if max_connections is not None:
            target["max_connections"] = max_connections
        env, tables, queue_keys = {}, {}, {}
        if lambda_function:
            target = {"type": "lambda", "function": lambda_function, "batch_size": 1, "timeout": 60}
            env["AWS_ENDPOINT_URL_LAMBDA"] = self.sink.url
        if idempotent is not None:
            tables["idempotency"], queue_keys = {"table": idempotent.table}, {"idempotency_key": idempotent.key}
            env["AWS_ENDPOINT_URL_DYNAMODB"] = idempotent.dynamodb_url
        if traced is not None:
            tables["tracing"] = {"exporter": "otlp"}
            env.update(traced.variables())
        extra = [f"--max-messages={max_messages}"] if max_messages else []
        extra += ["--drain"] if drain else []
        return self.daemon(label, queues=[{"name": name, **queue_keys} for name in queues], concurrency=concurrency,
                           poll_for=poll_for, target={**target, **(target_keys or {})}, tables=tables, env=env,
                           extra=tuple(extra), endpoint=endpoint).start()

    def backlog_run(self, kind: str, label: str, *, concurrency: int, messages: int, delay_ms: float,
                    **options: Any) -> dict[str, Any]:
        """Load a backlog, start the worker, sample until the sink has seen every message (a batch POST counts
        its messages: bench/sink.mjs); rate, CPU, memory and requests."""
        name, url = self.backlog(label, messages, delay_ms)
        worker = self.worker(kind, label, queues=[name], concurrency=concurrency, max_messages=messages, **options)
        helper_cpu = self._sample_until_delivered(worker, messages)
        code = worker.wait(30)
        if code is None:
            code = worker.stop()
        stats = self.sink.stats()  # after the exit, so the last answers of a slow sink are in
        left, by_action = self.finish(name, url)
        delivered = stats["count"]
        if delivered < messages:
            raise RuntimeError(f"{label}: only {delivered}/{messages} delivered (exit {code}); see {worker.log_path}")
        # first arrival to last answer: with a slow sink the last wave's wait counts too
        span_s = ((stats["last_done"] or stats["last"]) - stats["first"]) / 1000
        return {"messages": delivered, "msgs_per_s": delivered / span_s if span_s > 0 else None,
                **cpu_figures(worker, messages, helper_cpu), "peak_rss_mb": worker.peak_rss_mb(),
                "peak_tree_rss_mb": worker.peak_tree_rss_mb(), "sink_max_in_flight": stats["max_in_flight"],
                "sink_posts": stats.get("posts"), "sink_mean_held_ms": stats["mean_held_ms"],
                "sqs_requests": sum(by_action.values()),
                "sqs_requests_per_msg": sum(by_action.values()) / max(1, delivered), "sqs_by_action": by_action,
                "left_in_queue": left, "exit_code": code}

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
            self.drop_queues([name], [url])

    def _sample_until_delivered(self, worker: Worker, messages: int) -> list[tuple[float | None, ...]]:
        """Sample the worker until the sink has every message; the CPU of fauxqs, the sink and this runner (its
        sampling) at the first delivery and at the end, each with the time (last)."""
        deadline = time.monotonic() + 60 + messages / 50
        helpers = (self.fauxqs.pid, self.sink.pid, os.getpid())
        helper_cpu: list[tuple[float | None, ...]] = []
        while True:
            sample = worker.sample(self.sink)
            if sample.count > 0 and not helper_cpu:
                helper_cpu.append((*(processes.proc_cpu_seconds(pid) for pid in helpers), time.monotonic()))
            if sample.count >= messages or worker.poll() is not None or time.monotonic() > deadline:
                break
            time.sleep(0.01)
        helper_cpu.append((*(processes.proc_cpu_seconds(pid) for pid in helpers), time.monotonic()))
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
    us = [cpu / delivered * 1e6 if cpu is not None else None for cpu in used[:3]]
    share = [cpu / used[3] if cpu is not None and used[3] else None for cpu in used[:3]]
    return {"cpu_us_per_msg": (last.cpu - first.cpu) / delivered * 1e6,
            "cpu_share_of_one_core": (last.cpu - first.cpu) / wall if wall > 0 else None,
            "fauxqs_cpu_us_per_msg": us[0], "sink_cpu_us_per_msg": us[1], "runner_cpu_us_per_msg": us[2],
            "fauxqs_cpu_share": share[0], "sink_cpu_share": share[1], "runner_cpu_share": share[2]}
