"""Typed, range-checked reads from one TOML table, with errors that name file and key."""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from ..errors import ConfigError


class Table:
    """Consumes the keys of one table; `finish` rejects whatever was not read."""

    def __init__(self, data: object, path: str, source: str, origins: Mapping[str, str]) -> None:
        self.path = path
        self.origins = origins
        self.source = source
        if not isinstance(data, dict):
            raise ConfigError(self.source_of(path), path or "(top level)", "must be a table", data)
        self.data: dict[str, Any] = data
        self.unread = set(data)

    def key(self, name: str) -> str:
        return f"{self.path}.{name}" if self.path else name

    def source_of(self, dotted: str) -> str:
        return self.origins.get(dotted, self.source)

    def fail(self, name: str, problem: str, value: object = None) -> ConfigError:
        dotted = self.key(name)
        return ConfigError(self.source_of(dotted), dotted, problem, value)

    def has(self, name: str) -> bool:
        return name in self.data

    def raw(self, name: str, default: object = None) -> Any:
        self.unread.discard(name)
        return self.data.get(name, default)

    def table(self, name: str) -> Table:
        return Table(self.raw(name, {}), self.key(name), self.source, self.origins)

    def tables(self, name: str) -> list[Table]:
        items = self.raw(name, [])
        if not isinstance(items, list):
            raise self.fail(name, "must be a list of tables", items)
        return [Table(item, f"{self.key(name)}[{i}]", self.source, self.origins) for i, item in enumerate(items)]

    def integer(self, name: str, default: int, low: int, high: int | None = None) -> int:
        value = self.raw(name, default)
        if isinstance(value, bool) or not isinstance(value, int) or value < low or (high is not None and value > high):
            raise self.fail(name, _range_text("an integer", low, high), value)
        return value

    def optional_integer(self, name: str, low: int, high: int | None = None) -> int | None:
        if self.data.get(name) is None:
            self.unread.discard(name)
            return None
        return self.integer(name, low, low, high)

    def number(self, name: str, default: float, low: float, high: float | None = None) -> float:
        value = self.raw(name, default)
        is_number = isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)
        if not is_number or value < low or (high is not None and value > high):
            raise self.fail(name, _range_text("a number", low, high), value)
        return float(value)

    def boolean(self, name: str, default: bool) -> bool:
        value = self.raw(name, default)
        if not isinstance(value, bool):
            raise self.fail(name, "must be true or false", value)
        return value

    def string(self, name: str, default: str | None = None, choices: tuple[str, ...] = ()) -> str:
        value = self.raw(name, default)
        if value is None:
            raise self.fail(name, "is required")
        if not isinstance(value, str) or not value:
            raise self.fail(name, "must be a non-empty string", value)
        if choices and value not in choices:
            raise self.fail(name, "must be one of " + ", ".join(choices), value)
        return value

    def optional_string(self, name: str) -> str | None:
        if self.data.get(name) is None:
            self.unread.discard(name)
            return None
        return self.string(name)

    def finish(self) -> None:
        if self.unread:
            name = sorted(self.unread)[0]
            raise self.fail(name, "unknown key")


def _range_text(kind: str, low: float, high: float | None) -> str:
    if high is None:
        return f"must be {kind} >= {_number_text(low)}"
    return f"must be {kind} from {_number_text(low)} to {_number_text(high)}"


def _number_text(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else f"{value:g}"
