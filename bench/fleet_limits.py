"""The fleet_limits scenario of bench/run.py: 1, 2 and 4 daemons under one fleet-wide cap, beside per-process caps.

* fleet_limits  a backlog on one fauxqs queue, an app (the sink) holding each POST `hold_ms`, then N daemons
                started at once for N = 1, 2 and 4. `shared`: `fleet_max_concurrency = cap` with a [fleet]
                table on moto's DynamoDB, so the fleet may hold `cap` at once; `per_process`:
                `max_concurrency = cap` in each, so N x cap by design. Per run: throughput over the middle
                80 % of the deliveries as a share of the cap's ideal (cap / hold), the peak in flight at the
                app (the sink's count), and DynamoDB requests per minute per member over the busy window
                (from each daemon's /status fleet row, sampled every 0.25 s; moto's request recorder
                counts them independently, the leaving writes at stop included).
"""

from __future__ import annotations

import time
from typing import Any

from dynamodb import MotoDynamo
from fleet_members import Member, Shape, make_member
from harness import log, spread, unique

PROCESSES = (1, 2, 4)
MODES = ("shared", "per_process")
SAMPLE_SECONDS = 0.25


class LimitSettings:
    def __init__(self, quick: bool) -> None:
        self.cap = 8
        self.hold_ms = 50.0
        self.lease_seconds = 6
        self.messages = 1500 if quick else 3000
        self.table = "workerless-bench-fleet"


def wait_for_backlog(bench: Any, members: list[Member], messages: int, timeout: float) -> tuple[float, float]:
    """Sample the sink and every member's /status until the sink has every message; the busy window."""
    deadline = time.monotonic() + timeout
    began: float | None = None
    while True:
        now = time.monotonic()
        count = bench.sink.stats()["count"]
        if count > 0 and began is None:
            began = now
        for member in members:
            member.sample(now)
        if count >= messages:
            return began or now, now
        if now > deadline or all(member.worker.poll() is not None for member in members):
            raise RuntimeError(f"{count}/{messages} delivered after {timeout:.0f}s; see "
                               f"{members[0].worker.log_path}")
        time.sleep(SAMPLE_SECONDS)


def limit_run(bench: Any, dynamo: MotoDynamo, label: str, processes: int, shape: Shape,
              settings: LimitSettings) -> dict[str, Any]:
    """One backlog drained by `processes` daemons started together; figures from the sink, /status and moto."""
    messages = settings.messages
    url = bench.sqs.create(shape.queue)
    bench.sqs.send_many(url, messages, "bulk")
    bench.sink.reset(settings.hold_ms)
    members = [make_member(f"{label}-{index}", shape, bench.fauxqs.url, dynamo.url) for index in range(processes)]
    bench.workers.extend(member.worker for member in members)
    for member in members:
        member.worker.start()
    ideal = shape.cap / (settings.hold_ms / 1000) * (1 if shape.shared else processes)
    try:
        began, ended = wait_for_backlog(bench, members, messages, 60 + 4 * messages / ideal)
    finally:
        codes = [member.worker.stop(30) for member in members]
    stats = bench.sink.stats()
    arrivals = sorted(at for at, _ in bench.sink.events(0))
    left = bench.sqs.left(url)
    bench.sqs.delete(url)
    bench.fauxqs.forget(shape.queue)
    per_member = [member.requests_per_minute(began, ended) for member in members]
    return {"msgs_per_s": middle_rate(arrivals), "peak_in_flight": stats["max_in_flight"],
            "mean_held_ms": stats["mean_held_ms"], "deliveries": len(arrivals),
            "duplicates": len(arrivals) - messages, "left_in_queue": left, "exit_codes": codes,
            "busy_seconds": ended - began,
            "dynamodb_per_minute_per_member": [round(v, 1) for v in per_member if v is not None],
            "dynamodb_requests_status": sum(member.last_requests() for member in members),
            "dynamodb_requests_recorded": dynamo.recorded(shape.fleet_name) if shape.shared else {},
            "final_shares": [m.samples[-1].share for m in members if m.samples] if shape.shared else []}


