"""The scale scenarios of bench/run.py: startup, scale (50 idle queues, and 1000 slots on one) and lambda.

Each scenario is a function of the Bench of bench/session.py (fauxqs, the sink, the runner's SQS client)
returning the figures for the JSON; bench/scenarios.py names them for `--only`, and `table_rows`,
`details` and `target_checks` put them in bench/report.py's printed report. The memory scenario's
c=1000 case stays in bench/scenarios.py, beside c=50 and c=500.

* startup  time from just before Popen to the first delivery at the sink, daemon (HTTP target, one
           queue with a message waiting, --max-messages=1) against bench/baseline.py the same way;
           the daemon's "workerless started" log time; the CPU seconds each used until it exited.
           Once per scenario, where the daemon's time goes: a bare interpreter, a probe that does
           what the daemon does before "started" up to its imports (gevent patch, then the modules
           the daemon imported, taken from a `-X importtime` run of the daemon), and that run's
           import self-time by package.
* scale    a daemon on 50 empty queues (strict priority, concurrency 50) and one on 1 queue with
           concurrency 1000, and the plain baseline the same two ways, all four at once: SQS
           requests (counted by fauxqs), CPU and RSS over an idle window; then one message at a time
           to the lowest-priority of the 50 queues, send -> arrival at the sink, daemon and baseline
           in turn (the other one stopped with SIGSTOP meanwhile).
* lambda   CPU per message of the daemon delivering a backlog to a Lambda function (batch_size 1)
           against the same daemon delivering it over HTTP, runs interleaved. The Invoke API is the
           sink's /2015-03-31/functions/NAME/invocations route (bench/sink.mjs), reached through
           AWS_ENDPOINT_URL_LAMBDA, so any Lambda client the daemon builds from boto3's endpoint
           resolution (botocore's, or a wire of its own) reaches it.
"""

from __future__ import annotations

import calendar
import json
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import harness
from harness import LOGS, Worker, log, make_baseline, make_daemon, percentile, spread, unique

SCENARIOS = ("startup", "scale", "lambda")
POLL_FOR_DEFAULT = 20  # SQS's longest long poll, the setting the idle expectation is given for
LAMBDA_FUNCTION = "bench-fn"


class ScaleSettings:
    def __init__(self, quick: bool) -> None:
        self.startup_tries = 3 if quick else 5  # per run and side
        self.startup_concurrency = 50
        self.queues = 50
        self.concurrency = 50
        self.wide_concurrency = 1000
        self.poll_for = POLL_FOR_DEFAULT
        self.idle_window = 40.0 if quick else 60.0  # two poll_for or more: every queue polled at least twice
        self.idle_warmup = 3.0
        self.wake_tries = 5 if quick else 20
        self.lambda_messages = 2000 if quick else 5000
        self.lambda_concurrency = 50


def by_kind(runs: dict[str, list[dict[str, Any]]], keys: tuple[str, ...], over: str, under: str) -> dict[str, Any]:
    """{kind: {key: spread}} and the ratio of medians over/under for each key."""
    out: dict[str, Any] = {kind: {key: spread([r.get(key) for r in results]) for key in keys}
                           for kind, results in runs.items()}
    ratios = {}
    for key in keys:
        a, b = out[over][key]["median"], out[under][key]["median"]
        if a is not None and b:
            ratios[key] = a / b
    out[f"ratio_{over}_to_{under}"] = ratios
    return out


