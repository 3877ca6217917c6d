"""The [fleet] table and the fleet-wide limit keys: daemons that share a DynamoDB table and a fleet name
share each `fleet_max_concurrency` and `fleet_rate_limit` (the lease protocol is `fleet/`)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from .cron import TABLE_NAME
from .schema import Table

if TYPE_CHECKING:
    from .model import Config

FLEET_NAME_LENGTH = 100


@dataclass(frozen=True, slots=True, kw_only=True)
class FleetConfig:
    table: str  # DynamoDB table, created if missing (may be the periodic claims table: its key is `slot` too)
    name: str  # daemons with the same table and name share the limits
    lease: int = 10  # seconds a member's share lives without renewal


def read_fleet(table: Table) -> FleetConfig:
    name = table.string("table")
    if not TABLE_NAME.match(name):
        raise table.fail("table", "must be 3-255 letters, digits, _ - or . (a DynamoDB table name)", name)
    fleet_name = table.string("name")
    if len(fleet_name) > FLEET_NAME_LENGTH or not fleet_name.isprintable():
        raise table.fail("name", f"must be 1-{FLEET_NAME_LENGTH} printable characters", fleet_name)
    fleet = FleetConfig(table=name, name=fleet_name, lease=table.integer("lease", 10, 3, 120))
    table.finish()
    return fleet


def fleet_limit_keys(table: Table) -> dict[str, int | float | None]:
    """The fleet-wide limit keys a target has (a queue reads only fleet_max_concurrency)."""
    rate = table.raw("fleet_rate_limit")
    return {
        "fleet_max_concurrency": table.optional_integer("fleet_max_concurrency", 1, 100000),
        "fleet_rate_limit": None if rate is None else table.number("fleet_rate_limit", 1, 0.01, 1000000),
    }


def check_no_fleet_keys(config: Config, top: Table) -> None:
    """Without [fleet], a fleet-wide limit would silently be a per-process one: refuse it."""
    problem = "needs a [fleet] table (table and name) to share it across daemons"
    for index, queue in enumerate(config.queues):
        if queue.fleet_max_concurrency is not None:
            raise top.tables("queues")[index].fail("fleet_max_concurrency", problem, queue.fleet_max_concurrency)
    for name, target in config.targets.items():
        for key in ("fleet_max_concurrency", "fleet_rate_limit"):
            if getattr(target, key) is not None:
                table = top.table("targets").table(name)
                raise table.fail(key, problem, table.data[key])  # as written, not as read (100, not 100.0)
