"""The targets the scenarios are held to: for each scenario that ran, its figure, the limit, pass or miss."""

from __future__ import annotations

from typing import Any

from scenarios import SCENARIOS


def target_checks(results: dict[str, Any]) -> list[dict[str, Any]]:
    """Each target of the scenarios that ran, its value and whether it passed (None: no value)."""
    ran = results.get("scenarios", {})
    return [item for name, scenario in SCENARIOS.items() if name in ran for item in scenario.checks(ran[name])]
