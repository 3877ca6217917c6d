"""The [fleet] table's settings: daemons that share a DynamoDB table and a fleet name share each
`fleet_max_concurrency` and `fleet_rate_limit` (`fleet_table.py` reads them, the lease protocol is `fleet/`)."""

from __future__ import annotations

from dataclasses import dataclass

FLEET_NAME_LENGTH = 100


@dataclass(frozen=True, slots=True, kw_only=True)
class FleetConfig:
    table: str  # DynamoDB table, created if missing (may be the periodic claims table: its key is `slot` too)
    name: str  # daemons with the same table and name share the limits
    lease: int = 10  # seconds a member's share lives without renewal
