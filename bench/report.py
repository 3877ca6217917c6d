"""The report of bench/run.py: the machine it ran on, the table and profile it prints, the JSON it writes.

Reads only the results dict the scenarios, the profile and bench/checks.py filled (see bench/run.py);
bench/scale.py adds the rows and notes of its own scenarios.
"""

from __future__ import annotations

import json
import os
import platform
import subprocess
from pathlib import Path
from typing import Any, Callable

import batch
import fleet
import fleet_limits
import harness
import idempotency
import redrive
import scale
import scale_targets
import tracing


def machine() -> dict[str, Any]:
    model = ""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    versions = {}
    for module in ("gevent", "boto3", "botocore", "httptools", "geventhttpclient"):
        try:
            versions[module] = __import__(module).__version__
        except Exception:  # noqa: BLE001
            versions[module] = None
    try:
        fauxqs = json.loads((harness.BENCH / "node_modules/fauxqs/package.json").read_text())["version"]
    except OSError:
        fauxqs = None
    node = subprocess.run(["node", "--version"], capture_output=True, text=True).stdout.strip()
    return {"nproc": os.cpu_count(), "cpu_model": model, "python": platform.python_version(),
            "platform": platform.platform(), "node": node, "fauxqs": fauxqs, **versions,
            "loadavg": os.getloadavg()}


def fmt(value: Any, digits: int = 1) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        if value == float("inf"):
            return "inf"
        if abs(value) < 10 and digits < 3 and value != int(value):
            return f"{value:.{max(digits, 2)}f}" if abs(value) < 1 else f"{value:.{digits}f}"
        return f"{value:.{digits}f}"
    return str(value)


def ratio_text(ratio: float | None) -> str:
    if not ratio:
        return "-"
    return f"1/{1 / ratio:.0f}" if ratio < 0.1 else f"{ratio:.2f}"


def cell(figure: dict[str, Any], digits: int = 1) -> str:
    if not figure or figure.get("median") is None:
        return "-"
    if figure["min"] == figure["max"]:
        return fmt(figure["median"], digits)
    return f"{fmt(figure['median'], digits)} [{fmt(figure['min'], digits)}-{fmt(figure['max'], digits)}]"


Row = tuple[str, str, str, str]


def table_rows(results: dict[str, Any]) -> list[Row]:
    """The printed table's rows (figure, daemon, baseline, ratio) of the scenarios that ran, in run order."""
    scenario = results["scenarios"]
    rows = [row for name, rows_of in SCENARIO_ROWS if name in scenario for row in rows_of(scenario[name])]
    return (rows + scale.table_rows(scenario, cell, ratio_text) + scale_targets.table_rows(scenario, cell, ratio_text)
            + fleet.table_rows(scenario, cell, ratio_text)
            + fleet_limits.table_rows(scenario, cell, ratio_text)
            + idempotency.table_rows(scenario, cell, ratio_text) + tracing.table_rows(scenario, cell, ratio_text)
            + redrive.table_rows(scenario, cell, ratio_text) + batch.table_rows(scenario, cell, ratio_text))


def compared(label: str, block: dict[str, Any], key: str, digits: int = 1) -> Row:
    """A figure of the daemon beside the baseline's, and their ratio."""
    daemon, baseline = block["daemon"].get(key), block["baseline"].get(key)
    ratio = block.get("ratio_daemon_to_baseline", {}).get(key)
    return (label, cell(daemon, digits), cell(baseline, digits), ratio_text(ratio))


def throughput_rows(throughput: dict[str, Any]) -> list[Row]:
    rows = []
    for c in (10, 50):
        block = throughput[f"c{c}"]
        rows += [compared(f"throughput c={c}: msgs/s", block, "msgs_per_s", 0),
                 compared(f"throughput c={c}: CPU us/msg", block, "cpu_us_per_msg", 0),
                 compared(f"throughput c={c}: peak RSS MB", block, "peak_rss_mb"),
                 compared(f"throughput c={c}: peak RSS of the process tree MB", block, "peak_tree_rss_mb")]
    return rows


def components_rows(parts: dict[str, Any]) -> list[Row]:
    return [(label, cell(parts[key], 0), "", "") for key, label in (
        ("receive_10_us", "part: ReceiveMessage(10) CPU us"),
        ("delete_batch_10_us", "part: DeleteMessageBatch(10) CPU us"),
        ("post_us_at_50", "part: one POST CPU us (50 at a time)"),
        ("http_wire_post_us_at_50", "part: one POST via wire.http CPU us (50 at a time)"),
        ("floor_us_per_msg", "floor: POST + (receive+delete)/10")) if key in parts]


def slow_sink_rows(slow_sink: dict[str, Any]) -> list[Row]:
    rows = []
    for key in ("d20", "d200"):
        block = slow_sink[key]
        delay = block["delay_ms"]
        rows += [compared(f"slow sink {delay}ms c=50: msgs/s", block, "msgs_per_s", 0),
                 compared(f"slow sink {delay}ms c=50: fraction of ideal", block, "fraction_of_ideal", 3),
                 compared(f"slow sink {delay}ms: CPU share of one core", block, "cpu_share_of_one_core", 2)]
    return rows


def requests_rows(requests: dict[str, Any]) -> list[Row]:
    return [compared("SQS requests per message (backlog)", requests, "requests_per_msg", 3),
            compared("  mean DeleteMessageBatch size", requests, "mean_delete_batch", 2)]


def idle_rows(idle: dict[str, Any]) -> list[Row]:
    return [compared(f"idle requests/min c={c} (poll_for={idle['poll_for']})", idle[f"c{c}"], "requests_per_min")
            for c in (10, 50, 500)]