# ---------------------------------------------------------------- startup


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
    s: ScaleSettings = bench.scale_settings
    name = unique(label)
    url = bench.sqs.create(name)
    bench.sqs.send_one(url, "startup")
    bench.sink.reset(0)
    offset = bench.sink.clock_offset_ms()
    if kind == "daemon":
        worker = make_daemon(label, bench.fauxqs.url, queues=[name], sink_url=bench.sink.url,
                             concurrency=s.startup_concurrency, poll_for=s.poll_for,
                             extra=("--max-messages=1", "--log-format=json"))
    else:
        worker = make_baseline(label, bench.fauxqs.url, queues=[name], sink_url=bench.sink.url,
                               concurrency=s.startup_concurrency, poll_for=s.poll_for, max_messages=1)
    worker.argv[1:1] = list(python_flags)
    bench.workers.append(worker)
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
    cpu = worker.rusage.ru_utime + worker.rusage.ru_stime if worker.rusage is not None else None
    return {
        "first_delivery_s": first_ms / 1000,
        "started_s": started_ms / 1000 if started_ms is not None else None,
        "started_to_first_delivery_s": (first_ms - started_ms) / 1000 if started_ms is not None else None,
        "exit_s": exit_ms / 1000 if exit_ms is not None else None,
        "first_delivery_to_exit_s": (exit_ms - first_ms) / 1000 if exit_ms is not None else None,
        "cpu_s_to_exit": cpu,
        "peak_rss_mb": worker.rusage.ru_maxrss / 1024 if worker.rusage is not None else None,
        "exit_code": worker.exit_code,
    }


# What the probe does: the interpreter's start is Popen -> its first statement; then the daemon's own first
# step (entry.patch_gevent, or gevent's patch_all for a checkout without it); then every module the daemon
# had imported by "workerless started", in the order of the -X importtime run, without -X importtime.
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


def startup(bench: Any) -> dict[str, Any]:
    s: ScaleSettings = bench.scale_settings
    # Bytecode as `pip install` leaves it: without it (PYTHONDONTWRITEBYTECODE, a fresh checkout) every start
    # compiles the package's sources again, about 40 ms here.
    root = harness.DAEMON_BIN.resolve().parent.parent
    subprocess.run([sys.executable, "-m", "compileall", "-q", str(root / "workerless_gevent")], check=True)
    keys = ("first_delivery_s", "started_s", "started_to_first_delivery_s", "exit_s", "first_delivery_to_exit_s",
            "cpu_s_to_exit", "peak_rss_mb")
    runs: dict[str, list[dict[str, Any]]] = {"daemon": [], "baseline": []}
    for index in range(bench.settings.runs):
        for attempt in range(s.startup_tries):
            for kind in ("daemon", "baseline"):
                result = startup_try(bench, kind, f"startup-{kind}-{index}-{attempt}")
                runs[kind].append(result)
                started = result["started_s"]
                log(f"  startup {kind} run {index + 1}.{attempt + 1}: first delivery {result['first_delivery_s']:.3f} s"
                    + (f" (started {started:.3f} s)" if started is not None else "")
                    + f", exit {result['exit_s'] or float('nan'):.3f} s, CPU {result['cpu_s_to_exit'] or 0:.3f} s")
    out = by_kind(runs, keys, "daemon", "baseline")
    out["tries"] = len(runs["daemon"])
    out["concurrency"] = s.startup_concurrency
    out["poll_for"] = s.poll_for
    out["breakdown"] = startup_breakdown(bench)
    return out


# ---------------------------------------------------------------- scale


def sqs_requests(bench: Any, names: list[str]) -> dict[str, int]:
    counts = bench.fauxqs.stats()["counts"]
    total: dict[str, int] = {}
    for name in names:
        for action, n in counts.get(name, {}).items():
            total[action] = total.get(action, 0) + n
    return total


def wake_tries(bench: Any, url: str, tries: int, timeout: float, rng_seed: int) -> list[float]:
    """One message at a time to `url`: ms from just before SendMessage to its arrival at the sink."""
    import random

    rng = random.Random(rng_seed)
    bench.sink.reset(0)
    offset = bench.sink.clock_offset_ms()
    latencies = []
    for attempt in range(tries):
        time.sleep(rng.uniform(0.3, 0.8))
        sent = time.time() * 1000
        bench.sqs.send_one(url, "wake")
        stats = bench.sink.wait(attempt + 1, timeout=timeout)
        if stats["count"] < attempt + 1:
            latencies.append(float("inf"))
            break
        latencies.append(stats["last"] - offset - sent)
    return latencies