def middle_rate(arrivals: list[float]) -> float | None:
    """Deliveries per second over the middle 80 % (start-up and stragglers left out); arrivals in ms."""
    low, high = arrivals[len(arrivals) // 10], arrivals[len(arrivals) * 9 // 10]
    middle = len(arrivals) * 9 // 10 - len(arrivals) // 10
    return middle / ((high - low) / 1000) if high > low else None



def with_ratios(result: dict[str, Any], settings: LimitSettings, processes: int, shared: bool) -> dict[str, Any]:
    """Throughput against the fleet cap's ideal (cap / hold), and the peak against the cap."""
    ideal = settings.cap / (settings.hold_ms / 1000)
    rate = result["msgs_per_s"] or 0.0
    held = result["mean_held_ms"] or settings.hold_ms
    per_member = result["dynamodb_per_minute_per_member"]
    return {**result, "share_of_cap_ideal": rate / ideal,
            "share_of_cap_ideal_at_measured_hold": rate / (settings.cap / (held / 1000)),
            "share_of_own_ideal": rate / (ideal * (1 if shared else processes)),
            "peak_over_cap": result["peak_in_flight"] / settings.cap,
            "dynamodb_per_minute_per_member_median": spread(per_member)["median"],
            "dynamodb_per_minute_per_member_max": max(per_member, default=None)}


def run_mode(bench: Any, dynamo: MotoDynamo, settings: LimitSettings, mode: str, processes: int,
             index: int) -> dict[str, Any]:
    label = f"flim-{mode}-p{processes}-{index}"
    queue = unique(label)
    shape = Shape(queue=queue, sink_url=bench.sink.url, cap=settings.cap, shared=mode == "shared",
                  table=settings.table, fleet_name=queue, lease_seconds=settings.lease_seconds)
    result = with_ratios(limit_run(bench, dynamo, label, processes, shape, settings), settings, processes,
                         shape.shared)
    log(f"  fleet_limits {mode} {processes} process(es) run {index + 1}: {result['msgs_per_s']:.0f} msg/s = "
        f"{result['share_of_cap_ideal']:.2f} of the cap's ideal, peak {result['peak_in_flight']} in flight "
        f"(cap {settings.cap}), DynamoDB/min/member {result['dynamodb_per_minute_per_member']}, "
        f"recorded {result['dynamodb_requests_recorded']}, shares {result['final_shares']}, "
        f"{result['duplicates']} duplicates, {result['left_in_queue']} left")
    return result


KEYS = ("msgs_per_s", "share_of_cap_ideal", "share_of_cap_ideal_at_measured_hold", "share_of_own_ideal",
        "peak_in_flight", "peak_over_cap", "dynamodb_per_minute_per_member_median",
        "dynamodb_per_minute_per_member_max", "mean_held_ms", "duplicates", "left_in_queue")


def fleet_limits(bench: Any) -> dict[str, Any]:
    settings = LimitSettings(bench.settings.quick)
    began = time.monotonic()
    dynamo = MotoDynamo(settings.table)
    runs: dict[str, list[dict[str, Any]]] = {f"{mode}-p{n}": [] for mode in MODES for n in PROCESSES}
    try:
        dynamo.start_recording()
        for index in range(bench.settings.runs):
            for processes in PROCESSES:
                for mode in MODES:
                    runs[f"{mode}-p{processes}"].append(run_mode(bench, dynamo, settings, mode, processes, index))
    finally:
        dynamo.stop()
    out: dict[str, Any] = {"cap": settings.cap, "hold_ms": settings.hold_ms, "lease_seconds": settings.lease_seconds,
                           "messages": settings.messages, "processes": list(PROCESSES),
                           "ideal_msgs_per_s": settings.cap / (settings.hold_ms / 1000),
                           "expected_dynamodb_per_minute_busy": 3 * 60 / settings.lease_seconds}
    for name, results in runs.items():
        out[name] = {key: spread([r[key] for r in results]) for key in KEYS}
        out[name]["runs"] = results
    out["seconds"] = round(time.monotonic() - began, 1)
    return out


RUNNERS = {"fleet_limits": fleet_limits}


def table_rows(scenario: dict[str, Any], cell: Any, ratio_text: Any) -> list[tuple[str, str, str, str]]:
    """Rows for run.py's table: the shared cap in the workerless column, per-process caps in the baseline one."""
    if "fleet_limits" not in scenario:
        return []
    block = scenario["fleet_limits"]
    rows = [(f"fleet_limits: cap {block['cap']}, app holds {block['hold_ms']:.0f} ms, lease {block['lease_seconds']}s "
             f"(busy: 3 renewals/lease = {block['expected_dynamodb_per_minute_busy']:.0f}/min)",
             "fleet cap", "per-process cap", "")]
    for n in block["processes"]:
        shared, own = block[f"shared-p{n}"], block[f"per_process-p{n}"]
        for key, text, digits in (("share_of_cap_ideal", "msgs/s / (cap / hold)", 2),
                                  ("peak_in_flight", "peak in flight at the app", 0),
                                  ("dynamodb_per_minute_per_member_median", "DynamoDB requests/min/member", 1)):
            rows.append((f"  {n} process(es): {text}", cell(shared[key], digits), cell(own[key], digits), ""))
    return rows
