#!/usr/bin/env python3
"""The soak: many messages through the real daemon while it is killed and restarted, counting losses.

    python bench/soak.py                        100,000 messages (about 5 minutes at the default rate)
    python bench/soak.py --messages=20000       a shorter run
    python bench/soak.py --sqs-faults=0.2       the same with 20 % of SQS calls failing (bench/sqs_chaos.py)

A sink that fails --failure-rate of deliveries at random (soak_ends.py), bin/workerless sent SIGKILL or SIGTERM every
--min-restart to --max-restart s and started again at once (--no-kills: one daemon throughout), messages fed at --rate
while it runs. It ends once every message was answered 2xx and the queue is empty (or at --timeout) and reports lost
messages (must be 0), duplicates and their causes, each daemon's RSS and exit (soak_report.py; BENCHMARKS.md, "Soak").
--idempotency puts the queue's idempotency table on moto's DynamoDB, which copies the whole table on every
TransactWriteItems: keep such runs to about 1,000 messages at --rate=5 (--idempotency=standin has no such limit).
"""

from __future__ import annotations

import argparse
import random
import signal
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import harness
import report
import services
from dynamodb import MotoDynamo
from harness import RESULTS, Sqs, log, unique
from processes import make_daemon, proc_status_kb
from soak_ends import Feeder, Ledger, soak_app
from soak_report import Life, print_summary, soak_result
from sqs_chaos import RUNTIME_ACTIONS, SqsChaos


def soak_config(label: str, queue: str, sink_url: str, concurrency: int, visibility_timeout: int,
                table: str | None = None) -> Path:
    """With `table`, the queue's deliveries are idempotent by message id, remembered in that DynamoDB table."""
    keys = {"idempotency_key": "message_id"} if table else {}
    return harness.write_config(label, concurrency=concurrency, polling={"poll_for": 5}, tables={"idempotency": {
        "table": table}} if table else None, queues=[{"name": queue, "visibility_timeout": visibility_timeout,
                                                      "error_visibility_timeout": 1, **keys}],
                                target={"type": "http", "url": f"{sink_url}/work"})


def dynamodb_store(store: str | None, table: str | None) -> MotoDynamo | services.NodeService | None:
    """moto with the table made, or the stand-in (the daemon makes the table there), or none."""
    if store is None or table is None:
        return None
    if store == "moto":
        return MotoDynamo(table)
    return services.NodeService("dynamodb_standin", "dynamodb_standin.mjs")