def wake_rows(wake: dict[str, Any]) -> list[Row]:
    return [compared("wake latency p50 ms", wake, "p50_ms", 1), compared("wake latency p99 ms", wake, "p99_ms", 1)]


def memory_rows(memory: dict[str, Any]) -> list[Row]:
    rows = []
    for c in (c for c in (50, 500, 1000) if f"c{c}" in memory):
        rows += [compared(f"peak RSS MB c={c} (sink {memory['delay_ms']}ms)", memory[f"c{c}"], "peak_rss_mb"),
                 compared(f"  process tree (daemon and children): peak RSS MB, c={c}", memory[f"c{c}"],
                          "peak_tree_rss_mb")]
        if c == 50:
            rows += [compared("  process tree idle, RSS MB, c=50", memory["c50"], "idle_tree_rss_mb"),
                     compared("  process tree peak / idle, c=50", memory["c50"], "tree_peak_over_idle", 2)]
        rows.append(compared(f"  in flight at the sink, c={c}", memory[f"c{c}"], "sink_max_in_flight", 0))
    return rows


def priority_rows(priority: dict[str, Any]) -> list[Row]:
    return [compared("priority inversions (c=10)", priority, "inversions", 0),
            compared("  low starts between first/last high", priority, "low_between_first_and_last_high", 0)]


def latency_rows(latency: dict[str, Any]) -> list[Row]:
    rows = []
    c = latency["concurrency"]
    for rtt in latency["rtts_ms"]:
        block = latency[f"rtt{rtt}"]
        rows += [compared(f"latency SQS RTT {rtt}ms c={c}: msgs/s", block, "msgs_per_s", 0),
                 compared(f"  RTT {rtt}ms: CPU us/msg", block, "cpu_us_per_msg", 0),
                 compared(f"  RTT {rtt}ms: peak RSS MB", block, "peak_rss_mb"),
                 compared(f"  RTT {rtt}ms: SQS requests/msg", block, "sqs_requests_per_msg", 3),
                 compared(f"  RTT {rtt}ms: messages left undeleted at exit", block, "left_in_queue", 0)]
        if rtt:
            rows.append(compared(f"  RTT {rtt}ms: round trip fauxqs added, ms", block, "sqs_mean_added_ms", 1))
    ratios = latency["ratios"]
    for rtt in latency["rtts_ms"][1:]:
        rows.append((f"latency: msgs/s at RTT {rtt}ms / at 0ms (paired runs)",
                     cell(ratios[f"daemon_rtt{rtt}_over_rtt0"], 3), cell(ratios[f"baseline_rtt{rtt}_over_rtt0"], 3),
                     ""))
    for rtt in latency["rtts_ms"]:
        rows.append((f"latency: daemon / baseline at RTT {rtt}ms (paired runs)",
                     cell(ratios[f"daemon_over_baseline_rtt{rtt}"], 2), "", ""))
    return rows


SCENARIO_ROWS: tuple[tuple[str, Callable[[dict[str, Any]], list[Row]]], ...] = (
    ("throughput", throughput_rows), ("components", components_rows), ("slow_sink", slow_sink_rows),
    ("requests", requests_rows), ("idle", idle_rows), ("wake", wake_rows), ("memory", memory_rows),
    ("priority", priority_rows), ("latency", latency_rows))


def print_report(results: dict[str, Any]) -> None:
    rows = [("figure", "workerless median [min-max]", "plain baseline", "ratio")] + table_rows(results)
    widths = [max(len(row[i]) for row in rows) for i in range(4)]
    print()
    for index, row in enumerate(rows):
        print("  ".join(text.ljust(width) for text, width in zip(row, widths)).rstrip())
        if index == 0:
            print("  ".join("-" * width for width in widths))
    if "latency" in results["scenarios"]:
        print(f"\nlatency: the baseline is {results['scenarios']['latency']['baseline']}")
    for line in scale.details(results["scenarios"]):
        print(line)
    if results.get("targets"):
        print("\ntargets:")
        for item in results["targets"]:
            verdict = {True: "PASS", False: "MISS", None: "n/a"}[item["pass"]]
            print(f"  {verdict:4}  {item['target']}: {fmt(item['value'], 3)} (target {item['limit']})")
    for kind, profile in (results.get("profile") or {}).items():
        for line in profile_lines(kind, profile):
            print(line)
    print()


def profile_lines(kind: str, profile: dict[str, Any]) -> list[str]:
    """A profile's CPU by folder of the package, by area (the ten largest), and inside the wire calls."""
    if "by_area" not in profile:
        return []
    switches = profile.get("greenlet_switches", {}).get("switches_per_msg")
    lines = [f"\n{kind} profile (py-spy, throughput c=50, {profile['messages']} messages): CPU by folder"
             + (f"; {switches:.1f} greenlet switches per message" if switches else "")]
    for title, table, limit in (("", "by_folder", None), ("  by area:", "by_area", 10),
                                ("  within the wire calls (share of all samples):", "wire_call_parts", None)):
        if profile.get(table):
            lines += [title] if title else []
            indent = "    " if title else "  "
            for row in profile[table][:limit]:
                us = f"{row['us_per_msg']:6.1f} us/msg" if row["us_per_msg"] is not None else ""
                lines.append(f"{indent}{row['share']:6.1%}  {us}  {row['function']}")
    return lines


def write_results(path: str, results: dict[str, Any]) -> None:
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    Path(path).write_text(json.dumps(results, indent=2, default=str))
