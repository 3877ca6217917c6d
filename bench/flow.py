"""The flow kind: flow control, each figure a ratio to the configured rate, capacity or free slots (the app,
flow_app.py, answers 200 after `app_delay`, 429 above a capacity). rate_R: `rate_limit` R on one queue, the steady
rate once the burst is spent and the most arrivals in any 10 s and 1 s, over rate x W + burst. aimd: an app that takes
N = `capacity` at once, overload "backpressure": time to converge (the trailing-1 s mean in flight staying >=
`threshold` N), mean in flight / N over the second half, 429s, lost and dead-lettered messages. priority: a high
queue capped at `high_cap` of `priority_concurrency` slots beside a low one: low's share of the slots left."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

from figures import interleave, spreads
from flow_app import App, aimd_figures, mean_in_flight, most_in_window, start_daemon, wait_for
from harness import unique
from shapes import Row

def rate_run(bench: Any, s: Any, rate: int, label: str) -> dict[str, Any]:
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

def aimd_run(bench: Any, s: Any, label: str) -> dict[str, Any]:
    messages = s.aimd_messages
    url, dead_url = bench.sqs.create(name := unique(label)), bench.sqs.create(dead := unique(label + "-dlq"))
    bench.sqs.send_many(url, messages, "aimd")
    app = App(s.app_delay, s.capacity)
    try:
        worker = start_daemon(bench, label, concurrency=s.aimd_concurrency,
                              queues=[{"name": name, "max_retries": 3, "dead_letter_queue": dead,
                                       "error_visibility_timeout": 1}],
                              target={"url": f"{app.url}/", "overload": "backpressure"})
        wait_for(lambda: len({r.number for r in app.ok()}) >= messages, 90, worker)
        worker.stop()  # then what is left is what was never deleted, visible or not
        left, dead_lettered = bench.sqs.left(url), bench.sqs.left(dead_url)
        with app.lock:
            requests, peak = list(app.requests), max(app.peak.values(), default=0)
    finally:
        app.stop()
        bench.sqs.delete(url)
        bench.sqs.delete(dead_url)
    figures = aimd_figures(requests, messages, s.capacity, s.threshold)
    return {"messages": messages, "capacity": s.capacity, "concurrency": s.aimd_concurrency, "peak_in_flight": peak,
            **figures, "left_in_queue": left, "lost": max(0, figures["never_answered_2xx"] - left),
            "dead_lettered": dead_lettered}

def priority_run(bench: Any, s: Any, label: str) -> dict[str, Any]:
    high, low = unique(label + "-high"), unique(label + "-low")
    high_url, low_url = bench.sqs.create(high), bench.sqs.create(low)
    bench.sqs.send_many(high_url, s.high_messages, "high")
    bench.sqs.send_many(low_url, s.low_messages, "low")
    app = App(s.app_delay)
    try:
        worker = start_daemon(bench, label, concurrency=s.priority_concurrency,
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

def run(bench: Any, row: Row) -> dict[str, Any]:
    """Every flow case `bench.settings.runs` times, in turns; figures as spreads over the runs."""
    s = SimpleNamespace(**{k: v[bench.settings.quick] if isinstance(v, tuple) else v for k, v in row.params.items()})
    cases = {**{f"rate_{r}": lambda i, r=r: rate_run(bench, s, r, f"flow-rate{r}-{i}") for r in s.rates},
             "aimd": lambda i: aimd_run(bench, s, f"flow-aimd-{i}"),
             "priority": lambda i: priority_run(bench, s, f"flow-priority-{i}")}
    runs = interleave(bench.settings.runs, cases, lambda case, i: cases[case](i), lambda case, i, r: (
        f"flow {case} run {i + 1}: " + ", ".join(f"{k} {v:.3f}" for k, v in r.items() if isinstance(v, float))))
    numbers = {name: [k for k in results[0] if any(isinstance(r[k], (int, float)) for r in results)]
               for name, results in runs.items()}
    return {**{name: {**spreads(results, numbers[name]), "runs": results} for name, results in runs.items()},
            "settings": dict(vars(s))}
