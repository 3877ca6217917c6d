"""The report of bench/run.py: the machine it ran on, the table, targets and profile it prints, the JSON it writes."""

from __future__ import annotations

import json
import os
import platform
import subprocess
import time
from pathlib import Path
from typing import Any

import harness
from figures import fmt
from scenario import Scenario


def machine() -> dict[str, Any]:
    model = next((line.split(":", 1)[1].strip() for line in Path("/proc/cpuinfo").read_text().splitlines()
                  if line.startswith("model name")), "")
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
            "platform": platform.platform(), "node": node, "fauxqs": fauxqs, **versions, "loadavg": os.getloadavg()}


def header(command: str, quick: bool, runs: int) -> dict[str, Any]:
    """The results' opening keys; `finish` adds the time taken."""
    return {"command": command.strip(), "quick": quick, "runs": runs, "daemon_bin": str(harness.DAEMON_BIN),
            "started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "machine": machine(),
            "began": time.monotonic()}


def finish(results: dict[str, Any]) -> None:
    results["seconds"] = round(time.monotonic() - results.pop("began"), 1)
    results["machine"]["loadavg_end"] = os.getloadavg()


def print_report(results: dict[str, Any], scenarios: dict[str, Scenario]) -> None:
    ran = results["scenarios"]
    rows = [("figure", "workerless median [min-max]", "plain baseline", "ratio")]
    rows += [row for name, scenario in scenarios.items() if name in ran for row in scenario.rows(ran[name])]
    widths = [max(len(row[i]) for row in rows) for i in range(4)]
    print()
    for index, row in enumerate(rows if len(rows) > 1 else []):
        print("  ".join(text.ljust(width) for text, width in zip(row, widths)).rstrip())
        if index == 0:
            print("  ".join("-" * width for width in widths))
    for name, scenario in scenarios.items():
        for line in scenario.notes(ran[name]) if name in ran else []:
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
