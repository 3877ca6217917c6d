#!/usr/bin/env python3
"""The workerless benchmark: one command, one table of scenarios (bench/table.py), everything on 127.0.0.1: it
starts fauxqs and the sink, runs each chosen row by its kind, holds the figures to their targets, prints them and
writes the JSON (BENCHMARKS.md, "How to run"). FAUXQS_DELAY_MS=D: a D ms SQS round trip where a case sets none."""

from __future__ import annotations

import argparse
import json
import os
import platform
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Callable

sys.path.insert(0, str(Path(__file__).resolve().parent))

import drain  # noqa: E402
import fair  # noqa: E402
import fleet  # noqa: E402
import flow  # noqa: E402
import harness  # noqa: E402
import listen  # noqa: E402
import order  # noqa: E402
import profiling  # noqa: E402
import redrive  # noqa: E402
import soak  # noqa: E402
from figures import cell, fmt  # noqa: E402
from harness import RESULTS, log  # noqa: E402
from session import Bench, Settings  # noqa: E402
from shapes import Row, check  # noqa: E402
from table import SCENARIOS  # noqa: E402

KINDS: dict[str, Callable[[Bench, Row], dict[str, Any]]] = {
    "drain": drain.run, "listen": listen.run, "order": order.run, "startup": listen.startup, "flow": flow.run,
    "fleet": fleet.fleet, "fleet_limits": fleet.fleet_limits, "redrive": redrive.redrive, "fair": fair.run,
    "instructions": profiling.instructions_row, "soak": soak.run}

def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="every row once, with few messages")
    parser.add_argument("--runs", type=int, help="runs per figure (default 3, or 1 with --quick)")
    parser.add_argument("--only", help="comma-separated rows: " + ",".join(SCENARIOS))
    parser.add_argument("--no-profile", action="store_true", help="skip the py-spy profile")
    parser.add_argument("--json", help="where to write the results (default bench/results/latest.json, "
                                       "or latest-quick.json with --quick)")
    parser.add_argument("--strict", action="store_true", help="exit 1 when a target is missed")
    parser.add_argument("--daemon-bin", help="bin/workerless of another checkout, e.g. to try a fix")
    parser.add_argument("--vs", help="another checkout: each drain case runs with its daemon too, in the same rounds")
    parser.add_argument("--latency-messages", type=int, help="backlog of each latency run (default 50000, 5000 quick)")
    args = parser.parse_args(argv)
    args.chosen = args.only.split(",") if args.only else [name for name, row in SCENARIOS.items() if row.in_full_run]
    unknown = [name for name in args.chosen if name not in SCENARIOS]
    if unknown:
        parser.error(f"unknown row(s): {', '.join(unknown)}")
    args.json = args.json or str(RESULTS / ("latest-quick.json" if args.quick else "latest.json"))
    return args

def machine() -> dict[str, Any]:
    model = next((line.split(":", 1)[1].strip() for line in Path("/proc/cpuinfo").read_text().splitlines()
                  if line.startswith("model name")), "")
    return {"nproc": os.cpu_count(), "cpu_model": model, "python": platform.python_version(),
            "platform": platform.platform(), "loadavg": os.getloadavg(),
            "node": subprocess.run(["node", "--version"], capture_output=True, text=True).stdout.strip(),
            "fauxqs": json.loads((harness.BENCH / "node_modules/fauxqs/package.json").read_text())["version"],
            **{module: getattr(__import__(module), "__version__", None) for module in ("gevent", "botocore")}}

def lines(name: str, row: Row, block: Any, path: str = "") -> list[str]:
    """The row's shown figures, one line each: where in the block, and median [min-max]."""
    if isinstance(block, dict) and "median" in block:
        return [f"  {name}{path}: {cell(block, 3)}"] if path.rpartition(".")[2] in row.shown else []
    if not isinstance(block, dict) or path.endswith(("by_action_last_run", ".runs")):
        return []
    return [line for key, value in block.items() for line in lines(name, row, value, f"{path}.{key}")]

def report(results: dict[str, Any]) -> None:
    for name, block in results["scenarios"].items():
        if "error" not in block:
            print("\n".join(lines(name, SCENARIOS[name], block)))
    print("\ntargets:")
    for item in results["targets"]:
        verdict = {True: "PASS", False: "MISS", None: "n/a"}[item["pass"]]
        print(f"  {verdict:4}  {item['target']}: {fmt(item['value'], 3)} (target {item['limit']})")
    for kind, profile in (results.get("profile") or {}).items():
        print(f"\n{kind} profile: CPU by area ({profile.get('greenlet_switches')} greenlet switches):")
        for row in profile.get("by_area", [])[:10]:
            print(f"  {row['share']:6.1%}  {row['us_per_msg'] or 0:6.1f} us/msg  {row['function']}")

def main() -> int:
    args = parse_args()
    harness.use_daemon_bin(args.daemon_bin)
    settings = Settings(args.quick, args.runs, args.latency_messages)
    RESULTS.mkdir(parents=True, exist_ok=True)
    began = time.monotonic()
    bench = Bench(settings)  # first: it installs fauxqs, whose version machine() reads
    bench.vs = (Path(args.vs) / "bin" / "workerless").resolve() if args.vs else None
    results: dict[str, Any] = {"command": " ".join(["python bench/run.py", *sys.argv[1:]]), "quick": settings.quick,
                               "runs": settings.runs, "daemon_bin": str(harness.DAEMON_BIN), "vs": args.vs,
                               "started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "machine": machine(),
                               "scenarios": {}}
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(3))
    failed = []
    try:
        for name in args.chosen:
            log(f"bench: {name} ...")
            try:
                results["scenarios"][name] = KINDS[SCENARIOS[name].kind](bench, SCENARIOS[name])
            except Exception as error:  # noqa: BLE001 - report and go on with the other rows
                log(f"bench: {name} FAILED: {error!r}")
                results["scenarios"][name] = {"error": str(error)}
                failed.append(name)
        if not settings.quick and not args.no_profile and not args.only:
            log("bench: profile ...")
            results["profile"] = {kind: {**profiling.profile(bench, kind), "greenlet_switches": profiling.switches(
                bench, kind)} for kind in ("daemon", "baseline")}
    finally:
        bench.close()
    results["targets"] = [item for name, block in results["scenarios"].items() if "error" not in block
                          for item in check(SCENARIOS[name], block)]
    results["seconds"] = round(time.monotonic() - began, 1)
    results["machine"]["loadavg_end"] = os.getloadavg()
    Path(args.json).parent.mkdir(parents=True, exist_ok=True)
    Path(args.json).write_text(json.dumps(results, indent=2, default=str))
    report(results)
    print(f"wrote {args.json} in {results['seconds']:.0f}s")
    if failed:
        print(f"rows that failed to run: {', '.join(failed)}", file=sys.stderr)
        return 1
    return 1 if args.strict and any(item["pass"] is False for item in results["targets"]) else 0

if __name__ == "__main__":
    sys.exit(main())