def scale(bench: Any) -> dict[str, Any]:
    """Idle figures of four workers at once (daemon and baseline: 50 queues, and 1 queue at c=1000), then
    wake-up latency on the lowest-priority of the 50 queues, daemon and baseline in turn."""
    s: ScaleSettings = bench.scale_settings
    setups = {"q50": (s.queues, s.concurrency), "c1000": (1, s.wide_concurrency)}
    idle: dict[str, dict[str, list]] = {case: {"daemon": [], "baseline": []} for case in setups}
    wake: dict[str, list] = {"daemon": [], "baseline": []}
    for index in range(bench.settings.runs):
        group: dict[tuple[str, str], tuple[list[str], list[str], Worker]] = {}
        for case, (queues, concurrency) in setups.items():
            for kind in ("daemon", "baseline"):
                names = [unique(f"scale-{case}-{kind[0]}{index}-{n:02d}") for n in range(queues)]
                urls = [bench.sqs.create(name) for name in names]  # in priority order: the last is the lowest
                worker = bench.worker(kind, f"scale-{case}-{kind}-{index}", queues=names, concurrency=concurrency,
                                      poll_for=s.poll_for)
                group[(case, kind)] = (names, urls, worker)
        for *_, worker in group.values():
            worker.wait_started(60)
        time.sleep(s.idle_warmup)
        before = {key: (sqs_requests(bench, names), worker.cpu()) for key, (names, _, worker) in group.items()}
        began = time.monotonic()
        time.sleep(s.idle_window)
        window = time.monotonic() - began
        for key, (names, _, worker) in group.items():
            requests_before, cpu_before = before[key]
            requests_after, cpu_after = sqs_requests(bench, names), worker.cpu()
            by_action = {a: n - requests_before.get(a, 0) for a, n in requests_after.items()
                         if n - requests_before.get(a, 0)}
            count = sum(by_action.values())
            queues = len(names)
            result = {
                "requests_per_min": count * 60 / window,
                "expected_per_min": queues * 60 / s.poll_for,
                "requests": count,
                "by_action": by_action,
                "window_s": window,
                "cpu_s_per_idle_min": (cpu_after - cpu_before) * 60 / window
                if cpu_after is not None and cpu_before is not None else None,
                "rss_mb": (harness.proc_status_kb(worker.pid, "VmRSS") or 0) / 1024,
                "peak_rss_mb": (harness.proc_status_kb(worker.pid, "VmHWM") or 0) / 1024,
            }
            case, kind = key
            idle[case][kind].append(result)
            log(f"  scale idle {case} {kind} run {index + 1}: {result['requests_per_min']:.1f} requests/min "
                f"(expected {result['expected_per_min']:.0f} for one long poll per queue per {s.poll_for} s), "
                f"{result['cpu_s_per_idle_min']:.3f} CPU s/min, RSS {result['rss_mb']:.1f} MB")
        for kind in ("daemon", "baseline"):  # the 1000-slot workers are done
            names, urls, worker = group[("c1000", kind)]
            worker.stop()
        # Wake-up: one side at a time, the other one frozen so that its polling does not share the cores.
        order = ("daemon", "baseline")
        for kind in order:
            other = group[("q50", "baseline" if kind == "daemon" else "daemon")][2]
            other.signal(signal.SIGSTOP)
            try:
                names, urls, worker = group[("q50", kind)]
                time.sleep(0.5)
                latencies = wake_tries(bench, urls[-1], s.wake_tries, s.poll_for + 10, rng_seed=index)
            finally:
                other.signal(signal.SIGCONT)
            result = {"p50_ms": percentile(latencies, 50), "p99_ms": percentile(latencies, 99),
                      "max_ms": max(latencies), "latencies_ms": [round(x, 2) for x in latencies]}
            wake[kind].append(result)
            log(f"  scale wake {kind} run {index + 1} (lowest of {s.queues} queues): p50 {result['p50_ms']:.1f} ms, "
                f"p99 {result['p99_ms']:.1f} ms")
        for (case, kind), (names, urls, worker) in group.items():
            if worker.exit_code is None:
                worker.stop()
            bench.drop_queues(names, urls)
    keys = ("requests_per_min", "cpu_s_per_idle_min", "rss_mb", "peak_rss_mb")
    out: dict[str, Any] = {"poll_for": s.poll_for, "idle_window_s": s.idle_window, "queues": s.queues,
                           "concurrency": s.concurrency, "wide_concurrency": s.wide_concurrency}
    for case, (queues, _) in setups.items():
        out[case] = by_kind(idle[case], keys, "daemon", "baseline")
        out[case]["expected_per_min"] = queues * 60 / s.poll_for
        out[case]["by_action_last_run"] = {kind: idle[case][kind][-1]["by_action"] for kind in ("daemon", "baseline")}
    out["wake"] = by_kind(wake, ("p50_ms", "p99_ms", "max_ms"), "daemon", "baseline")
    for kind in wake:
        pooled = [x for run in wake[kind] for x in run["latencies_ms"]]
        out["wake"][kind]["pooled_p50_ms"] = percentile(pooled, 50)
        out["wake"][kind]["pooled_p99_ms"] = percentile(pooled, 99)
    out["wake"]["tries"] = s.wake_tries
    return out