class Soak:
    def __init__(self, options: argparse.Namespace) -> None:
        self.options = options
        self.rng = random.Random(options.seed)
        self.run_id = unique("soak")
        services.ensure_fauxqs()
        self.fauxqs = services.NodeService("fauxqs", "fauxqs_server.mjs")
        self.sqs = Sqs(self.fauxqs.url)
        self.url = self.sqs.create(self.run_id)
        # The daemon's endpoint: fauxqs itself, or the fault proxy in front of it.
        self.chaos = SqsChaos(self.fauxqs.port, share=options.sqs_faults, seed=options.seed,
                              actions=tuple(options.sqs_fault_actions.split(","))) if options.sqs_faults else None
        self.endpoint = self.chaos.url if self.chaos is not None else self.fauxqs.url
        self.ledger = Ledger(options.failure_rate, options.seed)
        self.sink = soak_app(self.ledger, options.sink_delay_ms, options.seed)
        self.table = f"{self.run_id}-idempotency" if options.idempotency else None
        self.dynamodb = dynamodb_store(options.idempotency, self.table)
        self.config = soak_config(self.run_id, self.run_id, self.sink.url,
                                  options.concurrency, options.visibility_timeout, self.table)
        self.lives: list[Life] = []

    def close(self) -> None:
        for life in self.lives:
            if life.worker is not None and life.worker.poll() is None:
                life.worker.kill()
        self.sink.stop()
        if self.chaos is not None:
            self.chaos.stop()
        self.sqs.delete(self.url)
        self.fauxqs.stop()
        if self.dynamodb is not None:
            self.dynamodb.stop()

    def start_life(self) -> Life:
        index = len(self.lives)
        label = f"{self.run_id}-{index}"
        launched = time.monotonic()
        env = {"AWS_ENDPOINT_URL_DYNAMODB": self.dynamodb.url} if self.dynamodb is not None else {}
        worker = make_daemon(label, self.endpoint, self.config, tuple(self.options.daemon_arg), env).start()
        worker.wait_started(timeout=60)
        life = Life(index, label, time.monotonic(), launched=launched, delivered_at_start=self.ledger.delivered(),
                    worker=worker)
        self.lives.append(life)
        return life

    def end_life(self, life: Life, how: str) -> None:
        worker = life.worker
        assert worker is not None
        life.rss_end_kb = proc_status_kb(worker.pid, "VmRSS") or life.rss_end_kb
        signum = signal.SIGKILL if how == "SIGKILL" else signal.SIGTERM
        signalled = life.signalled = time.monotonic()
        worker.signal(signum)
        code = worker.wait(30)
        if code is None:
            log(f"soak: {life.label} ignored {how} for 30 s; killing it")
            worker.kill()
            code = worker.exit_code
        life.ended_by, life.exit_code = how, code
        life.seconds = time.monotonic() - life.started
        life.stop_seconds = time.monotonic() - signalled if signum == signal.SIGTERM else None
        life.delivered_at_end = self.ledger.delivered()

    def is_done(self, feeder: Feeder) -> bool:
        total = self.options.messages
        return feeder.sent >= total and self.ledger.delivered() >= total and self.sqs.left(self.url) == 0

    def choose_signal(self) -> str:
        """SIGKILL or SIGTERM at random, but never three of a kind in a row, so short runs see both."""
        recent = [life.ended_by for life in self.lives[-3:-1]]
        if len(recent) == 2 and recent[0] == recent[1] and recent[0] in ("SIGKILL", "SIGTERM"):
            return "SIGTERM" if recent[0] == "SIGKILL" else "SIGKILL"
        return self.rng.choice(["SIGKILL", "SIGTERM"])

    def run(self) -> dict[str, Any]:
        options = self.options
        feeder = Feeder(self.sqs, self.url, options.messages, options.rate, self.run_id)
        started = time.monotonic()
        feeder.start()
        life = self.start_life()
        next_signal = self.next_signal_at()
        last_report = time.monotonic()
        deadline = started + options.timeout
        while True:
            time.sleep(0.25)
            now = time.monotonic()
            worker = life.worker
            assert worker is not None
            if feeder.error is not None:
                raise RuntimeError(f"feeding failed: {feeder.error!r}")
            if life.rss_warm_kb is None and now - life.started >= options.warmup:
                life.rss_warm_kb = proc_status_kb(worker.pid, "VmRSS")
            life.rss_end_kb = proc_status_kb(worker.pid, "VmRSS") or life.rss_end_kb
            if worker.poll() is not None:
                log(f"soak: {life.label} exited by itself with {worker.exit_code}; see {worker.log_path}")
                life.ended_by, life.exit_code, life.seconds = "crashed", worker.exit_code, now - life.started
                life = self.start_life()
                continue
            if now - last_report >= 10:
                last_report = now
                faults = f", sqs faults {self.chaos.report()['faults_total']}" if self.chaos is not None else ""
                log(f"soak: {now - started:5.0f}s fed {feeder.sent}/{options.messages}, "
                    f"succeeded {self.ledger.delivered()}, restarts {len(self.lives) - 1}, "
                    f"rss {life.rss_end_kb} kB{faults}")
            if self.is_done(feeder) or now > deadline:
                break
            if now >= next_signal:
                how = self.choose_signal()
                self.end_life(life, how)
                log(f"soak: {life.label} {how} after {life.seconds:.0f}s -> exit {life.exit_code}")
                life = self.start_life()
                next_signal = self.next_signal_at()
        finished = time.monotonic()
        self.end_life(life, "final SIGTERM")
        return soak_result(self, started, finished, feeder)

    def next_signal_at(self) -> float:
        if not self.options.kills:
            return float("inf")
        return time.monotonic() + self.rng.uniform(self.options.min_restart, self.options.max_restart)

def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--messages", type=int, default=100_000)
    parser.add_argument("--rate", type=float, default=350.0, help="messages fed per second; 0 loads all first")
    parser.add_argument("--failure-rate", type=float, default=0.10)
    parser.add_argument("--concurrency", type=int, default=20)
    parser.add_argument("--sink-delay-ms", type=float, default=5.0, help="mean time the sink takes per delivery")
    parser.add_argument("--visibility-timeout", type=int, default=10)
    parser.add_argument("--min-restart", type=float, default=20.0)
    parser.add_argument("--max-restart", type=float, default=40.0)
    parser.add_argument("--warmup", type=float, default=8.0, help="seconds after a start before RSS is taken")
    parser.add_argument("--seed", type=int, default=2024)
    parser.add_argument("--timeout", type=float, default=3600.0)
    parser.add_argument("--daemon-arg", action="append", default=[], help="extra bin/workerless argument")
    parser.add_argument("--sqs-faults", type=float, default=0.0,
                        help="share of the daemon's SQS calls that fail (0: no fault proxy)")
    parser.add_argument("--sqs-fault-actions", default=",".join(RUNTIME_ACTIONS),
                        help="comma-separated SQS actions that get faults (default: every call a running daemon makes)")
    parser.add_argument("--kills", action=argparse.BooleanOptionalAction, default=True,
                        help="SIGKILL/SIGTERM and restart the daemon every --min-restart to --max-restart s")
    parser.add_argument("--idempotency", nargs="?", const="moto", choices=("moto", "standin"),
                        help='idempotency_key = "message_id" on the queue, its table on moto\'s DynamoDB '
                             "(or bench/dynamodb_standin.mjs)")
    parser.add_argument("--json", type=Path, default=RESULTS / "soak-latest.json")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    options = parse_args(argv)
    soak = Soak(options)
    try:
        result = soak.run()
    finally:
        soak.close()
    report.write_results(str(options.json), result)
    print_summary(result)
    log(f"  written to {options.json}")
    healthy = result["lost"] == 0 and result["left_in_queue"] == 0 and result["sigterm_exit_codes_all_0"]
    return 0 if healthy and not result["timed_out"] else 1


if __name__ == "__main__":
    sys.exit(main())
