"""The fleet kinds: 1, 2 and 4 daemons on one backlog. `fleet` counts what a second and a fourth process add;
`fleet_limits` holds them under one fleet_max_concurrency (a [fleet] table on moto's DynamoDB, started here, each
daemon's /status fleet row sampled every 0.25 s)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import urllib.request
from typing import Any, Callable

from figures import interleave, middle_rate, spread, spreads
from harness import AWS_ENV, LOGS, ROOT, free_port, stop_process
from processes import Worker
from shapes import Row

Block = dict[str, Any]
PROCESSES = (1, 2, 4)
SETUP_ACTIONS = ("GetQueueUrl", "GetQueueAttributes")
KEYS = ("msgs_per_s", "msgs_per_s_first_to_last", "sqs_requests_per_msg", "sqs_requests_per_msg_without_startup",
        "duplicates")
MODES = ("shared", "per_process")
SAMPLE_SECONDS = 0.25
CAP, HOLD_MS, LEASE_SECONDS, TABLE = 8, 50.0, 6, "workerless-bench-fleet"
LIMIT_KEYS = ("msgs_per_s", "share_of_cap_ideal", "share_of_cap_ideal_at_measured_hold", "share_of_own_ideal",
              "peak_in_flight", "peak_over_cap", "dynamodb_per_minute_per_member_median",
              "dynamodb_per_minute_per_member_max", "mean_held_ms", "duplicates", "left_in_queue")

class MotoDynamo:
    """moto's server with a table keyed by `slot` (the fleet's and idempotency's key)."""

    def __init__(self, table: str) -> None:
        LOGS.mkdir(parents=True, exist_ok=True)
        self.url = f"http://127.0.0.1:{(port := free_port())}"
        self.log = open(LOGS / "moto.log", "wb")
        self.process = subprocess.Popen(
            [sys.executable, "-P", str(ROOT / "tests" / "support" / "moto_main.py"), "-H", "127.0.0.1", "-p",
             str(port)], stdin=subprocess.DEVNULL, stdout=self.log, stderr=subprocess.STDOUT,
            env={key: value for key, value in os.environ.items() if not key.startswith("AWS_")})
        deadline = time.monotonic() + 30
        while not self.is_up():
            if self.process.poll() is not None or time.monotonic() > deadline:
                self.stop()
                raise RuntimeError(f"moto server did not start; see {LOGS / 'moto.log'}")
            time.sleep(0.05)
        import boto3

        boto3.session.Session(aws_access_key_id=AWS_ENV["AWS_ACCESS_KEY_ID"], region_name="us-east-1",
                              aws_secret_access_key=AWS_ENV["AWS_SECRET_ACCESS_KEY"]).client(
            "dynamodb", endpoint_url=self.url).create_table(
            TableName=table, KeySchema=[{"AttributeName": "slot", "KeyType": "HASH"}],
            AttributeDefinitions=[{"AttributeName": "slot", "AttributeType": "S"}], BillingMode="PAY_PER_REQUEST")

    def is_up(self) -> bool:
        try:
            with urllib.request.urlopen(self.url + "/moto-api/config", timeout=5):
                return True
        except OSError:
            return False

    def stop(self) -> None:
        stop_process(self.process, 10)
        self.log.close()

def drain_together(bench: Any, label: str, processes: int, messages: int, delay_ms: float,
                   make: Callable[[str, str], Worker], wait: Callable[[list[Worker]], Any], drained: bool
                   ) -> tuple[dict[str, Any], Any, dict[str, int]]:
    """`processes` daemons started together on one backlog: the figures, what `wait` returned, the requests."""
    name, url = bench.backlog(label, messages, delay_ms)
    workers = [make(f"{label}-{index}", name) for index in range(processes)]
    for worker in workers:
        worker.start()
    try:
        waited = wait(workers)
    finally:  # with --drain each exits once the queue is empty; else it is stopped
        codes = [(worker.wait(30) if drained else None) for worker in workers]
        codes = [code if code is not None else worker.stop(30) for code, worker in zip(codes, workers)]
    arrivals = sorted(at for at, _ in bench.sink.events(0))
    left, by_action = bench.finish(name, url)
    return ({"msgs_per_s": middle_rate(arrivals), "deliveries": len(arrivals), "duplicates": len(arrivals) - messages,
             "left_in_queue": left, "exit_codes": codes, "first_to_last_s": (arrivals[-1] - arrivals[0]) / 1000},
            waited, by_action)

