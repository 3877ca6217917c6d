"""Where the CPU goes: the profile a full run ends with (py-spy on each worker draining a backlog at c=50, turned into
CPU by folder and area by bench/profile_summary.py; greenlet switches per message by bench/switches.py), and the
instructions kind: instructions per message under callgrind, the hot path's cost without the machine's noise. Each
daemon (this checkout's, with run.py --vs the other's too) drains `small` and then `large` messages at c=50 under
`valgrind --tool=callgrind`; the difference over the messages between them is the instructions per message, start-up
and stop cancelled out. PYTHONHASHSEED is fixed so dict layouts repeat; system calls are not counted."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import harness
from harness import RESULTS, log
from profile_summary import summarize_profile
from session import Bench
from shapes import Case, Row

def switches(bench: Bench, kind: str, messages: int = 3000) -> dict[str, Any]:
    """Greenlet switches per delivered message (bench/switches.py wraps the worker)."""
    name, url = bench.backlog(f"switches-{kind}", messages)
    worker = bench.worker(Case(worker=kind), f"switches-{kind}", [name], max_messages=messages, start=False)
    worker.argv = [sys.executable, str(harness.BENCH / "switches.py"), *worker.argv[1:]]
    if worker.start().wait(120) is None:
        worker.stop()
    bench.sqs.delete(url)
    delivered = bench.sink.stats()["count"]
    line = next((x for x in worker.log_text().splitlines() if x.startswith("SWITCHES ")), None)
    if line is None or not delivered:
        return {"error": "no switch count"}
    return {"messages": delivered, "switches_per_msg": json.loads(line.split(" ", 1)[1]).get("switch", 0) / delivered}

def profile(bench: Bench, kind: str = "daemon", messages: int = 20000) -> dict[str, Any]:
    """py-spy on a worker draining a backlog (concurrency 50, instant sink)."""
    py_spy = find_py_spy()
    if py_spy is None:
        return {"error": "py-spy is not installed"}
    name, url = bench.backlog(f"profile-{kind}", messages)
    worker = bench.worker(Case(worker=kind), f"profile-{kind}", [name], max_messages=messages)
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
    summary = {**summarize_profile(raw, cpu_us), "kind": kind, "messages": messages}
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

def instructions(bench: Bench, daemon_bin: Path, label: str, messages: int) -> int:
    """The instructions callgrind counted for one whole run of the daemon draining `messages`."""
    harness.use_daemon_bin(daemon_bin)
    name, url = bench.backlog(f"instructions-{label}", messages)
    worker = bench.daemon(f"instructions-{label}", queues=[name], concurrency=50, extra=(f"--max-messages={messages}",))
    out = RESULTS / f"callgrind-{label}-{messages}.out"
    worker.argv = ["valgrind", "--tool=callgrind", f"--callgrind-out-file={out}", *worker.argv]
    worker.env["PYTHONHASHSEED"] = "0"
    if worker.start().wait(60 + messages / 5) is None:
        worker.stop()
    bench.sqs.delete(url)
    if (delivered := bench.sink.stats()["count"]) < messages:
        raise RuntimeError(f"{label}: only {delivered}/{messages} delivered; see {worker.log_path}")
    found = re.search(r"^(?:summary|totals):\s+(\d+)", out.read_text(), re.M)
    if found is None:
        raise RuntimeError(f"{label}: no totals in {out}")
    return int(found.group(1))

def instructions_row(bench: Bench, row: Row) -> dict[str, Any]:
    if shutil.which("valgrind") is None:
        raise RuntimeError("the instructions row needs valgrind (apt-get install valgrind)")
    p, this, out = row.params, harness.DAEMON_BIN, {}
    try:
        for side, daemon_bin in {"this": this, **({"vs": bench.vs} if bench.vs else {})}.items():
            small, large = (instructions(bench, daemon_bin, side, p[size]) for size in ("small", "large"))
            out[side] = (large - small) / (p["large"] - p["small"])
            harness.log(f"  {side} ({daemon_bin}): {out[side]:,.0f} instructions per message")
    finally:
        harness.use_daemon_bin(this)
    return {"small": p["small"], "large": p["large"], "per_message": out,
            "this_over_vs": out["this"] / out["vs"] if "vs" in out else None}