# ---------------------------------------------------------------- lambda


def lambda_(bench: Any) -> dict[str, Any]:
    """CPU per message, Lambda target (batch_size 1) against the HTTP target, same daemon, same backlog."""
    s: ScaleSettings = bench.scale_settings
    messages, concurrency = s.lambda_messages, s.lambda_concurrency
    options = {"http": {}, "lambda": {"lambda_function": LAMBDA_FUNCTION}}
    if not bench.settings.quick:  # as in throughput: the first backlogs after the node parts start run slower
        for kind in ("http", "lambda"):
            bench.backlog_run("daemon", f"lambda-{kind}-warmup", concurrency=concurrency, messages=messages // 2,
                              delay_ms=0, **options[kind])
    runs: dict[str, list] = {"lambda": [], "http": []}
    for index in range(bench.settings.runs):
        for kind in ("http", "lambda"):
            result = bench.backlog_run("daemon", f"lambda-{kind}-{index}", concurrency=concurrency,
                                       messages=messages, delay_ms=0, **options[kind])
            result["invocations"] = bench.sink.stats()["invocations"]
            runs[kind].append(result)
            log(f"  lambda scenario, {kind} target run {index + 1}: {result['cpu_us_per_msg']:.0f} us CPU/msg, "
                f"{result['msgs_per_s']:.0f} msg/s ({result['cpu_share_of_one_core']:.0%} of a core), "
                f"{result['peak_rss_mb']:.1f} MB" + (f", {result['invocations']} invocations" if kind == "lambda"
                                                      else ""))
    keys = ("cpu_us_per_msg", "msgs_per_s", "cpu_share_of_one_core", "peak_rss_mb", "sink_cpu_us_per_msg",
            "left_in_queue")
    out = by_kind(runs, keys, "lambda", "http")
    out["paired_cpu_ratio"] = spread([a["cpu_us_per_msg"] / b["cpu_us_per_msg"]
                                      for a, b in zip(runs["lambda"], runs["http"]) if b["cpu_us_per_msg"]])
    out.update(messages=messages, concurrency=concurrency, lambda_batch_size=1,
               invocations_last_run=runs["lambda"][-1]["invocations"])
    return out


RUNNERS = {"startup": startup, "scale": scale, "lambda": lambda_}


# ---------------------------------------------------------------- report