def fleet_run(bench: Any, label: str, processes: int, messages: int, delay_ms: float, concurrency: int
              ) -> dict[str, Any]:
    result, stats, by_action = drain_together(bench, label, processes, messages, delay_ms, drained=True,
        make=lambda name, queue: bench.daemon(name, queues=[queue], concurrency=concurrency, extra=("--drain",)),
        wait=lambda workers: bench.sink.wait(messages, timeout=60 + messages / 50))
    if stats["count"] < messages:
        raise RuntimeError(f"{label}: only {stats['count']}/{messages} delivered (exits {result['exit_codes']})")
    requests = sum(by_action.values())
    return {**result, "msgs_per_s_first_to_last": result["deliveries"] / result["first_to_last_s"],
            "sqs_requests_per_msg": requests / messages,
            "sqs_requests_per_msg_without_startup": (requests - sum(by_action.get(a, 0) for a in SETUP_ACTIONS))
            / messages, "sqs_by_action": by_action}

def fleet(bench: Any, row: Row) -> Block:
    """1, 2 and 4 daemons (--drain) on one backlog, app-bound and CPU-bound; middle-80 % rate over one process."""
    out: Block = {"processes": list(PROCESSES), "cpu_count": os.cpu_count(), "cases": {}}
    began = time.monotonic()
    for case, shape in row.params["cases"].items():
        shape = dict(shape)
        messages = shape.pop("messages")[bench.settings.quick]
        runs = interleave(bench.settings.runs, PROCESSES, lambda n, i: fleet_run(
            bench, f"fleet-{case}-p{n}-{i}", n, messages, **shape), lambda n, i, r: (
            f"fleet {case} {n} process(es) run {i + 1}: {r['msgs_per_s']:.0f} msg/s, {r['sqs_requests_per_msg']:.3f} "
            f"SQS requests/msg {r['sqs_by_action']}, {r['duplicates']} duplicates, {r['left_in_queue']} left"))
        block: Block = {"messages": messages, **shape, **{f"p{n}": spreads(runs[n], KEYS) for n in PROCESSES}}
        one = block["p1"]["msgs_per_s"]["median"]
        block["ratio_to_one"] = {f"p{n}": block[f"p{n}"]["msgs_per_s"]["median"] / one if one else None
                                 for n in PROCESSES}
        out["cases"][case] = block
    out["seconds"] = round(time.monotonic() - began, 1)
    return out

def sample(member: dict[str, Any], at: float) -> None:
    """Note the fleet row of a daemon's /status, if it is up and has one (a failed read is skipped)."""
    try:
        with urllib.request.urlopen(member["url"] + "/status", timeout=5) as response:
            rows = json.loads(response.read()).get("fleet", [])
    except (OSError, ValueError):
        return
    member["samples"] += [(at, rows[0]["dynamodb_requests"], rows[0]["share"])] if rows else []

def per_minute(samples: list[tuple[float, int, float]], start: float, end: float) -> float | None:
    """DynamoDB requests per minute between the first and the last sample inside [start, end]."""
    inside = [s for s in samples if start <= s[0] <= end]
    return (inside[-1][1] - inside[0][1]) / (inside[-1][0] - inside[0][0]) * 60 if len(inside) > 1 and inside[-1][
        0] > inside[0][0] else None

def busy_window(bench: Any, members: list[dict[str, Any]], messages: int, timeout: float) -> tuple[float, float]:
    """Sample the sink and every member's /status until the sink has every message; the busy window."""
    deadline, began = time.monotonic() + timeout, None
    while True:
        now, count = time.monotonic(), bench.sink.stats()["count"]
        began = began or (now if count > 0 else None)
        for member in members:
            sample(member, now)
        if count >= messages:
            return began or now, now
        if now > deadline or all(member["worker"].poll() is not None for member in members):
            raise RuntimeError(f"{count}/{messages} delivered in {timeout:.0f}s; see {members[0]['worker'].log_path}")
        time.sleep(SAMPLE_SECONDS)

