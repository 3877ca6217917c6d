"""A configured queue as the poller runs it (`QueueState`): what pauses it, how its receives batch, and which
shared limits (the fleet's, the idempotency table's hold) it waits for."""

from __future__ import annotations

from collections.abc import Callable

from ..config.model import HttpTargetConfig, TargetConfig
from ..delivery.flow import SharedLimit, TargetFlow
from ..delivery.queue import SqsQueue
from ..delivery.queue_state import QueueState
from ..idempotency.guard import Idempotency
from ..targets import Target


def build_queue_state(queue: SqsQueue, target: Target, target_config: TargetConfig | None,
                      paused_seconds: Callable[[], float], flow: TargetFlow, fleet_gates: tuple[SharedLimit, ...],
                      idempotency: Idempotency | None) -> QueueState:
    """`paused_seconds`: its target's pause and readiness; `target_config`: None while a reload removes it."""
    window = target_config.max_batching_window if target_config is not None else 0.0
    one_group = isinstance(target_config, HttpTargetConfig) and target_config.batch_size > 1
    hold = idempotency.hold if idempotency is not None and queue.config.idempotency_key else None  # a failing table
    return QueueState(queue, target.messages_per_delivery, paused_seconds, flow=flow, window_seconds=window,
                      takes_one_group=one_group, fleet_gates=fleet_gates, receive_hold=hold)
