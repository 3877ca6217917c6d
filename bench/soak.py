"""The soak kind: many messages through the real daemon while it is killed and restarted, counting losses.

The daemon is sent SIGKILL or SIGTERM every `restart_s` and started again at once (`kills` False: one daemon
throughout), an app fails `failure_rate` of deliveries at random, messages are fed at `rate` meanwhile; the run ends
once every message was answered 2xx and the queue is empty (or at `timeout_s`): lost messages (must be 0),
duplicates and when their answers came, each daemon's RSS and exit. `sqs_faults`: that share of the daemon's SQS
calls fail (bench/fauxqs_server.mjs /_bench/faults); `idempotency`: an idempotency key, its table on the stand-in or
on moto ("moto", which copies the whole table on every TransactWriteItems: keep it to about 1,000 messages at 5/s)."""

from __future__ import annotations

import random
import signal
import threading
import time
from typing import Any

import harness
from fleet import MotoDynamo
from flow_app import App
from harness import log, unique
from processes import make_daemon, proc_status_kb
from session import Bench
from shapes import Row

FAULT_ACTIONS = "ReceiveMessage,DeleteMessageBatch,ChangeMessageVisibilityBatch,SendMessage,SendMessageBatch"

def tally(app: App, total: int, started: float) -> dict[str, Any]:
    """What the app saw: deliveries, 2xx answers by message number (lost, duplicated), failures and their retries."""
    with app.lock:
        requests = sorted(app.requests, key=lambda r: r.arrived)
    answers: dict[int, list[float]] = {}
    failed: set[int] = set()
    retried = 0
    for r in requests:
        retried += r.number in failed
        answers.setdefault(r.number, []).append(r.answered) if r.status == 200 else failed.add(r.number)
    return {"deliveries": len(requests), "distinct_succeeded": len(answers),
            "lost": total - len([n for n in answers if 0 <= n < total]),
            "duplicates": sum(1 for times in answers.values() if len(times) > 1),
            "duplicate_deliveries": sum(len(times) - 1 for times in answers.values()),
            "failed_deliveries": sum(1 for r in requests if r.status == 500), "redeliveries_after_failure": retried,
            "unexpected_bodies": sum(1 for r in requests if r.number < 0 or r.number >= total),
            "duplicate_answers_s": {n: [round(at - started, 3) for at in times] for n, times in answers.items()
                                    if len(times) > 1}}

def succeeded(app: App) -> int:
    return len({r.number for r in app.ok()})

def feed(bench: Bench, url: str, total: int, rate: float, fed: list[Any]) -> None:
    """Messages 0..total-1 in batches of 10 at `rate` a second (0: at once); fed[0] counts them, fed[1] an error."""
    started = time.monotonic()
    try:
        for first in range(0, total, 10):
            time.sleep(max(0.0, first / rate - (time.monotonic() - started)) if rate else 0)
            bench.sqs.send_batch(url, first, min(10, total - first), "soak")
            fed[0] += min(10, total - first)
    except Exception as error:  # noqa: BLE001 - reported by the run
        fed[1] = error

class Lives:
    """The daemons of one soak, one after the other: started, signalled, their RSS and exits."""

    def __init__(self, bench: Bench, config: Any, env: dict[str, str], seed: int) -> None:
        self.bench, self.config, self.env, self.rng = bench, config, env, random.Random(seed)
        self.lives: list[dict[str, Any]] = []

    def start(self, label: str) -> dict[str, Any]:
        launched = time.monotonic()
        worker = make_daemon(f"{label}-{len(self.lives)}", self.bench.fauxqs.url, self.config, (), self.env).start()
        self.bench.workers.append(worker)
        worker.wait_started(timeout=60)
        self.lives.append(life := {"label": worker.label, "launched": launched, "started": time.monotonic(),
                                   "worker": worker, "ended_by": "", "signalled": None, "rss_warm_kb": None})
        return life

    def end(self, life: dict[str, Any], how: str) -> None:
        worker = life["worker"]
        life["rss_end_kb"] = proc_status_kb(worker.pid, "VmRSS") or life.get("rss_end_kb")
        life["signalled"] = signalled = time.monotonic()
        worker.signal(signal.SIGKILL if how == "SIGKILL" else signal.SIGTERM)
        if worker.wait(30) is None:
            log(f"soak: {life['label']} ignored {how} for 30 s; killing it")
            worker.kill()
        life.update(ended_by=how, exit_code=worker.exit_code, seconds=time.monotonic() - life["started"],
                    stop_seconds=time.monotonic() - signalled if how != "SIGKILL" else None)

    def choose(self) -> str:
        """SIGKILL or SIGTERM at random, but never three of a kind in a row, so short runs see both."""
        recent = [life["ended_by"] for life in self.lives[-3:-1]]
        if len(recent) == 2 and recent[0] == recent[1]:
            return "SIGTERM" if recent[0] == "SIGKILL" else "SIGKILL"
        return self.rng.choice(["SIGKILL", "SIGTERM"])

    def figures(self, started: float) -> dict[str, Any]:
        lives = self.lives
        warm = next((life["rss_warm_kb"] for life in lives if life["rss_warm_kb"]), None)
        end = lives[-1].get("rss_end_kb")
        growth = [life["rss_end_kb"] / life["rss_warm_kb"] for life in lives if life["rss_warm_kb"]
                  and life.get("rss_end_kb")]
        return {"daemons": len(lives), **{f"{how.lower()}s": sum(life["ended_by"] == how for life in lives)
                                           for how in ("SIGKILL", "SIGTERM")},
                "crashes": sum(life["ended_by"] == "crashed" for life in lives),
                "sigterm_exit_codes_all_0": all(life["exit_code"] == 0 for life in lives if "TERM" in life["ended_by"]),
                "sigterm_stop_seconds_max": max((life.get("stop_seconds") or 0 for life in lives), default=None),
                "rss_start_kb": warm, "rss_end_kb": end, "rss_end_vs_start": round(end / warm, 3) if warm and end
                else None, "rss_growth_within_a_life_max": round(max(growth), 3) if growth else None,
                "lives": [{k: round(v - started, 3) if k in ("launched", "started", "signalled") and v else v
                           for k, v in life.items() if k != "worker"} for life in lives]}

