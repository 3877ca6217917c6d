"""The startup scenario: process start to first delivery, daemon against the plain baseline, and where the daemon's
start goes (a bare interpreter, a probe that patches gevent and imports what the daemon had imported by "workerless
started", and one -X importtime run's self time by package).
"""

from __future__ import annotations

import calendar
import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import harness
from figures import compare, spread
from harness import LOGS, Worker, make_baseline, unique
from scenario import Block, Check, Row, Scenario, check, compared, interleave

CONCURRENCY = 50
POLL_FOR = 20
KEYS = ("first_delivery_s", "started_s", "started_to_first_delivery_s", "exit_s", "first_delivery_to_exit_s",
        "cpu_s_to_exit", "peak_rss_mb")


def log_time_ms(worker: Worker, marker: str) -> float | None:
    """Epoch ms of the first JSON log line whose message starts with marker (the log has ms resolution,
    truncated: +0.5 ms puts it mid-millisecond)."""
    for line in worker.log_text().splitlines():
        if not line.startswith("{") or marker not in line:
            continue
        try:
            entry = json.loads(line)
        except ValueError:
            continue
        if not str(entry.get("message", "")).startswith(marker):
            continue
        stamp, _, millis = entry["time"].rstrip("Z").partition(".")
        return calendar.timegm(time.strptime(stamp, "%Y-%m-%dT%H:%M:%S")) * 1000 + int(millis or 0) + 0.5
    return None


def startup_try(bench: Any, kind: str, label: str, python_flags: tuple[str, ...] = ()) -> dict[str, Any]:
    """One start: a queue with one message waiting, the worker with --max-messages=1, timed from just
    before Popen to the sink's arrival (sink clock mapped to ours), then to its exit."""
    name = unique(label)
    url = bench.sqs.create(name)
    bench.sqs.send_one(url, "startup")
    bench.sink.reset(0)
    offset = bench.sink.clock_offset_ms()
    if kind == "daemon":
        worker = bench.daemon(label, queues=[name], concurrency=CONCURRENCY, poll_for=POLL_FOR,
                              extra=("--max-messages=1", "--log-format=json"))
    else:
        worker = make_baseline(label, bench.fauxqs.url, queues=[name], sink_url=bench.sink.url,
                               concurrency=CONCURRENCY, poll_for=POLL_FOR, max_messages=1)
        bench.workers.append(worker)
    worker.argv[1:1] = list(python_flags)
    popen_ms = time.time() * 1000
    worker.start()
    stats = bench.sink.wait(1, timeout=30)
    exit_ms = None
    deadline = time.monotonic() + 40
    while time.monotonic() < deadline:
        if worker.poll() is not None:
            exit_ms = time.time() * 1000 - popen_ms
            break
        time.sleep(0.002)
    if exit_ms is None:
        worker.kill()
    bench.sqs.delete(url)
    if not stats["count"]:
        raise RuntimeError(f"{label}: no delivery within 30 s; see {worker.log_path}")
    first_ms = stats["first"] - offset - popen_ms
    started_at = log_time_ms(worker, "workerless started") if kind == "daemon" else None
    started_ms = started_at - popen_ms if started_at is not None else None
    usage = worker.rusage
    return {"first_delivery_s": first_ms / 1000, "started_s": started_ms / 1000 if started_ms is not None else None,
            "started_to_first_delivery_s": (first_ms - started_ms) / 1000 if started_ms is not None else None,
            "exit_s": exit_ms / 1000 if exit_ms is not None else None,
            "first_delivery_to_exit_s": (exit_ms - first_ms) / 1000 if exit_ms is not None else None,
            "cpu_s_to_exit": usage.ru_utime + usage.ru_stime if usage is not None else None,
            "peak_rss_mb": usage.ru_maxrss / 1024 if usage is not None else None, "exit_code": worker.exit_code}


PROBE = r"""
import time
began = time.time() * 1000
import importlib, json, sys
root, popen_ms, modules = sys.argv[1], float(sys.argv[2]), sys.argv[3:]
sys.path.insert(0, root)
try:
    from workerless_gevent.entry import patch_gevent
except ImportError:
    from gevent.monkey import patch_all as patch_gevent
patch_gevent()
patched = time.time() * 1000
missing = []
for name in modules:
    try:
        importlib.import_module(name)
    except Exception:
        missing.append(name)
imported = time.time() * 1000
print(json.dumps({"interpreter_ms": began - popen_ms, "patch_ms": patched - began, "imports_ms": imported - patched,
                  "modules": len(modules), "missing": missing}))
"""

