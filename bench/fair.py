"""The fair kind: tenants on one standard queue (a fair queue: MessageGroupId names the tenant). One tenant's backlog
is there first; quiet tenants each send one message every `quiet_every_s` while it drains; the app holds each POST
`app_ms`. Per case (the daemon's [[queues]] keys: `max_concurrency_per_group` is the per-tenant cap, absent = none):
the quiet tenants' time from send to delivery while the backlog drains, their rate and the backlog's against the
ideal, and the backlog's mean deliveries in flight against the slots the cap (or the concurrency) leaves it.

fauxqs hands the queue out as SQS's fair queues do, quiet tenants first (bench/fauxqs_server.mjs /_bench/fair), or
with `in_send_order` in send order, which the daemon must look past itself. A daemon that does not start is reported."""

from __future__ import annotations

import threading
import time
from typing import Any

from figures import interleave, percentile, spreads
from flow_app import App, mean_in_flight, start_daemon
from harness import unique
from session import Bench
from shapes import Case, Row, place

KEYS = ("quiet_p50_ms", "quiet_p99_ms", "quiet_max_ms", "quiet_rate_over_ideal", "backlog_msgs_per_s",
        "backlog_over_ideal", "backlog_mean_in_flight", "backlog_share_of_slots", "backlog_peak_in_flight",
        "window_s", "quiet_delivered", "backlog_delivered")

class Quiet(threading.Thread):
    """The quiet tenants: one message each every `every` s (a send of its own each), until stopped."""

    def __init__(self, bench: Bench, url: str, tenants: int, every: float) -> None:
        super().__init__(daemon=True)
        self.bench, self.url, self.tenants, self.every = bench, url, tenants, every
        self.stopping, self.sent, self.error = threading.Event(), 0, None

    def run(self) -> None:
        began = time.monotonic()
        try:
            while not self.stopping.wait(max(0.0, began + self.every * (self.sent // self.tenants) - time.monotonic())):
                for tenant in range(self.tenants):
                    self.bench.sqs.send_batch(self.url, self.sent, 1, "quiet", f"quiet-{tenant}")
                    self.sent += 1
        except Exception as error:  # noqa: BLE001 - reported by the run
            self.error = error

def one(bench: Bench, row: Row, name: str, case: Case, index: int) -> dict[str, Any]:
    p, quick, label = row.params, bench.settings.quick, f"{row.name}-{name}-{index}"
    backlog, window = p["backlog"][quick], p["window_s"][quick]
    queue = unique(label)
    url = bench.sqs.create(queue)
    if not case.in_send_order:
        bench.fauxqs.make_fair(queue)
    bench.sqs.send_many(url, backlog, "backlog", group="backlog")
    app, quiet = App(case.app_ms / 1000), Quiet(bench, url, p["tenants"], p["quiet_every_s"])
    try:
        worker = start_daemon(bench, label, concurrency=case.concurrency, queues=[{"name": queue, **case.queue}],
                              target={"url": f"{app.url}/"})
    except RuntimeError as error:
        app.stop()
        bench.drop_queues([queue], [url])
        return {"error": str(error).splitlines()[-1]}
    quiet.start()
    began = time.monotonic()
    while time.monotonic() - began < window and len(tenant_ok(app, "backlog")) < backlog:
        time.sleep(0.1)
    ended, sent = time.monotonic(), quiet.sent
    quiet.stopping.set()
    quiet.join(10)
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and len(tenant_ok(app, None)) < sent:
        time.sleep(0.1)
    worker.stop()
    app.stop()
    bench.drop_queues([queue], [url])
    if quiet.error is not None:
        raise RuntimeError(f"{label}: the quiet tenants' sends failed: {quiet.error!r}")
    return figures(case, p, app, began, ended)

def tenant_ok(app: App, tenant: str | None) -> list[Any]:
    """The 2xx deliveries of one tenant (None: of the quiet ones)."""
    return [r for r in app.ok() if (r.tenant == tenant if tenant else (r.tenant or "").startswith("quiet"))]

def figures(case: Case, p: dict[str, Any], app: App, began: float, ended: float) -> dict[str, Any]:
    window, app_s = ended - began, case.app_ms / 1000
    cap = case.queue.get("max_concurrency_per_group")
    quiet = [r for r in tenant_ok(app, None) if r.arrived <= ended]
    waits = [r.waited * 1000 for r in quiet if r.waited is not None]
    backlog = [r for r in tenant_ok(app, "backlog") if r.arrived <= ended]
    quiet_ideal = p["tenants"] / p["quiet_every_s"]
    slots = min(cap or case.concurrency, case.concurrency - quiet_ideal * app_s)  # what the cap leaves the backlog
    start = min((r.arrived for r in backlog), default=began)
    in_flight = mean_in_flight(backlog, start, ended)
    return {"quiet_p50_ms": percentile(waits, 50) if waits else None,
            "quiet_p99_ms": percentile(waits, 99) if waits else None, "quiet_max_ms": max(waits, default=None),
            "quiet_delivered": len(quiet), "quiet_rate_over_ideal": len(quiet) / window / quiet_ideal,
            "backlog_delivered": len(backlog), "backlog_msgs_per_s": len(backlog) / (ended - start),
            "backlog_over_ideal": len(backlog) / (ended - start) / (slots / app_s), "window_s": window,
            "backlog_mean_in_flight": in_flight, "backlog_share_of_slots": in_flight / slots,
            "backlog_peak_in_flight": app.peak.get("backlog"), "cap": cap}

def run(bench: Bench, row: Row) -> dict[str, Any]:
    runs = interleave(bench.settings.runs, row.cases, lambda name, i: one(bench, row, name, row.cases[name], i),
                      lambda name, i, r: f"{row.name} {name} run {i + 1}: " + ", ".join(
                          f"{key} {value:.3g}" if isinstance(value, float) else f"{key} {value}"
                          for key, value in r.items()))
    block: dict[str, Any] = dict(row.params.get("block", {}))
    for name, results in runs.items():
        measured = [r for r in results if "error" not in r]
        place(block, name, {**spreads(measured, KEYS), "cap": row.cases[name].queue.get("max_concurrency_per_group"),
                            **({"error": results[0]["error"]} if not measured else {})})
    return block
