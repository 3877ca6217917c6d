"""The status page's row for a target: ready, paused, or waiting for its app to answer; and its flow's limits."""

from __future__ import annotations

from ..config.model import HttpTargetConfig, TargetConfig
from ..delivery.flow import TargetFlow
from ..observability.snapshot import TargetRow
from ..targets import Target
from ..targets.readiness import AppReadiness


def target_row(name: str, target: Target, config: TargetConfig | None, readiness: AppReadiness | None,
               flow: TargetFlow | None) -> TargetRow:
    """`config`: the one in use, mid-reload too; `readiness`: its gate's, if it has one."""
    paused = max(0.0, target.pause.remaining_seconds())
    state = "waiting" if readiness is not None and not readiness.is_ready else "paused" if paused else "ready"
    endpoint = config.url if isinstance(config, HttpTargetConfig) else getattr(config, "function", "")
    return TargetRow(name, config.type if config is not None else "", endpoint, state, paused,
                     readiness.last_error if readiness else "", readiness.last_error_at if readiness else 0.0,
                     flow.limit if flow else 0, flow.ceiling if flow else 0,
                     flow.bucket.rate if flow and flow.bucket else None,
                     flow.in_flight if flow and target.messages_per_delivery > 1 else None)
