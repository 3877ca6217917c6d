#!/usr/bin/env python3
"""The workerless benchmark: one command, everything on 127.0.0.1 (BENCHMARKS.md, "How to run").

    python bench/run.py            full run: every scenario, 3 runs each, then a py-spy profile
    python bench/run.py --quick    smoke run: every scenario once, with few messages (about 2 min)

It starts fauxqs and the sink (services.py), runs each chosen scenario (scenarios.py) on one Bench (session.py),
holds the figures to their targets, prints the report and writes the JSON (report.py). FAUXQS_DELAY_MS=D in the
environment gives every scenario but latency a D ms SQS round trip.
"""

from __future__ import annotations

import argparse
import signal
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import harness  # noqa: E402
import profiling  # noqa: E402
import report  # noqa: E402
from harness import RESULTS, log  # noqa: E402
from scenarios import SCENARIOS, target_checks  # noqa: E402
from session import Bench, Settings  # noqa: E402


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="every scenario once, with few messages")
    parser.add_argument("--runs", type=int, help="runs per figure (default 3, or 1 with --quick)")
    parser.add_argument("--only", help="comma-separated scenarios: " + ",".join(SCENARIOS))
    parser.add_argument("--no-profile", action="store_true", help="skip the py-spy profile")
    parser.add_argument("--json", help="where to write the results (default bench/results/latest.json, "
                                       "or latest-quick.json with --quick)")
    parser.add_argument("--strict", action="store_true", help="exit 1 when a target is missed")
    parser.add_argument("--daemon-bin", help="bin/workerless of another checkout, e.g. to try a fix")
    parser.add_argument("--latency-messages", type=int,
                        help="backlog of each latency run (default 50000, or 5000 with --quick)")
    args = parser.parse_args(argv)
    args.chosen = args.only.split(",") if args.only else list(SCENARIOS)
    unknown = [name for name in args.chosen if name not in SCENARIOS]
    if unknown:
        parser.error(f"unknown scenario(s): {', '.join(unknown)}")
    if args.json is None:
        args.json = str(RESULTS / ("latest-quick.json" if args.quick else "latest.json"))
    return args


def run_scenarios(bench: Bench, chosen: list[str], results: dict[str, Any]) -> list[str]:
    """Run each chosen scenario into results["scenarios"]; the names of those that failed to run."""
    failed = []
    for name in chosen:
        log(f"bench: {name} ...")
        try:
            results["scenarios"][name] = SCENARIOS[name].run(bench)
        except Exception as error:  # noqa: BLE001 - report and go on with the other scenarios
            log(f"bench: {name} FAILED: {error}")
            results["scenarios"][name] = {"error": str(error)}
            failed.append(name)
    return failed


def run_profile(bench: Bench, results: dict[str, Any]) -> None:
    log("bench: profile ...")
    results["profile"] = {kind: profiling.profile(bench, kind) for kind in ("daemon", "baseline")}
    for kind in ("daemon", "baseline"):
        results["profile"][kind]["greenlet_switches"] = profiling.switches(bench, kind)


def main() -> int:
    args = parse_args()
    harness.use_daemon_bin(args.daemon_bin)
    settings = Settings(args.quick, args.runs, args.latency_messages)
    RESULTS.mkdir(parents=True, exist_ok=True)
    results = {**report.header(" ".join(["python bench/run.py", *sys.argv[1:]]), settings.quick, settings.runs),
               "scenarios": {}}
    bench = Bench(settings)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(3))
    try:
        failed = run_scenarios(bench, args.chosen, results)
        if not settings.quick and not args.no_profile and not args.only:
            run_profile(bench, results)
    finally:
        bench.close()
    ok = {name: value for name, value in results["scenarios"].items() if "error" not in value}
    results["targets"] = target_checks(ok)
    report.finish(results)
    report.write_results(args.json, results)
    report.print_report({**results, "scenarios": ok}, SCENARIOS)
    print(f"wrote {args.json} in {results['seconds']:.0f}s")
    if failed:
        print(f"scenarios that failed to run: {', '.join(failed)}", file=sys.stderr)
        return 1
    if args.strict and any(item["pass"] is False for item in results["targets"]):
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
