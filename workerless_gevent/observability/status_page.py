"""The human view of /status: one self-refreshing HTML page with no external assets."""

from __future__ import annotations

from collections.abc import Sequence
from html import escape
from typing import Any

from .charts import CHART_STYLE, render_charts
from .fleet_section import render_fleet

REFRESH_SECONDS = 2
SHOWN_TOTALS = ("Received", "Succeeded", "Failed", "Throttled", "Expired", "DeadLettered")
MISSING = "\u2013"  # an en dash: not known (yet), as the backlog before the first GetQueueAttributes

STYLE = """
body{font:14px/1.4 system-ui,-apple-system,Segoe UI,Roboto,sans-serif;margin:0;background:#f5f6f8;color:#1d2330}
header{background:#1d2330;color:#fff;padding:12px 24px;display:flex;gap:16px;align-items:center;flex-wrap:wrap}
header h1{font-size:18px;margin:0}
main{padding:16px 24px}
.badge{padding:2px 10px;border-radius:10px;font-weight:600}
.ok{background:#1f9d55}.bad{background:#cc1f1a}
.meta{color:#c3c9d5}
.cards{display:flex;gap:12px;flex-wrap:wrap;margin-bottom:16px}
.card{background:#fff;border-radius:6px;padding:8px 16px;min-width:110px;box-shadow:0 1px 2px #0002}
.card b{display:block;font-size:20px}
section{background:#fff;border-radius:6px;padding:8px 16px 12px;margin-bottom:16px;box-shadow:0 1px 2px #0002}
h2{font-size:15px;margin:6px 0}
table{border-collapse:collapse;width:100%}
th,td{text-align:left;padding:4px 8px;border-bottom:1px solid #e3e6eb;white-space:nowrap}
td.wrap{white-space:normal;word-break:break-word}
th{font-weight:600;color:#555f70}
.ready{color:#1f9d55;font-weight:600}.idle,.starting,.draining{color:#555f70}
.failing{color:#cc1f1a;font-weight:600}.paused,.waiting{color:#b7791f;font-weight:600}
.empty{color:#8a93a3;font-style:italic}
footer{color:#8a93a3;padding:0 24px 16px}
"""


def render_page(status: dict[str, Any]) -> str:
    title = f"workerless {status['name'] or ''}".strip()
    badge = "ok" if status["healthy"] and status.get("ready", True) else "bad"
    return f"""<!doctype html>
<html lang="en"><head><meta charset="utf-8">
<meta http-equiv="refresh" content="{REFRESH_SECONDS}">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>{escape(title)}</title><style>{STYLE}{CHART_STYLE}</style></head>
<body><header><h1>{escape(title)}</h1>
<span class="badge {badge}" id="health">{escape(status["health"])}</span>
<span class="meta">v{escape(status["version"])} · up {status["uptime_seconds"]:.0f}s
 · strategy {escape(status["strategy"])} · in flight {status["in_flight_count"]}/{status["concurrency"]}</span></header>
<main><div class="cards">{render_cards(status["totals"], status.get("deliveries_per_second"))}</div>
<section id="charts"><h2>Last 15 minutes</h2><div class="charts">{render_charts(status.get("series"))}</div></section>
<section id="queues"><h2>Queues</h2>{render_queues(status["queues"])}</section>
<section id="targets"><h2>Targets</h2>{render_targets(status.get("targets", []))}</section>
{render_groups(status["queues"])}
{render_fleet(status.get("fleet", []))}
<section id="in-flight"><h2>In flight ({status["in_flight_count"]})</h2>
{render_in_flight(status["in_flight"])}</section>
<section id="failures"><h2>Failures by type</h2>{render_failures(status["failures"])}</section></main>
<footer>Refreshes every {REFRESH_SECONDS}s · <a href="/status">/status</a> (JSON) ·
<a href="/metrics">/metrics</a> (Prometheus) · <a href="/healthz">/healthz</a> · <a href="/readyz">/readyz</a></footer>
</body></html>
"""


def render_cards(totals: dict[str, int], per_second: float | None) -> str:
    cards = [(name, str(totals.get(name, 0))) for name in SHOWN_TOTALS]
    cards.insert(0, ("Deliveries/s", rate_text(per_second)))
    return "".join(f'<div class="card">{escape(name)}<b>{escape(value)}</b></div>' for name, value in cards)


