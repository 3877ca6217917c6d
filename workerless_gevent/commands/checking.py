"""`workerless check`: the effective configuration with its secrets hidden, checked offline or on AWS
(--online: every queue and target resolved), or the least-privilege IAM policy it needs (--iam)."""

from __future__ import annotations

import json
import random
import sys
from dataclasses import asdict
from typing import Any

from ..config.model import Config
from ..errors import ExitStatus, StartupError


def check(config: Config, online: bool, session: Any, region: str, where: str) -> int:
    """The configuration as the daemon would run it on stdout (JSON, to diff or keep), what it found on stderr."""
    effective = asdict(config)
    for target in effective["targets"].values():
        if target.get("signing_secret"):
            target["signing_secret"] = "(set, hidden)"
        if target.get("headers"):  # often credentials: the names only
            target["headers"] = dict.fromkeys(target["headers"], "(set, hidden)")
    effective["aws"]["region"] = region  # the one the daemon would use, wherever it came from
    print(json.dumps(effective, indent=2, default=str))
    from ..lifecycle.assembly import build_parts, config_warnings

    if config.tracing is not None:
        print("tracing: a span per delivery over OTLP/HTTP; endpoint, headers, sampler and service name from the "
              "OTEL_* environment variables (default http://localhost:4318/v1/traces)", file=sys.stderr)
    if not online:
        print(f"region: {region} (from {where})", file=sys.stderr)
        for warning in config_warnings(config):
            print(f"warning: {warning}", file=sys.stderr)
        return ExitStatus.OK
    from ..aws.clients import build_clients
    from ..metrics import Registry

    try:
        clients = build_clients(config, region, session)
        parts = build_parts(config, clients, Registry(), random.Random())
        if config.fleet is not None:
            from ..fleet.membership import describe_table
            print(describe_table(clients.dynamodb, config.fleet.table), file=sys.stderr)
    except StartupError as error:
        print(f"workerless: {error}", file=sys.stderr)
        return ExitStatus.ERROR
    print(f"region: {region} (from {where})", file=sys.stderr)
    for warning in config_warnings(config, parts.queues):
        print(f"warning: {warning}", file=sys.stderr)
    print("online check passed: every queue resolved", file=sys.stderr)
    return ExitStatus.OK


def print_policy(config: Config, online: bool, session: Any, region: str, where: str) -> int:
    """check --iam: the policy on stdout (to paste or redirect), notes on stderr."""
    from .iam import ANY_ACCOUNT, build_policy, policy_notes, resolve_online

    account, known = ANY_ACCOUNT, dict[str, str]()
    if online:
        try:
            account, known = resolve_online(config, region, session)
        except StartupError as error:
            print(f"workerless: {error}", file=sys.stderr)
            return ExitStatus.ERROR
    policy = build_policy(config, region, account, known)
    print(json.dumps(policy, indent=2))
    print(f"region: {region} (from {where})", file=sys.stderr)
    for note in policy_notes(policy):
        print(f"note: {note}", file=sys.stderr)
    return ExitStatus.OK
