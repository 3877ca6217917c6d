"""The latency scenario: the backlog drained at c=50 while every SQS answer takes 0, 10 and 30 ms longer."""

from __future__ import annotations

import time
from typing import Any

from backlog import SIDES, warm_up
from figures import cell, compare, drain_text, paired
from scenario import Block, Check, Row, Scenario, alone, check, compared, interleave

# What the latency scenario compares the daemon with: bench/baseline.py as it is, already the pipelined loop of the
# Go peer simple-sqsd.
PIPELINED_BASELINE = ("bench/baseline.py, pipelined as simple-sqsd: `concurrency` greenlets, each looping "
                      "receive(10) -> POST each -> DeleteMessageBatch, so up to `concurrency` receives in flight")


def latency(bench: Any) -> Block:
    """Backlog throughput at c=50 when every SQS answer takes 0, 10 and 30 ms longer (fauxqs's round-trip knob)."""
    s = bench.settings
    c, messages, rtts = s.latency_concurrency, s.latency_messages, s.latency_rtts_ms
    cases = [(rtt, kind) for rtt in rtts for kind in SIDES]

    def one(case: tuple[int, str], i: int) -> dict[str, Any]:
        rtt, kind = case
        bench.fauxqs.set_delay(rtt)  # also resets its measure of the delay actually added
        began = time.monotonic()
        result = bench.backlog_run(kind, f"lat-rtt{rtt}-{kind}-{i}", concurrency=c, messages=messages, delay_ms=0)
        return {**result, "sqs_mean_added_ms": bench.fauxqs.stats()["mean_added_ms"] or 0.0,
                "seconds_with_setup": time.monotonic() - began}

    try:
        if not s.quick:
            bench.fauxqs.set_delay(0)
            warm_up(bench, "lat", c, min(5000, messages // 2))
        runs = interleave(s.runs, cases, one, lambda case, i, r: (
            f"latency rtt={case[0]}ms {case[1]} run {i + 1}: {drain_text(r)}, {r['sqs_requests_per_msg']:.3f} SQS "
            f"requests/msg, round trip added {r['sqs_mean_added_ms']:.1f} ms ({r['seconds_with_setup']:.0f} s)"))
    finally:
        bench.fauxqs.set_delay(bench.fauxqs.default_delay_ms)
    keys = ("msgs_per_s", "cpu_us_per_msg", "cpu_share_of_one_core", "peak_rss_mb", "sqs_requests_per_msg",
            "sqs_mean_added_ms", "left_in_queue", "fauxqs_cpu_us_per_msg", "sink_cpu_us_per_msg")
    out: Block = {"concurrency": c, "messages": messages, "rtts_ms": list(rtts), "baseline": PIPELINED_BASELINE}
    for rtt in rtts:
        out[f"rtt{rtt}"] = compare({kind: runs[(rtt, kind)] for kind in SIDES}, keys)
        out[f"rtt{rtt}"]["by_action_last_run"] = {kind: runs[(rtt, kind)][-1]["sqs_by_action"] for kind in SIDES}
    ratios = {f"{kind}_rtt{rtt}_over_rtt0": paired(runs[(rtt, kind)], runs[(0, kind)], "msgs_per_s")
              for rtt in rtts[1:] for kind in SIDES}
    ratios.update({f"daemon_over_baseline_rtt{rtt}": paired(runs[(rtt, "daemon")], runs[(rtt, "baseline")],
                                                            "msgs_per_s") for rtt in rtts})
    out["ratios"] = ratios
    return out


def latency_rows(block: Block) -> list[Row]:
    rows, c = [], block["concurrency"]
    for rtt in block["rtts_ms"]:
        case = block[f"rtt{rtt}"]
        rows += [compared(f"latency SQS RTT {rtt}ms c={c}: msgs/s", case, "msgs_per_s", 0),
                 compared(f"  RTT {rtt}ms: CPU us/msg", case, "cpu_us_per_msg", 0),
                 compared(f"  RTT {rtt}ms: peak RSS MB", case, "peak_rss_mb"),
                 compared(f"  RTT {rtt}ms: SQS requests/msg", case, "sqs_requests_per_msg", 3),
                 compared(f"  RTT {rtt}ms: messages left undeleted at exit", case, "left_in_queue", 0)]
        if rtt:
            rows.append(compared(f"  RTT {rtt}ms: round trip fauxqs added, ms", case, "sqs_mean_added_ms", 1))
    ratios = block["ratios"]
    rows += [(f"latency: msgs/s at RTT {rtt}ms / at 0ms (paired runs)", cell(ratios[f"daemon_rtt{rtt}_over_rtt0"], 3),
              cell(ratios[f"baseline_rtt{rtt}_over_rtt0"], 3), "") for rtt in block["rtts_ms"][1:]]
    return rows + [alone(f"latency: daemon / baseline at RTT {rtt}ms (paired runs)",
                         ratios[f"daemon_over_baseline_rtt{rtt}"], 2) for rtt in block["rtts_ms"]]


def latency_checks(block: Block) -> list[Check]:
    ratios = block["ratios"]
    checks = [check(f"latency: daemon msgs/s at {rtt} ms SQS round trip / at 0 ms, c=50",
                    ratios.get(f"daemon_rtt{rtt}_over_rtt0", {}).get("median"), f">= {limit:.2f}",
                    lambda v, m=limit: v >= m) for rtt, limit in ((10, 0.90), (30, 0.75))]
    checks.append(check("latency: daemon / pipelined baseline msgs/s at 10 ms SQS round trip, c=50",
                        ratios.get("daemon_over_baseline_rtt10", {}).get("median"), ">= 1.2x", lambda v: v >= 1.2))
    # Not a target of its own, but a rate reached with deletes left behind is not the rate of finished work.
    value = max((block[f"rtt{rtt}"]["daemon"]["left_in_queue"]["max"] or 0) for rtt in block["rtts_ms"])
    return checks + [check("latency: messages the daemon left undeleted at exit (worst run, any round trip)", value,
                           "0", lambda v: v == 0)]


SCENARIOS = (Scenario("latency", latency, latency_rows, latency_checks,
                      lambda block: [f"\nlatency: the baseline is {block['baseline']}"]),)