def rate_text(per_second: float | None) -> str:
    return MISSING if per_second is None else f"{per_second:.1f}"


def error_text(item: dict[str, Any]) -> str:
    """The last error with its age: "HTTP 500: ... (12s ago)"; empty when there was none."""
    if not item.get("last_error"):
        return ""
    return f'{item["last_error"]} ({item["last_error_seconds"]:.0f}s ago)'


def render_table(headers: Sequence[str], rows: list[list[str]], empty: str) -> str:
    """Cells arrive already escaped; headers are ours."""
    if not rows:
        return f'<p class="empty">{escape(empty)}</p>'
    head = "".join(f"<th>{escape(header)}</th>" for header in headers)
    body = "".join("<tr>" + "".join(row) + "</tr>" for row in rows)
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def cell(value: object, css: str = "") -> str:
    attribute = f' class="{css}"' if css else ""
    return f"<td{attribute}>{escape(str(value))}</td>"


def render_queues(queues: list[dict[str, Any]]) -> str:
    rows = []
    for queue in queues:
        totals = queue["totals"]
        backlog = queue.get("backlog")
        rows.append([cell(queue["name"]), cell(queue["target"]), cell(queue["state"], queue["state"]),
                     cell(MISSING if backlog is None else backlog), cell(queue["buffered"]), cell(queue["in_flight"]),
                     cell(rate_text(queue.get("deliveries_per_second"))), cell(totals["Received"]),
                     cell(totals["Succeeded"]), cell(totals["Failed"]), cell(error_text(queue), "wrap")])
    headers = ("queue", "target", "state", "backlog", "buffered", "in flight", "deliveries/s", "received",
               "succeeded", "failed", "last error")
    return render_table(headers, rows, "no queues")


def render_groups(queues: list[dict[str, Any]]) -> str:
    """The busiest message groups (a fair queue's tenants) of each queue; nothing while no message has a group."""
    rows = [[cell(queue["name"]), cell(group["group"]), cell(group["in_flight"]), cell(group["waiting"])]
            for queue in queues for group in queue.get("groups", ())]
    if not rows:
        return ""
    table = render_table(("queue", "group", "deliveries in flight", "waiting for the group's cap"), rows, "")
    return f'<section id="groups"><h2>Busiest message groups</h2>{table}</section>'


def render_targets(targets: list[dict[str, Any]]) -> str:
    rows = [[cell(target["name"]), cell(target["type"]), cell(target["endpoint"]),
             cell(target["state"], target["state"]), cell(in_flight_text(target)), cell(target.get("limit", "–")),
             cell(target.get("max_concurrency", "–")), cell(rate_limit_text(target.get("rate_limit"))),
             cell(rate_text(target.get("deliveries_per_second"))), cell(error_text(target), "wrap")]
            for target in targets]
    return render_table(("target", "type", "endpoint", "state", "in flight", "limit now", "max concurrency",
                         "rate limit", "deliveries/s", "last error"), rows, "no targets")


def in_flight_text(target: dict[str, Any]) -> str:
    """Messages; for a target that delivers batches, also the batches (what its limit counts)."""
    batches = target.get("batches_in_flight")
    if batches is None:
        return str(target["in_flight"])
    return f"{target['in_flight']} in {batches} batch{'' if batches == 1 else 'es'}"


def rate_limit_text(rate: float | None) -> str:
    return "–" if rate is None else f"{rate:g}/s"


def render_in_flight(messages: list[dict[str, Any]]) -> str:
    rows = [[cell(m["id"]), cell(m["queue"]), cell(m["target"]), cell(f'{m["age_seconds"]:.1f}s'),
             cell(m["receive_count"])] for m in messages]
    return render_table(("message id", "queue", "target", "age", "receives"), rows, "nothing in flight")


def render_failures(failures: list[dict[str, Any]]) -> str:
    rows = [[cell(f["type"]), cell(f["count"]), cell(f["latest_error"], "wrap")] for f in failures]
    return render_table(("type", "count", "latest error"), rows, "no failures")
