"""fleet: 1, 2 and 4 daemons (--drain, poll_for 1) started together on one backlog, runs interleaved. `cpu` (an instant
sink, c=50 each: CPU is the limit) and `app` (a 20 ms sink, c=10 each: slots are the limit); throughput over the
middle 80 % of the deliveries, as a ratio to one process; SQS requests per message from fauxqs's counts."""

from __future__ import annotations

import os
import time
from typing import Any, Callable

from figures import cell, middle_rate, ratio_text, spreads
from processes import Worker
from scenario import Block, Row, Scenario, interleave

PROCESSES = (1, 2, 4)
CASES = {"cpu": {"delay_ms": 0, "concurrency": 50}, "app": {"delay_ms": 20, "concurrency": 10}}
SETUP_ACTIONS = ("GetQueueUrl", "GetQueueAttributes")
KEYS = ("msgs_per_s", "msgs_per_s_first_to_last", "sqs_requests_per_msg", "sqs_requests_per_msg_without_startup",
        "duplicates")


def drain_together(bench: Any, label: str, processes: int, messages: int, delay_ms: float,
                   make: Callable[[str, str], Worker], wait: Callable[[list[Worker]], Any], drained: bool
                   ) -> tuple[dict[str, Any], Any, dict[str, int]]:
    """One backlog drained by `processes` daemons (make(label, queue)) started together: the figures every fleet run
    has, what `wait` returned, and fauxqs's requests on the queue by action."""
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
    result, stats, by_action = drain_together(
        bench, label, processes, messages, delay_ms, drained=True,
        make=lambda name, queue: bench.daemon(name, queues=[queue], concurrency=concurrency, extra=("--drain",)),
        wait=lambda workers: bench.sink.wait(messages, timeout=60 + messages / 50))
    if stats["count"] < messages:
        raise RuntimeError(f"{label}: only {stats['count']}/{messages} delivered (exits {result['exit_codes']})")
    requests = sum(by_action.values())
    return {**result, "msgs_per_s_first_to_last": result["deliveries"] / result["first_to_last_s"],
            "sqs_requests_per_msg": requests / messages,
            "sqs_requests_per_msg_without_startup": (requests - sum(by_action.get(a, 0) for a in SETUP_ACTIONS))
            / messages, "sqs_by_action": by_action}


def fleet(bench: Any) -> Block:
    out: Block = {"processes": list(PROCESSES), "cpu_count": os.cpu_count(), "cases": {}}
    began = time.monotonic()
    for case, shape in CASES.items():
        messages = 2000 if bench.settings.quick else {"cpu": 10000, "app": 8000}[case]
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


def rows(block: Block) -> list[Row]:
    """msgs/s in the workerless column, the ratio to one process in the last."""
    out = []
    for case, figures in block["cases"].items():
        shape = f"sink {figures['delay_ms']}ms, c={figures['concurrency']}/process, {block['cpu_count']} cores"
        for n in block["processes"]:
            out += [(f"fleet {case} ({shape}): {n} process(es) msgs/s", cell(figures[f"p{n}"]["msgs_per_s"], 0), "",
                     ratio_text(figures["ratio_to_one"][f"p{n}"])),
                    (f"  fleet {case}: {n} process(es) SQS requests/msg",
                     cell(figures[f"p{n}"]["sqs_requests_per_msg"], 3), "", "")]
    return out


SCENARIOS = (Scenario("fleet", fleet, rows),)
