"""Read the TOML file and lay environment variables and flags over it, in that precedence."""

from __future__ import annotations

import dataclasses
import tomllib
from collections.abc import Mapping
from typing import Any

from ..errors import ConfigError
from .headers import resolve_headers
from .building import build_config
from .descriptions import KEYS
from .keys import flag_of, variable_of
from .model import Config, HttpTargetConfig

SPECIAL_OPTIONS = ("queues", "function", "http")  # each sets several keys (descriptions.KEYS says which)
# option name -> (path in the document, type of its value), for the options that set one key each
SCALAR_OPTIONS: dict[str, tuple[tuple[str, ...], type]] = {
    key.option: (tuple(key.key.split(".")), key.value_type) for key in KEYS
    if key.option and key.option not in SPECIAL_OPTIONS}
OPTION_NAMES = tuple(SCALAR_OPTIONS) + SPECIAL_OPTIONS


def load_config(path: str | None, env: Mapping[str, str], flags: Mapping[str, object]) -> Config:
    """Build the one Config of a run; raises ConfigError with a one-line message."""
    if path is not None and not path.strip():  # --config= or -c "": a mistake, not "no file"
        raise ConfigError("--config", "", "needs a file name", path)
    path = path or env.get("WORKERLESS_CONFIG") or None
    document = read_toml(path) if path else {}
    source = path or "command line"
    origins: dict[str, str] = {}
    settings: list[tuple[str, object, str]] = [(option, env[variable_of(option)], variable_of(option))
                                               for option in OPTION_NAMES if variable_of(option) in env]
    settings += [(option, value, flag_of(option))
                 for option, value in flags.items() if value is not None and value is not False]
    reject_conflicting_targets(settings)
    # --queues implies a strategy, so it goes first and an explicit strategy still wins.
    settings.sort(key=lambda setting: setting[0] != "queues")
    for option, value, origin in settings:
        apply_option(document, option, value, origin, origins)
    return with_span_buffer(resolve_secrets(build_config(document, source, origins), env), env)


BUFFER_VARIABLES = (("OTEL_BSP_MAX_QUEUE_SIZE", "max_queue_size", 1), ("OTEL_BSP_MAX_EXPORT_BATCH_SIZE",
                    "max_export_batch_size", 1), ("OTEL_BSP_SCHEDULE_DELAY", "schedule_delay_seconds", 1000))


def with_span_buffer(config: Config, env: Mapping[str, str]) -> Config:
    """[tracing]'s span buffer from the variables the SDK's batching reads (the delay in milliseconds)."""
    if config.tracing is None:
        return config
    values: dict[str, float] = {}
    for variable, field, per_unit in BUFFER_VARIABLES:
        text = env.get(variable, "").strip()
        if not text:
            continue
        if not text.isdigit() or int(text) < 1:
            raise ConfigError(variable, "", "must be a whole number >= 1", text)
        values[field] = int(text) / per_unit if per_unit > 1 else int(text)
    tracing = dataclasses.replace(config.tracing, **values)  # type: ignore[arg-type]
    if tracing.max_export_batch_size > tracing.max_queue_size:
        raise ConfigError("OTEL_BSP_MAX_EXPORT_BATCH_SIZE", "", "must not exceed OTEL_BSP_MAX_QUEUE_SIZE",
                          tracing.max_export_batch_size)
    return dataclasses.replace(config, tracing=tracing)


def reject_conflicting_targets(settings: list[tuple[str, object, str]]) -> None:
    """--http with --function (or both variables) would drop one silently; a flag over a variable is precedence."""
    for level in ("WORKERLESS_", "--"):
        given = [origin for option, value, origin in settings
                 if option in ("function", "http") and origin.startswith(level) and value]
        if len(given) > 1:
            raise ConfigError(given[1], "targets.default",
                              f"conflicts with {given[0]}: give one target, HTTP or Lambda")


def resolve_secrets(config: Config, env: Mapping[str, str]) -> Config:
    """Secrets live in the environment, named by the config (signing_secret_env, ${VAR} in headers), and are
    read once here."""
    targets = dict(config.targets)
    for name, target in config.targets.items():
        if isinstance(target, HttpTargetConfig) and target.signing_secret_env:
            secret = env.get(target.signing_secret_env, "")
            if not secret:
                raise ConfigError(config.source, f"targets.{name}.signing_secret_env",
                                  "names an environment variable that is not set or empty", target.signing_secret_env)
            targets[name] = target = dataclasses.replace(target, signing_secret=secret)
        if isinstance(target, HttpTargetConfig) and target.headers:
            headers = resolve_headers(target.headers, env, config.source, f"targets.{name}.headers")
            targets[name] = dataclasses.replace(target, headers=headers)
    return dataclasses.replace(config, targets=targets)


