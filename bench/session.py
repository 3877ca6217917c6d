"""The running bench: its settings, the services and workers it started, and one drain of a backlog by one Case.

Every kind of run is a function of (Bench, Row): it creates queues through `bench.sqs`, starts workers with
`bench.worker` or `bench.daemon` (so `close` can stop them) and returns the row's block of figures."""

from __future__ import annotations

import os
import time
from typing import Any

import harness
import processes
from harness import Sqs, unique
from processes import Worker, make_baseline
from services import Fauxqs, NodeService, Sink, ensure_fauxqs
from shapes import Case

class Settings:
    def __init__(self, quick: bool, runs: int | None, latency_messages: int | None = None) -> None:
        self.quick, self.runs, self.latency_messages = quick, runs or (1 if quick else 3), latency_messages

class Bench:
    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        ensure_fauxqs()
        self.fauxqs = Fauxqs()
        self.sink = Sink()
        self.sqs = Sqs(self.fauxqs.direct_url)  # setup never waits for the round trip the workers get
        self.on_demand: dict[str, Any] = {}
        self.workers: list[Worker] = []
        self.vs: Any = None  # run.py --vs: another checkout's bin/workerless

    def service(self, name: str, make: Any) -> Any:
        """A service only some rows need, started on first use."""
        if name not in self.on_demand:
            self.on_demand[name] = make()
        return self.on_demand[name]

    @property
    def dynamodb(self) -> NodeService:
        """bench/dynamodb_standin.mjs: idempotent delivery's DynamoDB calls, in memory, counted by table and action."""
        return self.service("dynamodb", lambda: NodeService("dynamodb_standin", "dynamodb_standin.mjs"))

    @property
    def otlp(self) -> NodeService:
        """bench/otlp_sink.mjs: an OTLP/HTTP collector counting export requests, their bytes and spans."""
        return self.service("otlp", lambda: NodeService("otlp_sink", "otlp_sink.mjs"))

    def close(self) -> None:
        for worker in self.workers:
            if worker.exit_code is None:
                worker.kill()
        for service in (*self.on_demand.values(), self.sink, self.fauxqs):
            service.stop()

    def messages(self, case: Case) -> int:
        return int(case.messages[self.settings.quick])

    def backlog(self, label: str, messages: int, delay_ms: float = 0, tag: str = "bulk",
                group: str | None = None) -> tuple[str, str]:
        """A new queue holding `messages`, and the sink reset to answer after `delay_ms`."""
        name = unique(label)
        url = self.sqs.create(name)
        self.sqs.send_many(url, messages, tag, group=group)
        self.sink.reset(delay_ms)
        return name, url

    def finish(self, name: str, url: str) -> tuple[int, dict[str, int]]:
        """What is left in a queue (received, never deleted) and the workers' requests on it; then the queue goes."""
        left, by_action = self.sqs.left(url), self.fauxqs.requests(name)
        self.drop_queues([name], [url])
        return left, by_action

    def drop_queues(self, names: list[str], urls: list[str]) -> None:
        """Queues gone from fauxqs, and from its request counts."""
        for url in urls:
            self.sqs.delete(url)
        for name in names:
            self.fauxqs.forget(name)

    def daemon(self, label: str, *, queues: list[Any], concurrency: int, poll_for: int = 1,
               target: dict[str, Any] | None = None, polling: dict[str, Any] | None = None,
               tables: dict[str, dict[str, Any]] | None = None, env: dict[str, str] | None = None,
               extra: tuple[str, ...] = ()) -> Worker:
        """bin/workerless on a config written for it (not started); queues are names or [[queues]] tables."""
        config = harness.write_config(
            label, concurrency=concurrency, queues=[q if isinstance(q, dict) else {"name": q} for q in queues],
            target=target or {"type": "http", "url": f"{self.sink.url}/"}, tables=tables,
            polling=polling or {"poll_for": poll_for, "batch_size": 10})
        self.workers.append(worker := processes.make_daemon(label, self.fauxqs.url, config, extra, env))
        return worker

    def worker(self, case: Case, label: str, queues: list[str], *, poll_for: int = 1, max_messages: int | None = None,
               table: str | None = None, traced: dict[str, str] | None = None, start: bool = True) -> Worker:
        """The case's worker on `queues`: the baseline, or the daemon as the case, `table` and `traced` say."""
        if case.worker == "baseline":
            worker = make_baseline(label, self.fauxqs.url, queues=queues, sink_url=self.sink.url,
                                   concurrency=case.concurrency, poll_for=poll_for, max_messages=max_messages)
            self.workers.append(worker)
            return worker.start() if start else worker
        target: dict[str, Any] = {"type": "http", "url": f"{self.sink.url}/", **case.target}
        env, tables, keys = dict(traced or {}), {}, dict(case.queue)
        if case.lambda_target:  # AWS_ENDPOINT_URL_LAMBDA wins over AWS_ENDPOINT_URL
            target = {"type": "lambda", "function": "bench-fn", "batch_size": 1, "timeout": 60}
            env["AWS_ENDPOINT_URL_LAMBDA"] = self.sink.url
        if table is not None:
            tables["idempotency"], keys["idempotency_key"] = {"table": table}, "message_id"
            env["AWS_ENDPOINT_URL_DYNAMODB"] = self.dynamodb.url
        if traced is not None:
            tables["tracing"] = {"exporter": "otlp"}
        extra = ("--drain",) if case.until_empty else (f"--max-messages={max_messages}",) if max_messages else ()
        worker = self.daemon(label, queues=[{"name": name, **keys} for name in queues], concurrency=case.concurrency,
                             poll_for=poll_for, target=target, tables=tables, env=env, extra=extra)
        return worker.start() if start else worker

    def drain(self, case: Case, label: str, messages: int, **options: Any) -> dict[str, Any]:
        """Load a backlog, start the worker, sample until the sink has it all: rate, CPU, memory, SQS requests."""
        name, url = self.backlog(label, messages, case.app_ms, group=case.group)
        worker = self.worker(case, label, [name], max_messages=None if case.until_empty else messages, **options)
        helper_cpu = self._sample_until_delivered(worker, messages)
        code = worker.wait(30)
        code = worker.stop() if code is None else code
        stats = self.sink.stats()  # after the exit, so the last answers of a slow sink are in
        left, by_action = self.finish(name, url)
        delivered = stats["count"]
        if delivered < messages:
            raise RuntimeError(f"{label}: only {delivered}/{messages} delivered (exit {code}); see {worker.log_path}")
        span_s = ((stats["last_done"] or stats["last"]) - stats["first"]) / 1000
        requests = sum(by_action.values())
        setup = sum(by_action.get(action, 0) for action in ("GetQueueUrl", "GetQueueAttributes"))
        return {"messages": delivered, "msgs_per_s": delivered / span_s if span_s > 0 else None,
                **cpu_figures(worker, messages, helper_cpu), "peak_rss_mb": worker.peak_rss_mb(),
                "peak_tree_rss_mb": worker.peak_tree_rss_mb(), "sink_max_in_flight": stats["max_in_flight"],
                "sink_posts": stats["posts"], "sink_mean_held_ms": stats["mean_held_ms"],
                "invocations": stats["invocations"], "sqs_requests": requests,
                "sqs_requests_per_msg": requests / max(1, delivered),
                "sqs_requests_per_msg_without_startup": (requests - setup) / max(1, delivered),
                "sqs_by_action": by_action, "left_in_queue": left, "exit_code": code, "worker": worker}

    def idle_tree_mb(self, case: Case, label: str, seconds: float = 3.0) -> float | None:
        """The process tree's RSS in MB once started on an empty queue and idle for `seconds`."""
        name = unique(label)
        url = self.sqs.create(name)
        worker = self.worker(case, label, [name])
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
        """Sample the worker until the sink has it all; the helpers' CPU at the first delivery and the end."""
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
    """CPU per message of the worker, fauxqs, the sink and the runner, first delivery to last; their core shares."""
    with_cpu = [s for s in worker.samples if s.cpu is not None]
    first = next(s for s in with_cpu if s.count > 0)
    last = next((s for s in with_cpu if s.count >= messages), with_cpu[-1])
    delivered, wall = max(1, last.count - first.count), last.at - first.at
    used = [(b - a) if a is not None and b is not None else None
            for a, b in zip(*helper_cpu)] if len(helper_cpu) == 2 else [None] * 4
    us = [cpu / delivered * 1e6 if cpu is not None else None for cpu in used[:3]]
    share = [cpu / used[3] if cpu is not None and used[3] else None for cpu in used[:3]]
    return {"cpu_us_per_msg": (last.cpu - first.cpu) / delivered * 1e6,
            "cpu_share_of_one_core": (last.cpu - first.cpu) / wall if wall > 0 else None,
            "fauxqs_cpu_us_per_msg": us[0], "sink_cpu_us_per_msg": us[1], "runner_cpu_us_per_msg": us[2],
            "fauxqs_cpu_share": share[0], "sink_cpu_share": share[1], "runner_cpu_share": share[2]}
