"""What the flow scenarios read off the app's requests: in flight, idle share, busiest window, convergence."""

from __future__ import annotations

from typing import Any

from flow_app import Request


def mean_in_flight(requests: list[Request], start: float, end: float) -> float:
    """Time-weighted mean of the requests in flight at the app over [start, end]."""
    if end <= start:
        return 0.0
    busy = sum(max(0.0, min(r.answered, end) - max(r.arrived, start)) for r in requests)
    return busy / (end - start)


def idle_share(requests: list[Request], start: float, end: float) -> float:
    """The share of [start, end] during which the app had nothing in flight."""
    covered, reach = 0.0, start
    for r in sorted(requests, key=lambda r: r.arrived):
        begin, finish = max(r.arrived, reach), min(r.answered, end)
        if finish > begin:
            covered += finish - begin
        reach = max(reach, min(r.answered, end))
    return 1 - covered / (end - start) if end > start else 0.0


def most_in_window(arrivals: list[float], seconds: float) -> int:
    """The most arrivals in any window [t, t + seconds) that starts at an arrival."""
    best, last = 0, 0
    for first, moment in enumerate(arrivals):
        while last < len(arrivals) and arrivals[last] < moment + seconds:
            last += 1
        best = max(best, last - first)
    return best


def convergence(ok: list[Request], t0: float, end: float, capacity: int, threshold: float) -> float | None:
    """Seconds from t0 to the first 50 ms sample from which the trailing-1 s mean in flight stays >= threshold x
    capacity until `end`, once the app has been at capacity (None: never)."""
    peak_at = min((r.arrived for r in ok if sum(1 for o in ok if o.arrived <= r.arrived < o.answered) >= capacity),
                  default=None)
    if peak_at is None:
        return None
    samples = [t0 + 0.05 * k for k in range(1, int((end - t0) / 0.05) + 1)]
    good = [mean_in_flight(ok, max(t0, t - 1.0), t) >= threshold * capacity for t in samples]
    found = None
    for t, fine in zip(reversed(samples), reversed(good)):
        if not fine:
            break
        found = t
    if found is None:
        return None
    return max(found, peak_at) - t0


def aimd_figures(requests: list[Request], messages: int, capacity: int, threshold: float) -> dict[str, Any]:
    ok = sorted((r for r in requests if r.status == 200), key=lambda r: r.answered)
    first_ok: dict[int, float] = {}
    for r in ok:
        first_ok.setdefault(r.number, r.answered)
    t0 = min(r.arrived for r in requests)
    done = sorted(first_ok.values())
    end = done[int(0.95 * messages) - 1] if len(done) >= 0.95 * messages else ok[-1].answered
    middle = (t0 + end) / 2
    busy = [r for r in requests if r.status == 429]
    samples = (middle + 0.05 * k for k in range(int((end - middle) / 0.05) + 1))
    moving = [mean_in_flight(ok, t - 1.0, t) for t in samples]
    second_half = [r for r in requests if middle <= r.arrived < end]
    return {"run_s": max(r.answered for r in requests) - t0, "to_95_percent_s": end - t0,
            "convergence_s": convergence(ok, t0, end, capacity, threshold),
            "mean_in_flight_second_half": mean_in_flight(ok, middle, end),
            "mean_in_flight_second_half_ratio": mean_in_flight(ok, middle, end) / capacity,
            "moving_average_min_second_half_ratio": min(moving) / capacity,
            "app_idle_share_second_half": idle_share(ok, middle, end),
            "requests": len(requests), "busy_429": len(busy), "busy_share": len(busy) / len(requests),
            "busy_429_first_second": sum(1 for r in busy if r.arrived < t0 + 1.0),
            "busy_share_second_half": sum(1 for r in second_half if r.status == 429) / max(1, len(second_half)),
            "delivered": len(first_ok), "duplicates": len(ok) - len(first_ok),
            "never_answered_2xx": messages - len(first_ok), "second_half": (middle, end)}
