"""The [fleet] table read into `FleetConfig`, and the fleet-wide limit keys refused without it (they would
silently be per-process limits)."""

from __future__ import annotations

from .descriptions import TABLE_NAME_PROBLEM, keys_of
from .fleet import FLEET_NAME_LENGTH, FleetConfig
from .model import TABLE_NAME, Config
from .schema import Table

FLEET = keys_of(FleetConfig)


def read_fleet(table: Table) -> FleetConfig:
    name = table.string(FLEET["table"])
    if not TABLE_NAME.match(name):
        raise table.fail("table", TABLE_NAME_PROBLEM, name)
    fleet_name = table.string(FLEET["name"])
    if len(fleet_name) > FLEET_NAME_LENGTH or not fleet_name.isprintable():
        raise table.fail("name", f"must be 1-{FLEET_NAME_LENGTH} printable characters", fleet_name)
    fleet = FleetConfig(table=name, name=fleet_name, lease=table.integer(FLEET["lease"]))
    table.finish()
    return fleet


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
