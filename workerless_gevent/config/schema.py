"""Typed, range-checked reads from one TOML table, each by its `keys.Key` (default, range, choices), with
errors that name file and key."""

from __future__ import annotations

import math
import os
from collections.abc import Mapping
from typing import Any

from ..errors import ConfigError
from .keys import Key


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

    def fields(self, keys: Mapping[str, Key], *fields: str) -> dict[str, Any]:
        """The keys of these dataclass fields, in this order, each read as its field's type says."""
        return {field: self.read(keys[field]) for field in fields}

    def read(self, key: Key) -> Any:
        """The key's value as its field's type says; an absent key of a field that may be None reads as None."""
        if key.annotation.endswith("| None") and self.data.get(key.name) is None:
            self.unread.discard(key.name)
            return None
        kind = key.value_type
        if kind is bool:
            return self.boolean(key)
        if kind is int:
            return self.integer(key)
        return self.number(key) if kind is float else self.string(key)

    def integer(self, key: Key) -> int:
        value = self.raw(key.name, key.default)
        is_integer = isinstance(value, int) and not isinstance(value, bool)
        if not is_integer or value < key.low or (key.high is not None and value > key.high):
            raise self.fail(key.name, _range_text("an integer", key.low, key.high), value)
        return int(value)

    def number(self, key: Key) -> float:
        value = self.raw(key.name, key.default)
        is_number = isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)
        if not is_number or value < key.low or (key.high is not None and value > key.high):
            raise self.fail(key.name, _range_text("a number", key.low, key.high), value)
        return float(value)

    def boolean(self, key: Key) -> bool:
        value = self.raw(key.name, key.default)
        if not isinstance(value, bool):
            raise self.fail(key.name, "must be true or false", value)
        return value

    def string(self, key: Key, default: str | None = None) -> str:
        """`default`: where the table itself gives one to a required key (a queue's name from its url)."""
        value = self.raw(key.name, key.default if default is None else default)
        if value is None:
            raise self.fail(key.name, "is required")
        if not isinstance(value, str) or not value:
            raise self.fail(key.name, "must be a non-empty string", value)
        if key.choices and value not in key.choices:
            raise self.fail(key.name, "must be one of " + ", ".join(key.choices), value)
        return value

    def optional_string(self, key: Key) -> str | None:
        if self.data.get(key.name) is None:
            self.unread.discard(key.name)
            return None
        return self.string(key)

    def file_path(self, file: str) -> str:
        """A file the configuration names, relative to its file's directory (to the working directory without one)."""
        if os.path.isabs(file) or self.source == "command line":
            return file
        return os.path.join(os.path.dirname(self.source), file)

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
