"""The figures every row reports: spreads over runs, paired ratios, percentiles, rates, and their printed cells."""

from __future__ import annotations

import statistics
from typing import Any, Callable, Iterable, TypeVar

from harness import log

Runs = list[dict[str, Any]]
K = TypeVar("K")

def spread(values: Iterable[Any]) -> dict[str, Any]:
    """median, min, max and every run's value, None values left out."""
    values = [v for v in values if v is not None and not isinstance(v, bool)]
    if not values:
        return {"median": None, "min": None, "max": None, "runs": []}
    return {"median": statistics.median(values), "min": min(values), "max": max(values),
            "runs": [round(v, 4) if isinstance(v, float) else v for v in values]}

def spreads(results: Runs, keys: Iterable[str]) -> dict[str, Any]:
    return {key: spread(r.get(key) for r in results) for key in keys}

def paired(over: Runs, under: Runs, key: str) -> dict[str, Any]:
    """Run i of one case over run i of another (minutes apart at most), for each i where both have the figure."""
    return spread(a[key] / b[key] for a, b in zip(over, under) if a.get(key) and b.get(key))

def ratios(over: dict[str, Any], under: dict[str, Any]) -> dict[str, float]:
    """The ratio of two sides' medians, key by key."""
    return {key: a["median"] / b["median"] for key, a in over.items() if isinstance(a, dict) and "median" in a
            and isinstance(b := under.get(key), dict) and a["median"] is not None and b.get("median")}

def interleave(runs: int, cases: Iterable[K], one: Callable[[K, int], dict[str, Any]],
               say: Callable[[K, int, dict[str, Any]], str], order: Callable[[int], list[K]] | None = None
               ) -> dict[K, Runs]:
    """Every case once in each of `runs` rounds: noise hits all alike, run i of one pairs with run i of another."""
    cases = list(cases)
    out: dict[K, Runs] = {case: [] for case in cases}
    for index in range(runs):
        for case in order(index) if order else cases:
            result = one(case, index)
            log(f"  {say(case, index, result)}")
            out[case].append(result)
    return out

def percentile(values: list[float], q: float) -> float:
    """Nearest-rank percentile: p99 of 20 samples is the largest."""
    ordered = sorted(values)
    return ordered[int(max(1, -(-len(ordered) * q // 100))) - 1]

def pool(block: dict[str, Any], runs: Runs, key: str = "latencies_ms") -> None:
    """p50 and p99 over every run's latencies together."""
    pooled = [x for run in runs for x in run[key]]
    block["pooled_p50_ms"], block["pooled_p99_ms"] = percentile(pooled, 50), percentile(pooled, 99)

def middle_rate(arrivals: list[float]) -> float | None:
    """Arrivals (ms) per second between the 10th and the 90th percentile: ramp-up and stragglers left out."""
    n = len(arrivals)
    if n < 10:
        return None
    low, high = arrivals[n // 10], arrivals[n * 9 // 10]
    return (n * 9 // 10 - n // 10) / ((high - low) / 1000) if high > low else None

def fmt(value: Any, digits: int = 1) -> str:
    if isinstance(value, float) and value != float("inf"):
        return f"{value:.{max(digits, 2) if abs(value) < 1 and digits < 3 and value != int(value) else digits}f}"
    return "-" if value is None else str(value)

def cell(figure: Any, digits: int = 1) -> str:
    """A spread as "median [min-max]" (the median alone when they agree); any other figure as it is."""
    if not isinstance(figure, dict) or "median" not in figure:
        return fmt(figure, digits)
    if figure["min"] == figure["max"]:
        return fmt(figure["median"], digits)
    return f"{fmt(figure['median'], digits)} [{fmt(figure['min'], digits)}-{fmt(figure['max'], digits)}]"

def drain_text(r: dict[str, Any]) -> str:
    """A drain's rate, CPU and memory, for the progress log."""
    return (f"{r['msgs_per_s'] or 0:.0f} msg/s, {r['cpu_us_per_msg']:.0f} us CPU/msg "
            f"({r['cpu_share_of_one_core'] or 0:.0%} of a core; fauxqs {r['fauxqs_cpu_us_per_msg'] or 0:.0f}, sink "
            f"{r['sink_cpu_us_per_msg'] or 0:.0f} us/msg), {r['peak_rss_mb'] or 0:.1f} MB, tree "
            f"{r['peak_tree_rss_mb'] or 0:.1f} MB, {r['sqs_requests_per_msg']:.3f} SQS requests/msg, "
            f"{r['left_in_queue']} left")