def limit_run(bench: Any, dynamo: MotoDynamo, mode: str, processes: int, index: int) -> dict[str, Any]:
    """One backlog drained by `processes` daemons started together; figures from the sink, /status and moto."""
    label, shared, messages = f"flim-{mode}-p{processes}-{index}", mode == "shared", (3000, 1500)[bench.settings.quick]
    members: list[dict[str, Any]] = []

    def make(name: str, queue: str) -> Worker:
        tables = {"status": {"listen": f"127.0.0.1:{(port := free_port())}"}}
        if shared:
            tables["fleet"] = {"table": TABLE, "name": queue, "lease": LEASE_SECONDS}
        worker = bench.daemon(name, queues=[{"name": queue, "fleet_max_concurrency" if shared else "max_concurrency":
                                             CAP}], concurrency=CAP, tables=tables,
                              env={"AWS_ENDPOINT_URL_DYNAMODB": dynamo.url})
        members.append({"worker": worker, "url": f"http://127.0.0.1:{port}", "samples": []})
        return worker

    ideal = CAP / (HOLD_MS / 1000)
    result, (began, ended), _ = drain_together(
        bench, label, processes, messages, HOLD_MS, make, drained=False,
        wait=lambda workers: busy_window(bench, members, messages, 60 + 4 * messages / (ideal * (1 if shared else
                                                                                                    processes))))
    stats = bench.sink.stats()
    result.pop("first_to_last_s")
    per_member = [v for v in (per_minute(m["samples"], began, ended) for m in members) if v is not None]
    rate, held = result["msgs_per_s"] or 0.0, stats["mean_held_ms"] or HOLD_MS
    return {**result, "peak_in_flight": stats["max_in_flight"], "mean_held_ms": stats["mean_held_ms"],
            "busy_seconds": ended - began, "dynamodb_per_minute_per_member": [round(v, 1) for v in per_member],
            "dynamodb_requests_status": sum(m["samples"][-1][1] if m["samples"] else 0 for m in members),
            "final_shares": [m["samples"][-1][2] for m in members if m["samples"]] if shared else [],
            "share_of_cap_ideal": rate / ideal, "share_of_cap_ideal_at_measured_hold": rate / (CAP / (held / 1000)),
            "share_of_own_ideal": rate / (ideal * (1 if shared else processes)),
            "peak_over_cap": stats["max_in_flight"] / CAP,
            "dynamodb_per_minute_per_member_median": spread(per_member)["median"],
            "dynamodb_per_minute_per_member_max": max(per_member, default=None)}

def fleet_limits(bench: Any, row: Row) -> Block:
    """1, 2 and 4 daemons under one fleet_max_concurrency, beside a max_concurrency each (N x cap by design)."""
    began = time.monotonic()
    dynamo = MotoDynamo(TABLE)
    cases = [(mode, n) for n in PROCESSES for mode in MODES]
    try:
        runs = interleave(bench.settings.runs, cases, lambda case, i: limit_run(bench, dynamo, *case, i),
                          lambda case, i, r: (
            f"fleet_limits {case[0]} {case[1]} process(es) run {i + 1}: {r['msgs_per_s'] or 0:.0f} msg/s = "
            f"{r['share_of_cap_ideal']:.2f} of the cap's ideal, peak {r['peak_in_flight']} in flight (cap {CAP}), "
            f"DynamoDB/min/member {r['dynamodb_per_minute_per_member']}, "
            f"shares {r['final_shares']}, {r['duplicates']} duplicates, {r['left_in_queue']} left"))
    finally:
        dynamo.stop()
    out: Block = {"cap": CAP, "hold_ms": HOLD_MS, "lease_seconds": LEASE_SECONDS,
                  "messages": (3000, 1500)[bench.settings.quick], "processes": list(PROCESSES),
                  "ideal_msgs_per_s": CAP / (HOLD_MS / 1000), "expected_dynamodb_per_minute_busy": 180 / LEASE_SECONDS}
    for (mode, n), results in runs.items():
        out[f"{mode}-p{n}"] = {**spreads(results, LIMIT_KEYS), "runs": results}
    out["seconds"] = round(time.monotonic() - began, 1)
    return out