def run(bench: Bench, row: Row) -> dict[str, Any]:
    p = {k: v[bench.settings.quick] if isinstance(v, tuple) else v for k, v in row.params.items()}
    label, total = unique(row.name), p["messages"]
    url = bench.sqs.create(label)
    app = App(p["app_ms"] / 1000, failures=p["failure_rate"], seed=p["seed"], jitter=True)
    store, table = None, f"{label}-idempotency" if p.get("idempotency") else None
    if table:
        store = MotoDynamo(table) if p["idempotency"] == "moto" else bench.dynamodb
    bench.fauxqs.call("POST", f"faults?share={p.get('sqs_faults', 0)}&seed={p['seed']}&actions={FAULT_ACTIONS}")
    config = harness.write_config(label, concurrency=p["concurrency"], polling={"poll_for": 5}, target={
        "type": "http", "url": f"{app.url}/work"}, tables={"idempotency": {"table": table}} if table else None,
        queues=[{"name": label, "visibility_timeout": 10, "error_visibility_timeout": 1,
                 **({"idempotency_key": "message_id"} if table else {})}])
    lives, fed = Lives(bench, config, {"AWS_ENDPOINT_URL_DYNAMODB": store.url} if store else {}, p["seed"]), [0, None]
    threading.Thread(target=feed, args=(bench, url, total, p["rate"], fed), daemon=True).start()
    started = report_at = time.monotonic()
    life, next_signal = lives.start(label), time.monotonic() + lives.rng.uniform(*p["restart_s"])
    try:
        while time.monotonic() < started + p["timeout_s"]:
            time.sleep(0.25)
            now, worker = time.monotonic(), life["worker"]
            if fed[1] is not None:
                raise RuntimeError(f"feeding failed: {fed[1]!r}")
            if life["rss_warm_kb"] is None and now - life["started"] >= 8:
                life["rss_warm_kb"] = proc_status_kb(worker.pid, "VmRSS")
            life["rss_end_kb"] = proc_status_kb(worker.pid, "VmRSS") or life.get("rss_end_kb")
            if worker.poll() is not None:
                log(f"soak: {life['label']} exited by itself with {worker.exit_code}; see {worker.log_path}")
                life.update(ended_by="crashed", exit_code=worker.exit_code, seconds=now - life["started"])
                life = lives.start(label)
            elif fed[0] >= total and succeeded(app) >= total and bench.sqs.left(url) == 0:
                break
            elif p["kills"] and now >= next_signal:
                lives.end(life, how := lives.choose())
                log(f"soak: {life['label']} {how} after {life['seconds']:.0f}s -> exit {life['exit_code']}")
                life, next_signal = lives.start(label), time.monotonic() + lives.rng.uniform(*p["restart_s"])
            if now >= report_at:
                report_at = now + 10
                log(f"soak: {now - started:5.0f}s fed {fed[0]}/{total}, succeeded {succeeded(app)}, "
                    f"restarts {len(lives.lives) - 1}, rss {life['rss_end_kb']} kB")
        finished = time.monotonic()
        lives.end(life, "final SIGTERM")
        left, faults = bench.sqs.left(url), bench.fauxqs.stats()["faults"]
    finally:
        bench.fauxqs.call("POST", "faults?share=0")
        app.stop()
        bench.drop_queues([label], [url])
        if isinstance(store, MotoDynamo):
            store.stop()
    return {"messages": total, "fed": fed[0], "seconds": round(finished - started, 1), "left_in_queue": left,
            "timed_out": succeeded(app) < total, **tally(app, total, started), **lives.figures(started),
            "sqs_faults": faults, "settings": p}
