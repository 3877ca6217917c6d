"""The status page's charts of the last 15 minutes: inline SVG polylines drawn from /status's `series`,
no script and no external asset, so the page stays one self-contained document."""

from __future__ import annotations

from collections.abc import Sequence
from html import escape
from typing import Any

WIDTH, HEIGHT = 600, 170
LEFT, RIGHT, TOP, BOTTOM = 52, 10, 10, 24  # margins around the plot, in SVG units
PALETTE = ("#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#17becf")
CHART_STYLE = """
.charts{display:grid;grid-template-columns:repeat(auto-fill,minmax(440px,1fr));gap:12px}
figure{margin:0}figcaption{font-weight:600;margin:4px 0}
svg.chart{width:100%;height:auto;background:#fbfcfd;border:1px solid #e3e6eb;border-radius:4px}
svg.chart text{font:11px system-ui,sans-serif;fill:#555f70}
.legend span{margin-right:12px;font-size:12px}.legend i{display:inline-block;width:10px;height:10px;margin-right:4px}
"""
Line = tuple[str, Sequence[float | None], str]  # (label, values, colour)


def render_charts(series: dict[str, Any] | None) -> str:
    """The four charts, or a note while there is no sample yet (the first comes a few seconds after start)."""
    if not series or not series.get("times"):
        return '<p class="empty">no samples yet: the first comes a few seconds after the start</p>'
    backlog = [(queue, values, PALETTE[index % len(PALETTE)])
               for index, (queue, values) in enumerate(sorted(series["backlog"].items()))]
    charts = [
        ("deliveries", "Deliveries per second", [("succeeded", series["succeeded_per_second"], PALETTE[2]),
                                                  ("failed", series["failed_per_second"], PALETTE[1])]),
        ("latency", "Delivery latency (ms)", [("p50", series["latency_p50_ms"], PALETTE[0]),
                                              ("p95", series["latency_p95_ms"], PALETTE[3])]),
        ("in-flight", "In flight", [("in flight", series["in_flight"], PALETTE[0]),
                                    ("limit", series["in_flight_limit"], "#8a93a3")]),
        ("backlog", "Backlog per queue (visible + in flight)", backlog),
    ]
    return "".join(render_chart(key, title, series["times"], lines, series["window_seconds"])
                   for key, title, lines in charts)


def render_chart(key: str, title: str, times: Sequence[float], lines: list[Line], window_seconds: float) -> str:
    top = nice_ceiling(max((value for _, values, _ in lines for value in values if value is not None), default=0))
    end = times[-1]
    plot_width, plot_height = WIDTH - LEFT - RIGHT, HEIGHT - TOP - BOTTOM

    def point(at: float, value: float) -> str:
        x = LEFT + plot_width * (1 - (end - at) / window_seconds)
        return f"{max(LEFT, x):.1f},{TOP + plot_height * (1 - value / top):.1f}"

    paths = []
    for label, values, colour in lines:
        for segment in segments(times, values):
            points = " ".join(point(at, value) for at, value in segment)
            paths.append(f'<polyline class="series" data-series="{escape(label)}" fill="none" stroke="{colour}" '
                         f'stroke-width="1.6" points="{points}"/>')
    legend = "".join(f'<span><i style="background:{colour}"></i>{escape(label)}</span>' for label, _, colour in lines)
    return (f'<figure id="chart-{key}"><figcaption>{escape(title)}</figcaption>'
            f'<svg class="chart" viewBox="0 0 {WIDTH} {HEIGHT}" role="img" aria-label="{escape(title)}">'
            f'<title>{escape(title)}</title>{axes(top, window_seconds)}{"".join(paths)}</svg>'
            f'<div class="legend">{legend or "<span>no queue read yet</span>"}</div></figure>')


def axes(top: float, window_seconds: float) -> str:
    """The frame, a mid grid line, the value scale on the left and minutes ago underneath."""
    bottom, right = HEIGHT - BOTTOM, WIDTH - RIGHT
    middle = TOP + (bottom - TOP) / 2
    parts = [f'<rect x="{LEFT}" y="{TOP}" width="{right - LEFT}" height="{bottom - TOP}" fill="none" stroke="#d5d9e0"/>',
             f'<line x1="{LEFT}" y1="{middle}" x2="{right}" y2="{middle}" stroke="#eceef2"/>',
             f'<text x="{LEFT - 6}" y="{TOP + 8}" text-anchor="end">{number(top)}</text>',
             f'<text x="{LEFT - 6}" y="{middle + 4}" text-anchor="end">{number(top / 2)}</text>',
             f'<text x="{LEFT - 6}" y="{bottom}" text-anchor="end">0</text>']
    minutes = int(window_seconds // 60)
    for ago in range(minutes, -1, -5):
        x = LEFT + (right - LEFT) * (1 - ago * 60 / window_seconds)
        text = "now" if ago == 0 else f"-{ago} min"
        anchor = "end" if ago == 0 else "start" if ago == minutes else "middle"
        parts.append(f'<text x="{x:.1f}" y="{HEIGHT - 6}" text-anchor="{anchor}">{text}</text>')
    return "".join(parts)


def segments(times: Sequence[float], values: Sequence[float | None]) -> list[list[tuple[float, float]]]:
    """Runs of known values: a gap (None, e.g. no delivery ended in that sample) breaks the line."""
    runs: list[list[tuple[float, float]]] = [[]]
    for at, value in zip(times, values):
        if value is None:
            runs.append([])
        else:
            runs[-1].append((at, float(value)))
    return [run if len(run) > 1 else run * 2 for run in runs if run]  # a lone point is drawn as a dot-wide line


def nice_ceiling(value: float) -> float:
    """The scale's top: 1, 2 or 5 times a power of ten at or above the largest value (1 when all are 0)."""
    if value <= 0:
        return 1.0
    scale = 10.0 ** (len(str(int(value))) - 1) if value >= 1 else 0.001
    while True:
        for step in (1, 2, 5):
            if step * scale >= value:
                return step * scale
        scale *= 10


def number(value: float) -> str:
    return f"{value:g}" if value < 10_000 else f"{value / 1000:g}k"
