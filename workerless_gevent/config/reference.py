"""The configuration reference page, generated from `descriptions.KEYS` (each key's type and default through
its dataclass field, its rule, what it does, its variable and flag), the table building reads, so it cannot drift.
`python -m workerless_gevent.commands.reference configuration` prints it, as the docs site builds it."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Collection, Iterator

from .changes import RESTART_ONLY
from .cron import PeriodicConfig, PeriodicTask
from .descriptions import KEYS, NOT_KEYS
from .fleet import FleetConfig
from .idempotency import IdempotencyConfig
from .keys import Choices, Key, Range, flag_of, variable_of
from .model import AwsConfig, Config, HttpTargetConfig, LambdaTargetConfig, PollingConfig, QueueConfig, TracingConfig

# (heading, owner, key prefix, what the table is)
SECTIONS: tuple[tuple[str, type, str, str], ...] = (
    ("Top level", Config, "", "Keys at the top of the file, before any table."),
    ("[metrics]", Config, "metrics.", "CloudWatch metrics: on when the top-level `name` is set."),
    ("[status]", Config, "status.", "The status server: health probes, Prometheus metrics and the status page."),
    ("[polling]", PollingConfig, "polling.", "How queues are received from."),
    ("[[queues]]", QueueConfig, "queues[].", "One table per queue, listed in priority order. Errors count them "
     "from 0: `queues[1].weight` is the second queue's weight."),
    ("[targets.NAME] (HTTP)", HttpTargetConfig, "targets.<name>.", "A target with `type = \"http\"`: the "
     "aws-sqsd contract. A queue uses `[targets.default]` unless its `target` names another."),
    ("[targets.NAME] (Lambda)", LambdaTargetConfig, "targets.<name>.", "A target with `type = \"lambda\"`."),
    ("[aws]", AwsConfig, "aws.", "Optional: botocore's own chain applies to whatever is not set here."),
    ("[periodic]", PeriodicConfig, "periodic.", "Periodic tasks, as a Beanstalk worker's `cron.yaml` defines "
     "them."),
    ("[[periodic.tasks]]", PeriodicTask, "periodic.tasks[].", "Inline tasks; a `cron.yaml` entry has the same "
     "keys."),
    ("[fleet]", FleetConfig, "fleet.", "Fleet-wide limits: required by any `fleet_*` key."),
    ("[idempotency]", IdempotencyConfig, "idempotency.", "Idempotent delivery, for the queues with an "
     "`idempotency_key`; these defaults apply when the table is not written."),
    ("[tracing]", TracingConfig, "tracing.", "OpenTelemetry tracing; off unless the table is written."),
)


def render_configuration(flags: Collection[str]) -> str:
    """`flags`: the long options the command line takes (a variable may have no flag: --shutdown-timeout)."""
    return "\n".join(configuration_lines(flags)) + "\n"


def configuration_lines(flags: Collection[str]) -> Iterator[str]:
    yield "# Configuration reference"
    yield ""
    yield ("Every key of the TOML file, generated from the code that reads it. Settings are applied in this "
           "order, each overriding the one before: the defaults below, the TOML file (`-c FILE` or "
           "`WORKERLESS_CONFIG`), the `WORKERLESS_*` environment variables, then the command-line flags. A bad "
           "value stops the daemon before any AWS request with one line naming the file, the key and the value, "
           "and exit status 2 (see [Troubleshooting](../troubleshooting.md#configuration-errors)).")
    yield ""
    restart_only = ", ".join(f"`{label}`" for label in RESTART_ONLY.values())
    yield ("SIGHUP reads the file again and applies it without dropping a delivery, `[idempotency]` and "
           f"`idempotency_key` included ([Reload](../operations/lifecycle.md#reload)). A restart alone applies "
           f"{restart_only}, `[fleet]` and the `fleet_*` keys: a change to any of them refuses the whole reload "
           "with one ERROR line naming it, and the running configuration stays.")
    for heading, owner, prefix, intro in SECTIONS:
        yield ""
        yield f"## {heading}"
        yield ""
        yield intro
        for key in KEYS:
            rest = key.key[len(prefix):]
            if key.owner is owner and key.key.startswith(prefix) and "[]" not in rest and "." not in rest:
                yield from key_lines(key, flags)
    yield ""
    yield "## Set elsewhere"
    yield ""
    yield "Fields of the configuration that no key of the file sets:"
    yield ""
    for (owner, field), source in NOT_KEYS.items():
        if not source.startswith("the `["):
            yield f"- `{owner.__name__}.{field}`: {source}."


def key_lines(key: Key, flags: Collection[str]) -> Iterator[str]:
    yield ""
    yield f"### `{key.key}`"
    yield ""
    yield key.description
    yield ""
    facts = [f"**Type** {type_of(key)}", f"**Default** {default_of(key)}", f"**Allowed** {allowed_of(key)}"]
    overrides = overrides_of(key, flags)
    if overrides:
        facts.append("**Environment / flag** " + overrides)
    yield " · ".join(facts)


def type_of(key: Key) -> str:
    for start, name in (("bool", "boolean"), ("int", "integer"), ("float", "number"), ("tuple[Pattern", "string or "
                        "list of strings"), ("Mapping", "table"), ("tuple[PeriodicTask", "list of tables")):
        if key.annotation.startswith(start):
            return name
    return "string"


def default_of(key: Key) -> str:
    if key.is_required:
        return "required"
    if key.dataclass_field.default_factory is not dataclasses.MISSING:
        return "none"
    return "unset" if key.default is None else f"`{toml_value(key.default)}`"


def allowed_of(key: Key) -> str:
    if isinstance(key.rule, Range):
        low, high = number_text(key.rule.low), key.rule.high
        return f"{low} or more" if high is None else f"{low} to {number_text(high)}"
    if isinstance(key.rule, Choices):
        return ", ".join(f"`{json.dumps(value)}`" for value in key.rule.values)
    return key.allowed


def overrides_of(key: Key, flags: Collection[str]) -> str:
    """The variable and flag that set the key; --queues and the two target flags set several keys at once."""
    if not key.option:
        return ""
    text = f"`{variable_of(key.option)}`" + (f", `{flag_of(key.option)}`" if flag_of(key.option) in flags else "")
    if key.option == "queues":
        text += " (`NAME[:WEIGHT],...`)"
    if key.option in ("http", "function"):
        text += " (the `default` target)"
    return text


def toml_value(value: object) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return number_text(value)
    return json.dumps(value) if isinstance(value, str) else str(value)


def number_text(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else f"{value:g}"