def read_toml(path: str) -> dict[str, Any]:
    try:
        with open(path, "rb") as handle:
            data = handle.read()
    except FileNotFoundError:
        raise ConfigError(path, "", "config file not found") from None
    except OSError as error:
        raise ConfigError(path, "", f"cannot read config file: {error.strerror}") from None
    try:
        return tomllib.loads(decode_utf8(data, path))
    except tomllib.TOMLDecodeError as error:
        raise ConfigError(path, "", f"invalid TOML: {error}") from None


def decode_utf8(data: bytes, path: str) -> str:
    """TOML is UTF-8 only; point at the first bad byte instead of a UnicodeDecodeError traceback."""
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as error:
        if data.startswith((b"\xff\xfe", b"\xfe\xff")):
            raise ConfigError(path, "", "not UTF-8: the file is UTF-16 (TOML files must be UTF-8)") from None
        line = data.count(b"\n", 0, error.start) + 1
        column = error.start - data.rfind(b"\n", 0, error.start)
        raise ConfigError(path, "", f"not UTF-8: byte 0x{data[error.start]:02x} at line {line}, column {column} "
                                    "(TOML files must be UTF-8)") from None


def apply_option(document: dict[str, Any], option: str, value: object, origin: str, origins: dict[str, str]) -> None:
    """Set one env/flag value in the document, remembering where it came from for errors."""
    if option == "queues":
        document["queues"] = parse_queue_spec(str(value), origin)
        polling = subtable(document, "polling")
        if polling is not None:
            polling["strategy"] = strategy_for_spec(document["queues"])
            origins["polling.strategy"] = origin
        for index in range(len(document["queues"])):
            origins[f"queues[{index}]"] = origin
            for key in ("name", "weight", "target"):
                origins[f"queues[{index}].{key}"] = origin
        return
    if option in ("function", "http"):
        targets = subtable(document, "targets")
        if targets is None:
            return
        targets["default"] = (
            {"type": "lambda", "function": str(value)} if option == "function" else {"type": "http", "url": str(value)}
        )
        for key in ("type", "function", "url"):
            origins[f"targets.default.{key}"] = origin
        return
    path, kind = SCALAR_OPTIONS[option]
    table: dict[str, Any] | None = document
    for part in path[:-1]:
        table = subtable(table, part) if table is not None else None
    if table is None:
        return  # the TOML has a non-table there; validation reports it
    table[path[-1]] = coerce(value, kind)
    origins[".".join(path)] = origin


def subtable(document: dict[str, Any], name: str) -> dict[str, Any] | None:
    table = document.setdefault(name, {})
    return table if isinstance(table, dict) else None


def coerce(value: object, kind: type) -> object:
    """Turn a string from env or argv into the TOML type; leave it as is if it does not parse."""
    if not isinstance(value, str):
        return value
    try:
        if kind is int:
            return int(value)
        if kind is float:
            return float(value)
    except ValueError:
        return value
    if kind is bool:
        return {"1": True, "true": True, "yes": True, "0": False, "false": False, "no": False}.get(value.lower(), value)
    return value


def parse_queue_spec(spec: str, origin: str) -> list[dict[str, object]]:
    """`payments:3,submissions:2,default:1` -> queue tables, in the given order."""
    queues: list[dict[str, object]] = []
    for part in spec.split(","):
        name, colon, weight = part.strip().rpartition(":")
        if not colon or "/" in weight:
            name, weight = part.strip(), ""
        if not name:
            raise ConfigError(origin, "queues", "must be NAME[:WEIGHT],... with no empty names", spec)
        queue: dict[str, object] = {"url": name} if "://" in name else {"name": name}
        if weight:
            queue["weight"] = coerce(weight, int)
        queues.append(queue)
    return queues


def strategy_for_spec(queues: list[dict[str, object]]) -> str:
    """No weights means strict order; equal weights mean random; otherwise weighted."""
    weights = [queue.get("weight") for queue in queues]
    if all(weight is None for weight in weights):
        return "priority"
    if len(set(weights)) == 1:
        return "random"
    return "weighted"
