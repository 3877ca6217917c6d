"""An HTTP target's extra headers: names checked when the file is read, `${VAR}` filled from the
environment once at load, values never echoed in an error (they are usually credentials)."""

from __future__ import annotations

import re
from collections.abc import Mapping

from ..errors import ConfigError
from .schema import Table

TOKEN = re.compile(r"[!#$%&'*+\-.^_`|~0-9A-Za-z]+\Z")
VARIABLE = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}")
# What a header line can carry as it is: visible ASCII, spaces and tabs inside, nothing at either end.
CARRIABLE = re.compile(r"[\x21-\x7e]([\x20-\x7e\t]*[\x21-\x7e])?\Z")
# The daemon's own headers: the aws-sqsd contract, HTTP framing, signing, trace context.
RESERVED = frozenset({"host", "content-type", "content-length", "transfer-encoding", "connection", "user-agent",
                      "expect", "te", "trailer", "upgrade", "x-amzn-trace-id", "traceparent", "tracestate"})
RESERVED_PREFIXES = ("x-aws-sqsd-", "x-workerless-")


def read_headers(table: Table) -> dict[str, str]:
    """`headers = { Name = "value" }`; values may hold `${VAR}`, resolved by `resolve_headers`."""
    headers: dict[str, str] = {}
    for name in list(table.data):
        value = table.raw(name)
        if not TOKEN.match(name):
            raise table.fail(name, "must be a header name (letters, digits and !#$%&'*+-.^_`|~)", name)
        lower = name.lower()
        if lower in RESERVED or lower.startswith(RESERVED_PREFIXES):
            raise table.fail(name, "is a header workerless sets itself; it cannot be overridden")
        if lower in {other.lower() for other in headers}:
            raise table.fail(name, "is given twice (header names are case-insensitive)")
        if not isinstance(value, str):
            raise table.fail(name, "must be a string")
        headers[name] = value
    return headers


def resolve_headers(headers: Mapping[str, str], env: Mapping[str, str], source: str, key: str) -> dict[str, str]:
    """Every `${VAR}` replaced by its value from `env`; an unset or empty variable is a config error."""
    resolved = {}
    for name, template in headers.items():
        def substitute(match: re.Match[str]) -> str:
            value = env.get(match.group(1), "")
            if not value:
                raise ConfigError(source, f"{key}.{name}", f"uses ${{{match.group(1)}}}, which is not set or empty "
                                                           "in the environment")
            return value

        value = VARIABLE.sub(substitute, template)
        if not CARRIABLE.match(value):
            raise ConfigError(source, f"{key}.{name}", "must be printable ASCII without leading or trailing "
                                                       "spaces once ${VAR}s are filled in (value not shown)")
        resolved[name] = value
    return resolved
