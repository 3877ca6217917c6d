"""What the soak records and reports: each daemon's life, the run's figures, the duplicates' causes, the summary."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from harness import log
from processes import Worker
from soak_ends import Ledger


@dataclass
class Life:
    """One daemon process from start to the signal that ended it."""

    index: int
    label: str
    started: float
    ended_by: str = ""  # SIGKILL | SIGTERM | final SIGTERM | crashed
    launched: float = 0.0  # time.monotonic() when its process was started (`started`: once it was up)
    signalled: float | None = None  # time.monotonic() of the signal that ended it
    exit_code: int | None = None
    seconds: float = 0.0
    stop_seconds: float | None = None  # SIGTERM to exit
    rss_warm_kb: int | None = None
    rss_end_kb: int | None = None
    delivered_at_start: int = 0
    delivered_at_end: int = 0
    worker: Worker | None = field(default=None, repr=False)


LIFE_FIELDS = [name for name in Life.__dataclass_fields__ if name != "worker"]


def soak_result(soak: Any, started: float, finished: float, feeder: Any) -> dict[str, Any]:
    """The run's figures: what the ledger counted, what is left in the queue, each daemon's life and exit."""
    options = soak.options
    lives = soak.lives
    ratios = [life.rss_end_kb / life.rss_warm_kb for life in lives if life.rss_warm_kb and life.rss_end_kb]
    warm = next((life.rss_warm_kb for life in lives if life.rss_warm_kb), None)
    end = lives[-1].rss_end_kb
    sigterm_exits = [life.exit_code for life in lives if "SIGTERM" in life.ended_by]
    return {
        "messages": options.messages,
        "fed": feeder.sent,
        "seconds": round(finished - started, 1),
        **soak.ledger.snapshot(options.messages),
        "left_in_queue": soak.sqs.left(soak.url),
        "timed_out": not (soak.ledger.delivered() >= options.messages),
        "daemons": len(lives),
        "sigkills": sum(1 for life in lives if life.ended_by == "SIGKILL"),
        "sigterms": sum(1 for life in lives if life.ended_by == "SIGTERM"),
        "crashes": sum(1 for life in lives if life.ended_by == "crashed"),
        "sigterm_exit_codes_all_0": all(code == 0 for code in sigterm_exits),
        "sigterm_stop_seconds_max": max((life.stop_seconds or 0 for life in lives), default=None),
        "rss_start_kb": warm,
        "rss_end_kb": end,
        "rss_end_vs_start": round(end / warm, 3) if warm and end else None,
        "rss_growth_within_a_life_max": round(max(ratios), 3) if ratios else None,
        "sqs_faults": soak.chaos.report() if soak.chaos is not None else None,
        "idempotency_table": soak.table,
        "duplicate_causes": duplicate_causes(soak.ledger, lives, started),
        "settings": {key: value for key, value in vars(options).items() if key != "json"},
        "lives": [{name: getattr(life, name) for name in LIFE_FIELDS} for life in lives],
    }


def duplicate_causes(ledger: Ledger, lives: list[Life], started: float) -> list[dict[str, Any]]:
    """Each message answered 2xx more than once: when each answer came (seconds into the run), the daemon last
    launched before it, how that one ended and how many seconds after the answer its signal came (negative: the
    answer came while a SIGTERM drained it, or the sink had read the request before a SIGKILL)."""
    causes = []
    with ledger.lock:
        repeated = {n: list(times) for n, times in ledger.answered_at.items() if len(times) > 1}
    for number, times in sorted(repeated.items()):
        answers = []
        for at in times:
            life = next((life for life in reversed(lives) if life.launched <= at), None)
            answers.append({"at": round(at - started, 3), "daemon": life.label if life else None,
                            "ended_by": life.ended_by if life else None,
                            "signal_after_seconds": round(life.signalled - at, 3)
                            if life and life.signalled else None})
        causes.append({"n": number, "key": ledger.keys.get(number), "answers": answers})
    return causes


def print_summary(result: dict[str, Any]) -> None:
    log("")
    log(f"soak: {result['messages']} messages in {result['seconds']}s, {result['daemons']} daemons "
        f"({result['sigkills']} SIGKILL, {result['sigterms']} SIGTERM, {result['crashes']} crashed)")
    log(f"  lost {result['lost']}  duplicates {result['duplicates']} ({result['duplicate_deliveries']} extra "
        f"deliveries)  failed deliveries {result['failed_deliveries']}  redeliveries after failure "
        f"{result['redeliveries_after_failure']}  left in queue {result['left_in_queue']}")
    log(f"  RSS after warm-up {result['rss_start_kb']} kB, at the end {result['rss_end_kb']} kB "
        f"(x{result['rss_end_vs_start']}); largest growth within one daemon's life x"
        f"{result['rss_growth_within_a_life_max']}")
    log(f"  every SIGTERM exited 0: {result['sigterm_exit_codes_all_0']} "
        f"(slowest stop {result['sigterm_stop_seconds_max']:.1f}s)")
    for cause in result.get("duplicate_causes", []):
        log(f"  duplicate n={cause['n']}: " + "; ".join(
            f"2xx at {a['at']}s in {a['daemon']} (ended by {a['ended_by']} {a['signal_after_seconds']}s later)"
            for a in cause["answers"]))
    faults = result.get("sqs_faults")
    if faults:
        log(f"  SQS faults: {faults['faults_total']} of {sum(faults['requests'].values())} requests "
            f"(share {faults['share']}); requests {faults['requests']}")
        for action, kinds in faults["faults"].items():
            log(f"    {action}: {kinds}")
