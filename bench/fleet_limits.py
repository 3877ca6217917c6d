"""fleet_limits: 1, 2 and 4 daemons under one fleet-wide cap (`shared`: fleet_max_concurrency on a [fleet] table in
moto's DynamoDB) beside per-process caps (`per_process`: max_concurrency in each, N x cap by design), on an app
holding each POST 50 ms: throughput over the cap's ideal, the peak in flight at the app, and DynamoDB requests per
minute per member (each daemon's /status fleet row every 0.25 s; moto's recorder counts them independently)."""

from __future__ import annotations

import json
import re
import time
import urllib.request
from dataclasses import dataclass, field
from typing import Any

from dynamodb import MotoDynamo
from figures import cell, spread, spreads
from fleet import drain_together
from processes import Worker
from scenario import Block, Row, Scenario, interleave

PROCESSES = (1, 2, 4)
MODES = ("shared", "per_process")
SAMPLE_SECONDS = 0.25
CAP, HOLD_MS, LEASE_SECONDS, TABLE = 8, 50.0, 6, "workerless-bench-fleet"
LISTENING = re.compile(r"status server listening on (http://127\.0\.0\.1:\d+)")
KEYS = ("msgs_per_s", "share_of_cap_ideal", "share_of_cap_ideal_at_measured_hold", "share_of_own_ideal",
        "peak_in_flight", "peak_over_cap", "dynamodb_per_minute_per_member_median",
        "dynamodb_per_minute_per_member_max", "mean_held_ms", "duplicates", "left_in_queue")


@dataclass
class Member:
    """A daemon of the fleet, and the fleet row of its /status as sampled: (time, dynamodb_requests, share)."""
    worker: Worker
    status_url: str | None = None
    samples: list[tuple[float, int, float]] = field(default_factory=list)

    def sample(self, at: float) -> None:
        """Note the fleet row of /status, if the daemon is up and has one (a failed read is skipped)."""
        if self.status_url is None:
            match = LISTENING.search(self.worker.log_text())
            self.status_url = match.group(1) if match else None
        if self.status_url is None or self.worker.poll() is not None:
            return
        try:
            with urllib.request.urlopen(self.status_url + "/status", timeout=5) as response:
                rows = json.loads(response.read()).get("fleet", [])
        except (OSError, ValueError):
            return
        if rows:
            self.samples.append((at, rows[0]["dynamodb_requests"], rows[0]["share"]))

    def requests_per_minute(self, start: float, end: float) -> float | None:
        """DynamoDB requests per minute between the first and the last sample inside [start, end]."""
        inside = [s for s in self.samples if start <= s[0] <= end]
        if len(inside) < 2 or inside[-1][0] <= inside[0][0]:
            return None
        return (inside[-1][1] - inside[0][1]) / (inside[-1][0] - inside[0][0]) * 60


def busy_window(bench: Any, members: list[Member], messages: int, timeout: float) -> tuple[float, float]:
    """Sample the sink and every member's /status until the sink has every message; the busy window."""
    deadline, began = time.monotonic() + timeout, None
    while True:
        now, count = time.monotonic(), bench.sink.stats()["count"]
        began = began or (now if count > 0 else None)
        for member in members:
            member.sample(now)
        if count >= messages:
            return began or now, now
        if now > deadline or all(member.worker.poll() is not None for member in members):
            raise RuntimeError(f"{count}/{messages} delivered after {timeout:.0f}s; see {members[0].worker.log_path}")
        time.sleep(SAMPLE_SECONDS)


