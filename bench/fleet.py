"""The fleet scenario of bench/run.py: 1, 2 and 4 daemon processes draining one queue together.

* fleet  a backlog on one fauxqs queue, then N daemons (--drain, poll_for 1) started at once, for
         N = 1, 2 and 4, runs interleaved. Throughput is counted at the sink over the middle 80 %
         of the deliveries (the processes' staggered start-up and the last stragglers left out), and
         reported as a ratio to one process; SQS requests per message come from fauxqs's counts of
         that queue (start-up calls and each process's last empty long poll included). Two cases:
         `cpu` (sink answers at once, concurrency 50 per process: the daemons' CPU is the limit, so
         on a machine with few cores the ratio shows what more processes cost, not what they add)
         and `app` (sink answers after 20 ms, concurrency 10 per process: slots are the limit, so
         the ratio shows whether processes on one queue get in each other's way).
"""

from __future__ import annotations

import os
import time
from typing import Any

from harness import log, make_daemon, spread, unique

SCENARIOS = ("fleet",)
PROCESSES = (1, 2, 4)
CASES = {"cpu": {"delay_ms": 0, "concurrency": 50}, "app": {"delay_ms": 20, "concurrency": 10}}
SETUP_ACTIONS = ("GetQueueUrl", "GetQueueAttributes")


class FleetSettings:
    def __init__(self, quick: bool) -> None:
        self.messages = {"cpu": 2000 if quick else 10000, "app": 2000 if quick else 8000}


def fleet_run(bench: Any, label: str, processes: int, messages: int, delay_ms: float,
              concurrency: int) -> dict[str, Any]:
    """One backlog drained by `processes` daemons started together; figures from the sink and fauxqs."""
    name = unique(label)
    url = bench.sqs.create(name)
    bench.sqs.send_many(url, messages, "bulk")
    bench.sink.reset(delay_ms)
    workers = [make_daemon(f"{label}-{index}", bench.fauxqs.url, queues=[name], sink_url=bench.sink.url,
                           concurrency=concurrency, poll_for=1, extra=("--drain",)) for index in range(processes)]
    bench.workers.extend(workers)
    for worker in workers:
        worker.start()
    stats = bench.sink.wait(messages, timeout=60 + messages / 50)
    codes = []
    for worker in workers:
        code = worker.wait(30)
        codes.append(code if code is not None else worker.stop())
    arrivals = sorted(at for at, _ in bench.sink.events(0))
    left = bench.sqs.left(url)
    bench.sqs.delete(url)
    by_action = bench.fauxqs.requests(name)
    bench.fauxqs.forget(name)
    if stats["count"] < messages:
        raise RuntimeError(f"{label}: only {stats['count']}/{messages} delivered (exits {codes})")
    low, high = arrivals[len(arrivals) // 10], arrivals[len(arrivals) * 9 // 10]
    middle = len(arrivals) * 9 // 10 - len(arrivals) // 10
    requests = sum(by_action.values())
    setup = sum(by_action.get(action, 0) for action in SETUP_ACTIONS)
    return {
        "msgs_per_s": middle / ((high - low) / 1000) if high > low else None,
        "msgs_per_s_first_to_last": len(arrivals) / ((arrivals[-1] - arrivals[0]) / 1000),
        "sqs_requests_per_msg": requests / messages,
        "sqs_requests_per_msg_without_startup": (requests - setup) / messages,
        "sqs_by_action": by_action,
        "deliveries": len(arrivals),
        "duplicates": len(arrivals) - messages,
        "left_in_queue": left,
        "exit_codes": codes,
    }


def fleet(bench: Any) -> dict[str, Any]:
    settings = FleetSettings(bench.settings.quick)
    out: dict[str, Any] = {"processes": list(PROCESSES), "cpu_count": os.cpu_count(), "cases": {}}
    began = time.monotonic()
    for case, shape in CASES.items():
        messages = settings.messages[case]
        runs: dict[int, list[dict[str, Any]]] = {n: [] for n in PROCESSES}
        for index in range(bench.settings.runs):
            for processes in PROCESSES:
                result = fleet_run(bench, f"fleet-{case}-p{processes}-{index}", processes, messages, **shape)
                log(f"  fleet {case} {processes} process(es) run {index + 1}: {result['msgs_per_s']:.0f} msg/s, "
                    f"{result['sqs_requests_per_msg']:.3f} SQS requests/msg {result['sqs_by_action']}, "
                    f"{result['duplicates']} duplicates, {result['left_in_queue']} left")
                runs[processes].append(result)
        block: dict[str, Any] = {"messages": messages, **shape}
        for processes in PROCESSES:
            block[f"p{processes}"] = {key: spread([run[key] for run in runs[processes]])
                                      for key in ("msgs_per_s", "msgs_per_s_first_to_last", "sqs_requests_per_msg",
                                                  "sqs_requests_per_msg_without_startup", "duplicates")}
        one = block["p1"]["msgs_per_s"]["median"]
        block["ratio_to_one"] = {f"p{n}": block[f"p{n}"]["msgs_per_s"]["median"] / one if one else None
                                 for n in PROCESSES}
        out["cases"][case] = block
    out["seconds"] = round(time.monotonic() - began, 1)
    return out


RUNNERS = {"fleet": fleet}


def table_rows(scenario: dict[str, Any], cell: Any, ratio_text: Any) -> list[tuple[str, str, str, str]]:
    """Rows for run.py's table: msgs/s in the workerless column, the ratio to one process in the last."""
    if "fleet" not in scenario:
        return []
    rows: list[tuple[str, str, str, str]] = []
    cores = scenario["fleet"]["cpu_count"]
    for case, block in scenario["fleet"]["cases"].items():
        shape = f"sink {block['delay_ms']}ms, c={block['concurrency']}/process, {cores} cores"
        for processes in scenario["fleet"]["processes"]:
            figures = block[f"p{processes}"]
            rows.append((f"fleet {case} ({shape}): {processes} process(es) msgs/s", cell(figures["msgs_per_s"], 0), "",
                         ratio_text(block["ratio_to_one"][f"p{processes}"])))
            rows.append((f"  fleet {case}: {processes} process(es) SQS requests/msg",
                         cell(figures["sqs_requests_per_msg"], 3), "", ""))
    return rows
