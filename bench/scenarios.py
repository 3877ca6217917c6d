"""Every scenario of bench/run.py by its --only name, in the order a full run takes them, and their targets."""

from __future__ import annotations

from typing import Any

import backlog
import batch
import fleet
import fleet_limits
import flow
import idempotency
import latency
import polling
import redrive
import scale
import scale_priority
import scale_targets
import scale_wide
import startup
import tracing
from scenario import Check, Scenario

ORDER = ("throughput", "components", "slow_sink", "requests", "idle", "wake", "memory", "priority", "latency",
         "startup", "scale", "lambda", "scale_wide", "scale_queues", "scale_priority", "flow", "fleet", "fleet_limits",
         "idempotency", "tracing", "redrive", "batch")
MODULES = (backlog, latency, polling, startup, scale, scale_wide, scale_targets, scale_priority, flow, fleet,
           fleet_limits, idempotency, tracing, redrive, batch)
_BY_NAME = {scenario.name: scenario for module in MODULES for scenario in module.SCENARIOS}
SCENARIOS: dict[str, Scenario] = {name: _BY_NAME[name] for name in ORDER}


def target_checks(ran: dict[str, Any]) -> list[Check]:
    """Each target of the scenarios that ran, its value and whether it passed (None: no value)."""
    return [item for name, scenario in SCENARIOS.items() if name in ran for item in scenario.checks(ran[name])]
