"""One seed, one schedule: the queue and the daemon's settings (its target: one message per POST, a batch per POST
or a Lambda function; large payloads), the messages (keys, FIFO groups, poison ones, copies sent later, payloads
in S3), and a timeline of what the app does, which DynamoDB, SQS and Lambda faults are on (whole outages, a share
of one kind of call, slow calls), reloads (SIGHUP with a configuration change) and the stop (SIGTERM). Pure: the
same seed gives the same schedule (its timing on the machine is what varies).

A schedule is named `SEED` (the general generator, `generate.py`) or `SCENARIO:SEED` (a scenario of
`scenarios.py`, which fixes the knobs of one kind of fault and draws the rest from the seed)."""

from __future__ import annotations

from dataclasses import dataclass, field

from .faults import Mode

SERVICES = {"store": "DynamoDB", "sqs": "SQS", "lambda": "app/Lambda"}


@dataclass(frozen=True)
class MessageSpec:
    serial: int
    key: str | None  # the body's order.id (None: the body has no key)
    group: str | None  # FIFO
    send_at: float  # seconds after the start; 0: before the daemon starts
    poison: bool  # the app fails it every time
    payload: str = ""  # "": in the body; "s3": an S3 pointer (large_payloads); "missing": a pointer to no object


@dataclass(frozen=True)
class Step:
    at: float  # seconds after the daemon's start
    what: str  # app | store | sqs | lambda | send | reload | stop
    app_mode: str = ""
    modes: tuple[Mode, ...] = ()
    serial: int = -1
    change: str = ""  # a reload's: adds_key | adds_queue (a queue by name: GetQueueUrl) | settings


@dataclass(frozen=True)
class Schedule:
    seed: int
    fifo: bool
    key: str | None  # the queue's idempotency_key
    on_store_failure: str
    reload_adds_key: bool  # the daemon starts without [idempotency]; a reload adds it and the key
    concurrency: int
    batch_size: int  # the receive's
    visibility_timeout: int
    error_visibility_timeout: int
    shutdown_timeout: int
    max_retries: int
    dead_letter_queue: bool  # the daemon's own (dead_letter_queue, after max_retries)
    max_receive_count: int | None  # the queue's redrive policy
    messages: tuple[MessageSpec, ...]
    timeline: tuple[Step, ...] = field(default=())
    scenario: str = ""  # "": the general generator
    target: str = "http"  # http (one message per POST) | http_batch | lambda
    target_batch_size: int = 1
    backoff: str = "constant"
    large_payloads: bool = False

    @property
    def name(self) -> str:
        """What WORKERLESS_SEED takes to replay it."""
        return f"{self.scenario}:{self.seed}" if self.scenario else str(self.seed)

    @property
    def prefix(self) -> str:
        """Its queues' and table's names begin so (unique among the schedules run at once)."""
        return f"x{self.scenario[:3]}{self.seed}" if self.scenario else f"x{self.seed}"

    @property
    def stop_at(self) -> float:
        return next(step.at for step in self.timeline if step.what == "stop")

    @property
    def is_keyed(self) -> bool:
        return self.key is not None

    def describe(self) -> str:
        settings = (f"{self.name}: {'FIFO' if self.fifo else 'standard'} queue, key={self.key}, "
                    f"on_store_failure={self.on_store_failure}, reload_adds_key={self.reload_adds_key}, "
                    f"concurrency={self.concurrency}, batch_size={self.batch_size}, "
                    f"target={self.target} (batch_size {self.target_batch_size}), "
                    f"large_payloads={self.large_payloads}, backoff={self.backoff}, "
                    f"visibility_timeout={self.visibility_timeout}, "
                    f"error_visibility_timeout={self.error_visibility_timeout}, "
                    f"shutdown_timeout={self.shutdown_timeout}, max_retries={self.max_retries}, "
                    f"dead_letter_queue={self.dead_letter_queue}, maxReceiveCount={self.max_receive_count}")
        messages = "; ".join(f"#{m.serial} key={short_key(m.key)}{' group=' + m.group if m.group else ''}"
                             f"{' poison' if m.poison else ''}{' payload ' + m.payload if m.payload else ''}"
                             f"{f' at {m.send_at:.1f}s' if m.send_at else ''}" for m in self.messages)
        steps = "\n".join(f"  {step.at:5.2f}s {describe_step(step)}" for step in self.timeline)
        return f"{settings}\n  messages: {messages}\n{steps}"


def describe_step(step: Step) -> str:
    if step.what == "app":
        return f"app {step.app_mode}"
    if step.what in SERVICES:
        modes = ", ".join(describe_mode(mode) for mode in step.modes)
        return f"{SERVICES[step.what]} faults: {modes or 'none'}"
    if step.what == "send":
        return f"send #{step.serial}"
    if step.what == "reload":
        return f"SIGHUP (reload: {step.change})"
    return "SIGTERM (stop)" if step.what == "stop" else step.what


def describe_mode(mode: Mode) -> str:
    held = any(kind.startswith("stall") or kind == "slow" for kind in mode.kinds)
    return (f"{'/'.join(mode.kinds)} x{mode.share:.2f}{' on ' + ','.join(sorted(mode.actions)) if mode.actions else ''}"
            f"{f' {mode.stall[0]:.2f}-{mode.stall[1]:.2f}s' if held else ''}")


def short_key(key: str | None) -> str:
    """A key as the reports show it: a long one cut, with its length."""
    return str(key) if key is None or len(key) <= 24 else f"{key[:20]}..({len(key)})"


def parse_name(name: str) -> tuple[str, int]:
    """`SEED` or `SCENARIO:SEED` -> (scenario, seed)."""
    scenario, _, seed = name.strip().rpartition(":")
    return scenario, int(seed)


def build_schedule(seed: int, scenario: str = "") -> Schedule:
    from .generate import build_general
    from .scenarios import SCENARIOS

    if not scenario:
        return build_general(seed)
    if scenario not in SCENARIOS:
        raise ValueError(f"no scenario {scenario!r} (there are {', '.join(SCENARIOS)})")
    return SCENARIOS[scenario].build(seed)
