"""What a row of the bench's table is made of: a Case (one worker and what it meets) and a Row (a scenario: its kind
of run, its cases, the figures it keeps, the ratios it pairs and the targets it holds them to)."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

@dataclass(frozen=True)
class Case:
    """One worker draining one backlog: the workload, the app, the SQS round trip and the daemon's configuration."""
    worker: str = "daemon"  # or "baseline": bench/baseline.py, the plain loop
    concurrency: int = 50
    messages: tuple[int, int] = (5000, 1000)  # a full run's, --quick's
    app_ms: float = 0  # how long the app (bench/sink.mjs) holds each POST
    sqs_ms: float | None = None  # the SQS round trip fauxqs adds (None: FAUXQS_DELAY_MS, else 0)
    target: dict[str, Any] = field(default_factory=dict)  # [targets.default] keys over an HTTP target at the sink
    queue: dict[str, Any] = field(default_factory=dict)  # [[queues]] keys
    lambda_target: bool = False  # a Lambda target, Invoked at the sink
    dynamodb_ms: float | None = None  # idempotency_key, its table on the DynamoDB stand-in at this round trip
    tracing: tuple[str, str | None, str] | None = None  # (sampler, its argument, collector "up" | "down" | "slow")
    group: str | None = None  # every message's MessageGroupId (a tenant on a standard queue)
    in_send_order: bool = False  # the fair kind: fauxqs hands it out in send order, not quiet tenants first
    until_empty: bool = False  # the daemon runs with --drain (and exits once the queue is empty)
    idle_first: bool = False  # its process tree idle on an empty queue first (RSS), for peak / idle

    def ideal(self) -> float | None:
        """Messages a second the slots allow against an app that holds each POST app_ms."""
        return self.concurrency * int(self.target.get("batch_size", 1)) / (self.app_ms / 1000) if self.app_ms else None

    def but(self, **changes: Any) -> Case:
        return replace(self, **changes)

Target = tuple[str, str, str, float]  # (what, the figure's path in the block, ">=" | "<=" | "==" | "<", limit)

@dataclass(frozen=True)
class Row:
    """A scenario: `kind` names the run (run.py KINDS); a case "group/side" has its figures (`keys`: median, min,
    max, runs) at block[group][side]; `paired` puts run i of one case over run i of another at a path."""
    name: str
    kind: str = "drain"
    cases: dict[str, Case] = field(default_factory=dict)
    keys: tuple[str, ...] = ()
    shown: tuple[str, ...] = ("msgs_per_s", "cpu_us_per_msg")  # printed in the report (all are in the JSON)
    warmup: tuple[str, ...] = ()
    paired: tuple[tuple[str, str, str, str], ...] = ()  # (where, over, under, key)
    ratio: bool = False  # a group of two sides also gets ratio_A_to_B: the ratio of their medians, key by key
    params: dict[str, Any] = field(default_factory=dict)  # the other kinds' settings; "block": constants to keep
    targets: tuple[Target, ...] = ()
    in_full_run: bool = True  # a row run only when named with --only (a guard, a tool)

def figure(block: Any, path: str) -> Any:
    """The value at a dotted path of a block, None where it is missing."""
    for part in path.split("."):
        if not isinstance(block, dict) or part not in block:
            return None
        block = block[part]
    return block

def place(block: dict[str, Any], name: str, value: Any) -> None:
    """value at block[a][b] for a name "a/b" (or a dotted path), at block[a] for "a", over block itself for ""."""
    if not name:
        block.update(value)
        return
    *outer, last = name.replace("/", ".").split(".")
    for part in outer:
        block = block.setdefault(part, {})
    block[last] = value

def holds(value: Any, op: str, limit: float) -> bool:
    return {">=": value >= limit, "<=": value <= limit, "==": value == limit, "<": value < limit}[op]

def check(row: Row, block: dict[str, Any]) -> list[dict[str, Any]]:
    """Each target of the row: its figure (a spread's median, or the figure itself), and whether it held."""
    out = []
    for what, path, op, limit in row.targets:
        value = figure(block, path)
        value = value.get("median") if isinstance(value, dict) else value
        out.append({"target": f"{row.name}: {what}", "value": value, "limit": f"{op} {limit:g}",
                    "pass": None if value is None else bool(holds(value, op, limit))})
    return out
