"""The profile of bench/run.py: py-spy on a worker under the throughput scenario, and its greenlet switches.

Each writes what it measured and returns it; bench/profile_summary.py turns py-spy's stacks into the
CPU by folder and by area that the report prints.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from typing import Any

import harness
from harness import RESULTS, log
from processes import make_baseline
from profile_summary import summarize_profile
from session import Bench


def switches(bench: Bench, kind: str, messages: int = 3000) -> dict[str, Any]:
    """Greenlet switches per delivered message (bench/switches.py wraps the worker)."""
    name, url = bench.backlog(f"switches-{kind}", messages)
    if kind == "daemon":
        worker = bench.daemon(f"switches-{kind}", queues=[name], concurrency=50, extra=(f"--max-messages={messages}",))
    else:
        worker = make_baseline(f"switches-{kind}", bench.fauxqs.url, queues=[name], sink_url=bench.sink.url,
                               concurrency=50, poll_for=1, max_messages=messages)
        bench.workers.append(worker)
    worker.argv = [sys.executable, str(harness.BENCH / "switches.py"), *worker.argv[1:]]
    worker.start()
    if worker.wait(120) is None:
        worker.stop()
    bench.sqs.delete(url)
    delivered = bench.sink.stats()["count"]
    line = next((x for x in worker.log_text().splitlines() if x.startswith("SWITCHES ")), None)
    if line is None or not delivered:
        return {"error": "no switch count"}
    counts = json.loads(line.split(" ", 1)[1])
    return {"messages": delivered, "switches_per_msg": counts.get("switch", 0) / delivered}


def profile(bench: Bench, kind: str = "daemon", messages: int = 20000) -> dict[str, Any]:
    """py-spy on a worker under the throughput scenario (concurrency 50, instant sink)."""
    py_spy = find_py_spy()
    if py_spy is None:
        return {"error": "py-spy is not installed"}
    name, url = bench.backlog(f"profile-{kind}", messages)
    worker = bench.worker(kind, f"profile-{kind}", queues=[name], concurrency=50, max_messages=messages)
    worker.wait_started()
    raw = RESULTS / f"profile-{kind}.txt"
    spy = subprocess.Popen([py_spy, "record", "--pid", str(worker.pid), "--rate", "250", "--format", "raw",
                            "--output", str(raw), "--nonblocking"], stdout=subprocess.DEVNULL,
                           stderr=subprocess.PIPE, text=True)
    while worker.poll() is None:
        worker.sample(bench.sink)
        time.sleep(0.05)
    _, errors = spy.communicate(timeout=60)
    bench.sqs.delete(url)
    if not raw.exists():
        return {"error": (errors or "")[-500:]}
    with_cpu = [s for s in worker.samples if s.cpu is not None and s.count > 0]
    cpu_us = ((with_cpu[-1].cpu - with_cpu[0].cpu) / max(1, with_cpu[-1].count - with_cpu[0].count) * 1e6
              if len(with_cpu) >= 2 else None)
    summary = summarize_profile(raw, cpu_us)
    summary["kind"] = kind
    summary["messages"] = messages
    (RESULTS / f"profile-{kind}-summary.json").write_text(json.dumps(summary, indent=2))
    return summary


def find_py_spy() -> str | None:
    """py-spy on PATH or in this venv's scripts; installed from bench/requirements.txt if it is in neither."""
    here = os.path.dirname(sys.executable)  # a venv's scripts, when its bin is not on PATH
    py_spy = shutil.which("py-spy") or shutil.which("py-spy", path=here)
    if py_spy is None:
        log("bench: installing py-spy (bench/requirements.txt) for the profile ...")
        subprocess.run([sys.executable, "-m", "pip", "install", "-q", "-r",
                        str(harness.BENCH / "requirements.txt")], check=False)
        py_spy = shutil.which("py-spy") or shutil.which("py-spy", path=here)
    return py_spy
