"""The status page's row for a target: ready, paused, or waiting for its app to answer; and its flow's limits."""

from __future__ import annotations

from ..config.model import HttpTargetConfig, LambdaTargetConfig, TargetConfig
from ..delivery.flow import TargetFlow
from ..observability.snapshot import TargetRow
from ..targets import Target
from ..targets.readiness import AppReadiness


def target_row(name: str, target: Target, config: TargetConfig | None, readiness: AppReadiness | None,
               flow: TargetFlow | None) -> TargetRow:
    """`config`: the one in use, mid-reload too; `readiness`: its gate's, if it has one."""
    paused = max(0.0, target.pause.remaining_seconds())
    state = "waiting" if readiness is not None and not readiness.is_ready else "paused" if paused else "ready"
    endpoint = config.url if isinstance(config, HttpTargetConfig) else lambda_destination(config)
    return TargetRow(name, config.type if config is not None else "", endpoint, state, paused,
                     readiness.last_error if readiness else "", readiness.last_error_at if readiness else 0.0,
                     flow.limit if flow else 0, flow.ceiling if flow else 0,
                     flow.bucket.rate if flow and flow.bucket else None,
                     flow.in_flight if flow and target.messages_per_delivery > 1 else None)


def lambda_destination(config: LambdaTargetConfig | None) -> str:
    """The function (with its qualifier), and where it is invoked when that is not Lambda's own endpoint."""
    if config is None:
        return ""
    function = f"{config.function}:{config.qualifier}" if config.qualifier else config.function
    return f"{function} at {config.endpoint_url}" if config.endpoint_url else function
