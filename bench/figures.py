"""The figures every scenario reports: spreads over runs, paired ratios, percentiles, rates, and their printed cells."""

from __future__ import annotations

import statistics
from typing import Any, Iterable

Runs = list[dict[str, Any]]


def spread(values: Iterable[Any]) -> dict[str, Any]:
    """median, min, max and every run's value, None values left out."""
    values = [v for v in values if v is not None]
    if not values:
        return {"median": None, "min": None, "max": None, "runs": []}
    return {"median": statistics.median(values), "min": min(values), "max": max(values),
            "runs": [round(v, 4) if isinstance(v, float) else v for v in values]}


def spreads(results: Runs, keys: Iterable[str]) -> dict[str, Any]:
    return {key: spread(r.get(key) for r in results) for key in keys}


def paired(over: Runs, under: Runs, key: str) -> dict[str, Any]:
    """Run i of one case over run i of another (minutes apart at most), for each i where both have the figure."""
    return spread(a[key] / b[key] for a, b in zip(over, under) if a.get(key) and b.get(key))


def compare(runs: dict[str, Runs], keys: Iterable[str], over: str = "daemon", under: str = "baseline") -> dict[str, Any]:
    """{side: {key: spread}} and `ratio_OVER_to_UNDER`: the ratio of the two sides' medians of each key."""
    keys = tuple(keys)
    out: dict[str, Any] = {side: spreads(results, keys) for side, results in runs.items()}
    out[f"ratio_{over}_to_{under}"] = {key: out[over][key]["median"] / out[under][key]["median"] for key in keys
                                       if out[over][key]["median"] is not None and out[under][key]["median"]}
    return out


def percentile(values: list[float], q: float) -> float:
    """Nearest-rank percentile: p99 of 20 samples is the largest."""
    ordered = sorted(values)
    return ordered[int(max(1, -(-len(ordered) * q // 100))) - 1]


def latencies(values: list[float]) -> dict[str, Any]:
    return {"p50_ms": percentile(values, 50), "p99_ms": percentile(values, 99), "max_ms": max(values),
            "latencies_ms": [round(x, 2) for x in values]}


def pool(block: dict[str, Any], runs: Runs, key: str = "latencies_ms") -> None:
    """p50 and p99 over every run's latencies together."""
    pooled = [x for run in runs for x in run[key]]
    block["pooled_p50_ms"], block["pooled_p99_ms"] = percentile(pooled, 50), percentile(pooled, 99)


def middle_rate(arrivals: list[float]) -> float | None:
    """Arrivals (ms) per second between the 10th and the 90th percentile: ramp-up and stragglers left out."""
    n = len(arrivals)
    low, high = arrivals[n // 10], arrivals[n * 9 // 10]
    return (n * 9 // 10 - n // 10) / ((high - low) / 1000) if high > low else None


# ---------------------------------------------------------------- printed


def fmt(value: Any, digits: int = 1) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        if value == float("inf"):
            return "inf"
        if abs(value) < 10 and digits < 3 and value != int(value):
            return f"{value:.{max(digits, 2)}f}" if abs(value) < 1 else f"{value:.{digits}f}"
        return f"{value:.{digits}f}"
    return str(value)


def ratio_text(ratio: float | None) -> str:
    if not ratio:
        return "-"
    return f"1/{1 / ratio:.0f}" if ratio < 0.1 else f"{ratio:.2f}"


def cell(figure: dict[str, Any] | None, digits: int = 1) -> str:
    if not figure or figure.get("median") is None:
        return "-"
    if figure["min"] == figure["max"]:
        return fmt(figure["median"], digits)
    return f"{fmt(figure['median'], digits)} [{fmt(figure['min'], digits)}-{fmt(figure['max'], digits)}]"


def drain_text(r: dict[str, Any]) -> str:
    """A backlog run's rate, CPU and memory, for the progress log."""
    return (f"{r['msgs_per_s'] or 0:.0f} msg/s, {r['cpu_us_per_msg']:.0f} us CPU/msg ({r['cpu_share_of_one_core'] or 0:.0%}"
            f" of a core; fauxqs {r['fauxqs_cpu_us_per_msg'] or 0:.0f}, sink {r['sink_cpu_us_per_msg'] or 0:.0f} us/msg), "
            f"{r['peak_rss_mb'] or 0:.1f} MB, tree {r['peak_tree_rss_mb'] or 0:.1f} MB, {r['left_in_queue']} left")