GROUPS = (("gevent (greenlet, zope)", ("gevent", "greenlet", "zope", "_cffi_backend")),
          ("boto3/botocore (urllib3, jmespath, dateutil, s3transfer)",
           ("boto3", "botocore", "urllib3", "jmespath", "dateutil", "s3transfer", "six")),
          ("workerless_gevent", ("workerless_gevent",)))


def import_group(module: str) -> str:
    top = module.split(".", 1)[0]
    for label, packages in GROUPS:
        if top in packages:
            return label
    if top in sys.stdlib_module_names or top.startswith("_"):
        return "standard library"
    return "other third-party (docopt, yaml, croniter, prometheus_client, ...)"


def parse_importtime(text: str, marker: str = "workerless started") -> dict[str, Any]:
    """-X importtime lines of a log: self time by group and package, before and after the marker line, and
    the top-level modules imported before it (in order)."""
    phase = "before"
    groups: dict[str, dict[str, float]] = {"before": {}, "after": {}}
    packages: dict[str, float] = {}
    top_level: list[str] = []
    totals = {"before": 0.0, "after": 0.0}
    script_began = False  # imports before bin/workerless's first one are the interpreter's own start (site, ...)
    for line in text.splitlines():
        if marker in line:
            phase = "after"
            continue
        if not line.startswith("import time:") or "self [us]" in line:
            continue
        parts = line.split("|")
        if len(parts) < 3:
            continue
        field = parts[2][1:]
        module = field.strip()
        level = (len(field) - len(field.lstrip(" "))) // 2
        self_ms = int(parts[0].split(":", 1)[1]) / 1000
        script_began = script_began or module.startswith("workerless_gevent")
        group = import_group(module) if script_began else "interpreter start (site, encodings, ...)"
        groups[phase][group] = groups[phase].get(group, 0.0) + self_ms
        totals[phase] += self_ms
        if phase == "before":
            top = module.split(".", 1)[0]
            packages[top] = packages.get(top, 0.0) + self_ms
            if level == 0:
                top_level.append(module)
    top_packages = sorted(packages.items(), key=lambda item: -item[1])[:12]
    return {"self_ms_by_group_before_started": groups["before"], "self_ms_by_group_after_started": groups["after"],
            "self_ms_before_started": totals["before"], "self_ms_after_started": totals["after"],
            "top_packages_before_started_ms": dict(top_packages), "top_level_modules": top_level}


def startup_breakdown(bench: Any) -> dict[str, Any]:
    """Where the daemon's start goes (one daemon run under -X importtime, a probe, a bare interpreter)."""
    bare = []
    for _ in range(5):
        began = time.monotonic()
        subprocess.run([sys.executable, "-c", "pass"], check=True)
        bare.append((time.monotonic() - began) * 1000)
    instrumented = startup_try(bench, "daemon", "startup-importtime", python_flags=("-X", "importtime"))
    parsed = parse_importtime((LOGS / "startup-importtime.log").read_text(errors="replace"))
    modules = [m for m in parsed.pop("top_level_modules") if m not in ("__main__",)]
    probes = []
    root = str(harness.DAEMON_BIN.resolve().parent.parent)
    for _ in range(3):
        popen_ms = time.time() * 1000
        done = subprocess.run([sys.executable, "-c", PROBE, root, repr(popen_ms), *modules], capture_output=True, cwd=root,
                              text=True, env=harness.worker_env(bench.fauxqs.url), timeout=60)
        if done.returncode != 0:
            raise RuntimeError(f"startup probe failed: {done.stderr[-600:]}")
        probes.append(json.loads(done.stdout.strip().splitlines()[-1]))
    probe = {key: spread([p[key] for p in probes]) for key in ("interpreter_ms", "patch_ms", "imports_ms")}
    probe["modules"] = probes[-1]["modules"]
    probe["missing"] = probes[-1]["missing"]
    child = []  # the credentials child alone (workerless_gevent/aws/child.py), in a checkout that has one
    if (Path(root) / "workerless_gevent" / "aws/child.py").exists():
        request = json.dumps({"profile": None, "region": None, "endpoint_url": None, "ca_bundle": None,
                              "origin": "startup probe", "services": ["sqs"]})
        for _ in range(3):  # the renewal form: botocore's import and the resolution, nothing overlapped
            began = time.monotonic()
            subprocess.run([sys.executable, "-P", "-m", "workerless_gevent.aws.child", request], check=True,
                           cwd=root, env={**harness.worker_env(bench.fauxqs.url), "PYTHONPATH": root},
                           capture_output=True, timeout=60)
            child.append((time.monotonic() - began) * 1000)
    return {"bare_interpreter_ms": spread(bare), "probe": probe, "importtime": parsed,
            "credentials_child_ms": spread(child) if child else None,
            "importtime_run": {"started_s": instrumented["started_s"],
                               "first_delivery_s": instrumented["first_delivery_s"]}}


