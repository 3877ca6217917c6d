"""Where the daemon's start goes: a bare interpreter, a probe of its patch and imports, one -X importtime run."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Callable

import harness
import processes
from figures import spread
from harness import LOGS
from scenario import Block


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


def startup_breakdown(bench: Any, importtime_run: Callable[[], dict[str, Any]]) -> dict[str, Any]:
    """Where the daemon's start goes (one daemon run under -X importtime, a probe, a bare interpreter)."""
    bare = []
    for _ in range(5):
        began = time.monotonic()
        subprocess.run([sys.executable, "-c", "pass"], check=True)
        bare.append((time.monotonic() - began) * 1000)
    instrumented = importtime_run()
    parsed = parse_importtime((LOGS / "startup-importtime.log").read_text(errors="replace"))
    modules = [m for m in parsed.pop("top_level_modules") if m not in ("__main__",)]
    probes = []
    root = str(harness.DAEMON_BIN.resolve().parent.parent)
    for _ in range(3):
        popen_ms = time.time() * 1000
        done = subprocess.run([sys.executable, "-c", PROBE, root, repr(popen_ms), *modules], capture_output=True,
                              cwd=root, text=True, env=processes.worker_env(bench.fauxqs.url), timeout=60)
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
                           cwd=root, env={**processes.worker_env(bench.fauxqs.url), "PYTHONPATH": root},
                           capture_output=True, timeout=60)
            child.append((time.monotonic() - began) * 1000)
    return {"bare_interpreter_ms": spread(bare), "probe": probe, "importtime": parsed,
            "credentials_child_ms": spread(child) if child else None,
            "importtime_run": {"started_s": instrumented["started_s"],
                               "first_delivery_s": instrumented["first_delivery_s"]}}




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
