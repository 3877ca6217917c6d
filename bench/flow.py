"""The flow-control scenarios, each a ratio to the configured rate, capacity or free slots (`--only=flow`).

    python bench/run.py --only=flow [--quick] [--runs=N] [--no-profile]

The app (flow_app.py) records every request on the runner's clock, answers 200 after `delay`, 429 above a capacity.

* rate      `rate_limit` 10, 50 and 200 on one queue: the steady rate once the burst is spent, and the most arrivals
            in any 10 s and 1 s window, over rate x W + burst.
* aimd      an app that takes N = 8 at once, overload "backpressure": time to converge (the trailing-1 s mean in flight
            staying >= 0.7 N), mean in flight / N over the second half, 429s, lost and dead-lettered messages (0),
            and the daemon's own adaptive limit from /status.
* priority  a high queue capped at 3 of 10 slots beside a low one: low's share of the 7 slots high may not use.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import figures  # noqa: E402
from figures import spreads  # noqa: E402
from flow_app import App, LimitSampler, start_daemon, wait_for  # noqa: E402
from flow_measures import aimd_figures, mean_in_flight, most_in_window  # noqa: E402
from harness import free_port, unique  # noqa: E402
from scenario import Scenario, interleave  # noqa: E402

RATES = (10, 50, 200)


class FlowSettings:
    def __init__(self, quick: bool) -> None:
        self.steady_s = 5.0 if quick else 8.0  # the rate backlog: burst + rate x steady_s
        self.rate_concurrency = 20
        self.capacity = 8
        self.aimd_concurrency = 50
        self.aimd_messages = 600 if quick else 1000
        self.app_delay = 0.05
        self.threshold = 0.7  # of the capacity, for the convergence time
        self.priority_concurrency = 10
        self.high_cap = 3
        self.high_messages = 200 if quick else 300  # 3 at a time, 50 ms each: 3.3 or 5 s
        self.low_messages = 900 if quick else 1200  # enough to keep the 7 other slots busy meanwhile


# ---------------------------------------------------------------- scenarios


def rate_run(bench: Any, s: FlowSettings, rate: int, label: str) -> dict[str, Any]:
    burst, messages = rate, int(rate + rate * s.steady_s)
    url = bench.sqs.create(name := unique(label))
    bench.sqs.send_many(url, messages, "rate")
    app = App()
    try:
        worker = start_daemon(bench, label, concurrency=s.rate_concurrency, queues=[{"name": name}],
                              target={"url": f"{app.url}/", "rate_limit": rate})
        if not wait_for(lambda: len(app.ok()) >= messages, messages / rate + 30, worker):
            raise RuntimeError(f"{label}: {len(app.ok())} of {messages} delivered")
        worker.stop()
        arrivals = sorted(r.arrived for r in app.ok())
    finally:
        app.stop()
        bench.sqs.delete(url)
    t0 = arrivals[0]
    # The burst is spent once the arrivals so far are all the tokens there were (never: slower than the rate).
    spent = next((t for i, t in enumerate(arrivals) if i + 1 >= burst + rate * (t - t0)), t0)
    steady = [t for t in arrivals if t >= max(t0 + 1.5, spent)]
    steady_rate = (len(steady) - 1) / (steady[-1] - steady[0]) if len(steady) > 2 else 0.0
    span = arrivals[-1] - t0
    return {"rate_limit": rate, "messages": messages, "run_s": span, "burst_spent_after_s": spent - t0,
            "steady_per_s": steady_rate, "steady_ratio": steady_rate / rate, "steady_deliveries": len(steady),
            "max_10s": (most := most_in_window(arrivals, 10.0)), "max_10s_ratio": most / (rate * 10 + burst),
            "window_10s_is_whole_run": span < 10.0,
            "max_1s": (most := most_in_window(arrivals, 1.0)), "max_1s_ratio": most / (rate + burst)}


def aimd_run(bench: Any, s: FlowSettings, label: str) -> dict[str, Any]:
    messages = s.aimd_messages
    url, dead_url = bench.sqs.create(name := unique(label)), bench.sqs.create(dead := unique(label + "-dlq"))
    bench.sqs.send_many(url, messages, "aimd")
    app, port = App(s.app_delay, s.capacity), free_port()
    try:
        worker = start_daemon(bench, label, concurrency=s.aimd_concurrency, status_port=port,
                              queues=[{"name": name, "max_retries": 3, "dead_letter_queue": dead,
                                       "error_visibility_timeout": 1}],
                              target={"url": f"{app.url}/", "overload": "backpressure"})
        sampler = LimitSampler(port)
        wait_for(lambda: len({r.number for r in app.ok()}) >= messages, 90, worker)
        limits = sampler.stop()
        worker.stop()  # then what is left is what was never deleted, visible or not
        left, dead_lettered = bench.sqs.left(url), bench.sqs.left(dead_url)
        with app.lock:
            requests, peak = list(app.requests), max(app.peak.values(), default=0)
    finally:
        app.stop()
        bench.sqs.delete(url)
        bench.sqs.delete(dead_url)
    figures = aimd_figures(requests, messages, s.capacity, s.threshold)
    middle, end = figures.pop("second_half")
    late = [(limit, in_flight) for at, limit, in_flight in limits if middle <= at < end]
    if late:  # the daemon's view: its adaptive limit and its deliveries in flight, sampled
        figures["limit_mean_second_half_ratio"] = sum(limit for limit, _ in late) / len(late) / s.capacity
        figures["limit_min_second_half"] = min(limit for limit, _ in late)
        figures["daemon_in_flight_mean_second_half_ratio"] = sum(n for _, n in late) / len(late) / s.capacity
    return {"messages": messages, "capacity": s.capacity, "concurrency": s.aimd_concurrency, "peak_in_flight": peak,
            **figures, "left_in_queue": left, "lost": max(0, figures["never_answered_2xx"] - left),
            "dead_lettered": dead_lettered}


def priority_run(bench: Any, s: FlowSettings, label: str) -> dict[str, Any]:
    high, low = unique(label + "-high"), unique(label + "-low")
    high_url, low_url = bench.sqs.create(high), bench.sqs.create(low)
    bench.sqs.send_many(high_url, s.high_messages, "high")
    bench.sqs.send_many(low_url, s.low_messages, "low")
    app = App(s.app_delay)
    try:
        worker = start_daemon(bench, label, concurrency=s.priority_concurrency, strategy="priority",
                              queues=[{"name": high, "max_concurrency": s.high_cap}, {"name": low}],
                              target={"url": f"{app.url}/"})
        if not wait_for(lambda: len(app.ok(high)) >= s.high_messages, s.high_messages / 10 + 30, worker):
            raise RuntimeError(f"{label}: {len(app.ok(high))} of {s.high_messages} high messages delivered")
        worker.stop()
        high_ok, low_ok, peak = app.ok(high), app.ok(low), dict(app.peak)
    finally:
        app.stop()
        bench.sqs.delete(high_url)
        bench.sqs.delete(low_url)
    start, end = min(r.arrived for r in high_ok) + 0.5, max(r.arrived for r in high_ok)
    free = s.priority_concurrency - s.high_cap
    low_mean, high_mean = mean_in_flight(low_ok, start, end), mean_in_flight(high_ok, start, end)
    return {"window_s": end - start, "low_mean_in_flight": low_mean, "low_share_of_free_slots": low_mean / free,
            "high_mean_in_flight": high_mean, "high_share_of_cap": high_mean / s.high_cap,
            "low_share_relative_to_high": (low_mean / free) / (high_mean / s.high_cap) if high_mean else None,
            "high_peak_in_flight": peak.get(high, 0), "low_peak_in_flight": peak.get(low, 0),
            "low_delivered_in_window": sum(1 for r in low_ok if start <= r.arrived < end),
            "low_left_when_high_done": s.low_messages - len(low_ok)}


def run(bench: Any) -> dict[str, Any]:
    """Every flow scenario `bench.settings.runs` times; figures as spreads over the runs."""
    s = FlowSettings(bench.settings.quick)
    cases = {**{f"rate_{rate}": lambda i, rate=rate: rate_run(bench, s, rate, f"flow-rate{rate}-{i}") for rate in RATES},
             "aimd": lambda i: aimd_run(bench, s, f"flow-aimd-{i}"),
             "priority": lambda i: priority_run(bench, s, f"flow-priority-{i}")}
    runs = interleave(bench.settings.runs, cases, lambda case, i: cases[case](i), lambda case, i, r: say(s, case, i, r))
    out: dict[str, Any] = {}
    for name, results in runs.items():
        keys = [key for key in results[0] if any(isinstance(r[key], (int, float)) and not isinstance(r[key], bool)
                                                 for r in results)]
        out[name] = {**spreads(results, keys), "runs": results}
    out["settings"] = dict(vars(s))
    return out


def say(s: FlowSettings, case: str, index: int, r: dict[str, Any]) -> str:
    if case.startswith("rate_"):
        return (f"flow rate_limit {r['rate_limit']}/s run {index + 1}: steady {r['steady_per_s']:.2f}/s "
                f"(x{r['steady_ratio']:.3f}); most in 10 s x{r['max_10s_ratio']:.3f} of 10r+burst, in 1 s "
                f"x{r['max_1s_ratio']:.3f} of r+burst")
    if case == "aimd":
        converged = "never" if r["convergence_s"] is None else f"{r['convergence_s']:.2f} s"
        return (f"flow aimd run {index + 1}: converged in {converged}, mean in flight "
                f"x{r['mean_in_flight_second_half_ratio']:.3f} of N={s.capacity} (second half), 429 share "
                f"{r['busy_share']:.3f}, lost {r['lost']}, dead-lettered {r['dead_lettered']}")
    return (f"flow priority run {index + 1}: low's share of the free slots x{r['low_share_of_free_slots']:.3f} "
            f"(x{r['low_share_relative_to_high'] or 0:.3f} of high's / cap), high peak {r['high_peak_in_flight']}")


SCENARIOS = (Scenario("flow", run, notes=lambda block: ["", *lines(block)]),)


# ---------------------------------------------------------------- standalone


def lines(out: dict[str, Any]) -> list[str]:
    """The figures as lines: median [min-max] over the runs."""
    def cell(block: dict[str, Any], key: str, digits: int = 3) -> str:
        return figures.cell(block.get(key), digits)

    s = out["settings"]
    lines = ["flow control (ratios to the configured rate, capacity or free slots; median [min-max])"]
    for rate in RATES:
        block = out[f"rate_{rate}"]
        lines.append(f"  rate_limit {rate:>3}/s: steady / rate {cell(block, 'steady_ratio')}, "
                     f"most in 10 s / (10r+burst) {cell(block, 'max_10s_ratio')}, "
                     f"most in 1 s / (r+burst) {cell(block, 'max_1s_ratio')}")
    block = out["aimd"]
    lines += [f"  backpressure, app takes N={s['capacity']}, concurrency {s['aimd_concurrency']}: convergence "
              f"{cell(block, 'convergence_s', 2)} s, mean in flight / N (second half) "
              f"{cell(block, 'mean_in_flight_second_half_ratio')} (lowest 1 s average "
              f"{cell(block, 'moving_average_min_second_half_ratio')}), 429 share {cell(block, 'busy_share')} "
              f"({cell(block, 'busy_429_first_second', 0)} in the first second)",
              f"    daemon's limit / N (second half) {cell(block, 'limit_mean_second_half_ratio')} (lowest "
              f"{cell(block, 'limit_min_second_half', 0)}), its in flight / N "
              f"{cell(block, 'daemon_in_flight_mean_second_half_ratio')}",
              f"    app idle (second half) {cell(block, 'app_idle_share_second_half')}, lost {cell(block, 'lost', 0)}, "
              f"dead-lettered {cell(block, 'dead_lettered', 0)}, "
              f"left in queue {cell(block, 'left_in_queue', 0)}, peak in flight {cell(block, 'peak_in_flight', 0)}"]
    block = out["priority"]
    lines += [f"  priority, high capped at {s['high_cap']} of {s['priority_concurrency']}: "
              f"low in flight / free slots {cell(block, 'low_share_of_free_slots')}, "
              f"high in flight / cap {cell(block, 'high_share_of_cap')}",
              f"    low's share / high's (per-slot gap left out) {cell(block, 'low_share_relative_to_high')}, "
              f"high peak {cell(block, 'high_peak_in_flight', 0)}"]
    return lines