def startup(bench: Any) -> Block:
    tries = 3 if bench.settings.quick else 5  # per run and side
    # Bytecode as `pip install` leaves it: without it (PYTHONDONTWRITEBYTECODE, a fresh checkout) every start
    # compiles the package's sources again, about 40 ms here.
    root = harness.DAEMON_BIN.resolve().parent.parent
    subprocess.run([sys.executable, "-m", "compileall", "-q", str(root / "workerless_gevent")], check=True)
    runs = interleave(bench.settings.runs * tries, ("daemon", "baseline"),
                      lambda kind, i: startup_try(bench, kind, f"startup-{kind}-{i // tries}-{i % tries}"),
                      lambda kind, i, r: (f"startup {kind} run {i // tries + 1}.{i % tries + 1}: first delivery "
                                          f"{r['first_delivery_s']:.3f} s, started {r['started_s'] or 0:.3f} s, exit "
                                          f"{r['exit_s'] or float('nan'):.3f} s, CPU {r['cpu_s_to_exit'] or 0:.3f} s"))
    out = compare(runs, KEYS)
    return {**out, "tries": len(runs["daemon"]), "concurrency": CONCURRENCY, "poll_for": POLL_FOR,
            "breakdown": startup_breakdown(bench)}


def rows(block: Block) -> list[Row]:
    return [compared(label, block, key, digits) for label, key, digits in (
        ("startup: Popen -> first delivery, s", "first_delivery_s", 3),
        ("  startup: Popen -> 'workerless started', s", "started_s", 3),
        ("  startup: 'started' -> first delivery, s", "started_to_first_delivery_s", 3),
        ("  startup: first delivery -> exit (--max-messages=1), s", "first_delivery_to_exit_s", 3),
        ("  startup: CPU s until exit", "cpu_s_to_exit", 3), ("  startup: peak RSS MB", "peak_rss_mb", 1))]


def checks(block: Block) -> list[Check]:
    return [check("startup: process start to first delivery, daemon (median)",
                  block["daemon"]["first_delivery_s"]["median"], "<= 0.25 s", lambda v: v <= 0.25)]


def details(block: Block) -> list[str]:
    """The start-up breakdown, as lines for the report."""
    br = block["breakdown"]
    med = {key: block["daemon"][key]["median"] for key in ("started_s", "started_to_first_delivery_s",
                                                           "first_delivery_s")}
    probe = br["probe"]
    interp, patch, imports = (probe[k]["median"] for k in ("interpreter_ms", "patch_ms", "imports_ms"))
    lines = ["", f"daemon start-up, where the time goes (medians; {block['tries']} starts, "
                 f"probe x3, one -X importtime run):",
             f"  bare interpreter (python -c pass, start to exit)    {br['bare_interpreter_ms']['median']:7.1f} ms",
             f"  probe: Popen -> first statement (interpreter, site)  {interp:7.1f} ms",
             f"  probe: gevent patch (entry.patch_gevent)            {patch:7.1f} ms",
             f"  probe: imports the daemon made before 'started'     {imports:7.1f} ms "
             f"({probe['modules']} top-level modules)"]
    if br.get("credentials_child_ms"):
        lines.append(f"  credentials child alone, start to exit (aws.child; beside the above) "
                     f"{br['credentials_child_ms']['median']:7.1f} ms")
    if med["started_s"] is not None:
        rest = med["started_s"] * 1000 - interp - patch - imports
        lines += [f"  rest until 'workerless started'                    {rest:7.1f} ms "
                  "(config, session, clients, GetQueueUrl/Attributes, Daemon)",
                  f"  = Popen -> 'workerless started'                    {med['started_s'] * 1000:7.1f} ms",
                  f"  'started' -> first delivery at the sink           "
                  f"{(med['started_to_first_delivery_s'] or 0) * 1000:7.1f} ms"]
    lines.append(f"  Popen -> first delivery                             {med['first_delivery_s'] * 1000:7.1f} ms")
    it = br["importtime"]
    lines.append(f"  -X importtime (inflates imports), self time before 'started': "
                 f"{it['self_ms_before_started']:.1f} ms, after: {it['self_ms_after_started']:.1f} ms")
    for group, ms in sorted(it["self_ms_by_group_before_started"].items(), key=lambda item: -item[1]):
        lines.append(f"    {ms:7.1f} ms  {group}")
    lines.append("    top packages: " + ", ".join(f"{name} {ms:.0f}" for name, ms in
                                                  it["top_packages_before_started_ms"].items()))
    return lines


SCENARIOS = (Scenario("startup", startup, rows, checks, details),)