def target_checks(scenario: dict[str, Any]) -> list[tuple[str, Any, str, bool | None]]:
    """(target, value, limit, pass) of the scale scenarios present."""
    checks: list[tuple[str, Any, str, bool | None]] = []

    def check(name: str, value: Any, limit: str, ok: bool) -> None:
        checks.append((name, value, limit, None if value is None else ok))

    if "startup" in scenario:
        value = scenario["startup"]["daemon"]["first_delivery_s"]["median"]
        check("startup: process start to first delivery, daemon (median)", value, "<= 0.25 s",
              value is not None and value <= 0.25)
    if "scale" in scenario:
        block = scenario["scale"]
        for case in ("q50", "c1000"):
            value = block[case]["daemon"]["requests_per_min"]["max"]
            limit = block[case]["expected_per_min"] + 2
            what = f"{block['queues']} empty queues" if case == "q50" else f"1 empty queue, c={block['wide_concurrency']}"
            check(f"scale: idle SQS requests/min, {what}, poll_for={block['poll_for']} (worst run)", value,
                  f"<= {limit:g}", value is not None and value <= limit)
        value = block["wake"]["daemon"]["p99_ms"]["median"]
        check(f"scale: wake latency p99, lowest of {block['queues']} queues", value, "< 50 ms",
              value is not None and value < 50)
    if "lambda" in scenario:
        value = scenario["lambda"]["paired_cpu_ratio"]["median"]
        check("lambda: daemon CPU/msg Lambda target (batch_size 1) / HTTP target", value, "<= 2x",
              value is not None and value <= 2)
    return checks


def table_rows(scenario: dict[str, Any], cell: Any, ratio_text: Any) -> list[tuple[str, str, str, str]]:
    rows: list[tuple[str, str, str, str]] = []

    def add(label: str, block: dict[str, Any], key: str, digits: int = 1, over: str = "daemon",
            under: str = "baseline") -> None:
        ratio = block.get(f"ratio_{over}_to_{under}", {}).get(key)
        rows.append((label, cell(block[over].get(key), digits), cell(block[under].get(key), digits), ratio_text(ratio)))

    if "startup" in scenario:
        block = scenario["startup"]
        add("startup: Popen -> first delivery, s", block, "first_delivery_s", 3)
        add("  startup: Popen -> 'workerless started', s", block, "started_s", 3)
        add("  startup: 'started' -> first delivery, s", block, "started_to_first_delivery_s", 3)
        add("  startup: first delivery -> exit (--max-messages=1), s", block, "first_delivery_to_exit_s", 3)
        add("  startup: CPU s until exit", block, "cpu_s_to_exit", 3)
        add("  startup: peak RSS MB", block, "peak_rss_mb")
    if "scale" in scenario:
        block = scenario["scale"]
        for case in ("q50", "c1000"):
            what = f"{block['queues']} queues c={block['concurrency']}" if case == "q50" else \
                f"1 queue c={block['wide_concurrency']}"
            add(f"scale idle {what}: SQS requests/min (expected {block[case]['expected_per_min']:g})", block[case],
                "requests_per_min")
            add(f"  idle {what}: CPU s per idle minute", block[case], "cpu_s_per_idle_min", 3)
            add(f"  idle {what}: RSS MB", block[case], "rss_mb")
        add(f"scale wake, lowest of {block['queues']} queues: p50 ms", block["wake"], "p50_ms")
        add(f"scale wake, lowest of {block['queues']} queues: p99 ms", block["wake"], "p99_ms")
    if "lambda" in scenario:
        block = scenario["lambda"]
        c = block["concurrency"]
        rows.append(("lambda scenario: columns are Lambda target | HTTP target, same daemon", "", "", ""))
        add(f"  CPU us/msg, c={c}, Lambda batch_size 1", block, "cpu_us_per_msg", 0, "lambda", "http")
        add(f"  msgs/s, c={c}", block, "msgs_per_s", 0, "lambda", "http")
        add("  peak RSS MB", block, "peak_rss_mb", 1, "lambda", "http")
        rows.append(("  CPU/msg Lambda / HTTP (paired runs)", cell(block["paired_cpu_ratio"], 2), "", ""))
    return rows


def details(scenario: dict[str, Any]) -> list[str]:
    """The start-up breakdown, as lines for the report."""
    if "startup" not in scenario:
        return []
    block = scenario["startup"]
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