def limit_run(bench: Any, dynamo: MotoDynamo, mode: str, processes: int, index: int) -> dict[str, Any]:
    """One backlog drained by `processes` daemons started together; figures from the sink, /status and moto."""
    label, shared, messages = f"flim-{mode}-p{processes}-{index}", mode == "shared", bench.settings.pick(3000, 1500)
    members: list[Member] = []
    queues: list[str] = []  # the fleet's name is its queue's

    def make(name: str, queue: str) -> Worker:
        tables = {"status": {"listen": "127.0.0.1:0"}}
        if shared:
            tables["fleet"] = {"table": TABLE, "name": queue, "lease": LEASE_SECONDS}
        worker = bench.daemon(name, queues=[{"name": queue, "fleet_max_concurrency" if shared else "max_concurrency":
                                             CAP}], concurrency=CAP, tables=tables,
                              env={"AWS_ENDPOINT_URL_DYNAMODB": dynamo.url})
        members.append(Member(worker))
        queues.append(queue)
        return worker

    ideal = CAP / (HOLD_MS / 1000)
    result, (began, ended), _ = drain_together(
        bench, label, processes, messages, HOLD_MS, make, drained=False,
        wait=lambda workers: busy_window(bench, members, messages, 60 + 4 * messages / (ideal * (1 if shared else
                                                                                                    processes))))
    stats = bench.sink.stats()
    result.pop("first_to_last_s")
    per_member = [v for v in (m.requests_per_minute(began, ended) for m in members) if v is not None]
    rate, held = result["msgs_per_s"] or 0.0, stats["mean_held_ms"] or HOLD_MS
    return {**result, "peak_in_flight": stats["max_in_flight"], "mean_held_ms": stats["mean_held_ms"],
            "busy_seconds": ended - began, "dynamodb_per_minute_per_member": [round(v, 1) for v in per_member],
            "dynamodb_requests_status": sum(m.samples[-1][1] if m.samples else 0 for m in members),
            "dynamodb_requests_recorded": dynamo.recorded(queues[0]) if shared else {},
            "final_shares": [m.samples[-1][2] for m in members if m.samples] if shared else [],
            "share_of_cap_ideal": rate / ideal, "share_of_cap_ideal_at_measured_hold": rate / (CAP / (held / 1000)),
            "share_of_own_ideal": rate / (ideal * (1 if shared else processes)),
            "peak_over_cap": stats["max_in_flight"] / CAP,
            "dynamodb_per_minute_per_member_median": spread(per_member)["median"],
            "dynamodb_per_minute_per_member_max": max(per_member, default=None)}


def fleet_limits(bench: Any) -> Block:
    began = time.monotonic()
    dynamo = MotoDynamo(TABLE)
    cases = [(mode, n) for n in PROCESSES for mode in MODES]
    try:
        dynamo.start_recording()
        runs = interleave(bench.settings.runs, cases, lambda case, i: limit_run(bench, dynamo, *case, i),
                          lambda case, i, r: (
            f"fleet_limits {case[0]} {case[1]} process(es) run {i + 1}: {r['msgs_per_s'] or 0:.0f} msg/s = "
            f"{r['share_of_cap_ideal']:.2f} of the cap's ideal, peak {r['peak_in_flight']} in flight (cap {CAP}), "
            f"DynamoDB/min/member {r['dynamodb_per_minute_per_member']}, recorded {r['dynamodb_requests_recorded']}, "
            f"shares {r['final_shares']}, {r['duplicates']} duplicates, {r['left_in_queue']} left"))
    finally:
        dynamo.stop()
    out: Block = {"cap": CAP, "hold_ms": HOLD_MS, "lease_seconds": LEASE_SECONDS,
                  "messages": bench.settings.pick(3000, 1500), "processes": list(PROCESSES),
                  "ideal_msgs_per_s": CAP / (HOLD_MS / 1000), "expected_dynamodb_per_minute_busy": 3 * 60 / LEASE_SECONDS}
    for (mode, n), results in runs.items():
        out[f"{mode}-p{n}"] = {**spreads(results, KEYS), "runs": results}
    out["seconds"] = round(time.monotonic() - began, 1)
    return out


def rows(block: Block) -> list[Row]:
    """The shared cap in the workerless column, per-process caps in the baseline one."""
    out = [(f"fleet_limits: cap {block['cap']}, app holds {block['hold_ms']:.0f} ms, lease {block['lease_seconds']}s "
            f"(busy: 3 renewals/lease = {block['expected_dynamodb_per_minute_busy']:.0f}/min)",
            "fleet cap", "per-process cap", "")]
    for n in block["processes"]:
        shared, own = block[f"shared-p{n}"], block[f"per_process-p{n}"]
        out += [(f"  {n} process(es): {text}", cell(shared[key], digits), cell(own[key], digits), "")
                for key, text, digits in (("share_of_cap_ideal", "msgs/s / (cap / hold)", 2),
                                          ("peak_in_flight", "peak in flight at the app", 0),
                                          ("dynamodb_per_minute_per_member_median", "DynamoDB requests/min/member", 1))]
    return out


SCENARIOS = (Scenario("fleet_limits", fleet_limits, rows),)
