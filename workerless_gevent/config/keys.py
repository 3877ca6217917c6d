"""The facts of one configuration key: its name, the dataclass field it fills (which gives its type and
default), its range or choices, its description and the option that sets it; `descriptions.KEYS` lists them."""

from __future__ import annotations

import dataclasses
import functools
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True, slots=True)
class Range:
    """An integer or number from `low` to `high` (no upper bound when None), as `schema.Table` checks it."""
    low: float
    high: float | None = None


@dataclass(frozen=True, slots=True)
class Choices:
    values: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class Key:
    """`key` is spelt as errors spell it, with `[]` for any list item and `<name>` for any target's name."""
    key: str
    owner: type
    field: str
    description: str
    rule: Range | Choices | None = None
    allowed: str = ""  # the rule in words, where it is neither a range nor a list of choices
    example: object = None  # a value building accepts, where the rule gives none
    option: str = ""  # sets the key: the variable WORKERLESS_<OPTION> and, if the CLI takes it, --<option>

    @property
    def name(self) -> str:
        """The key inside its table, as `schema.Table` reads it."""
        return self.key.rsplit(".", 1)[-1]

    @property
    def dataclass_field(self) -> dataclasses.Field[Any]:
        return field_of(self.owner, self.field)

    @property
    def is_required(self) -> bool:
        """No default; a target's `type` is required too, as it picks the dataclass."""
        field = self.dataclass_field
        no_default = field.default is dataclasses.MISSING and field.default_factory is dataclasses.MISSING
        return no_default or self.key.endswith(".type")

    @property
    def default(self) -> Any:
        """What an absent key reads as: the field's default, None when required or built by a factory."""
        default = self.dataclass_field.default
        return None if self.is_required or default is dataclasses.MISSING else default

    @property
    def annotation(self) -> str:
        return str(self.dataclass_field.type)

    @property
    def value_type(self) -> type:
        """The TOML type of the key's value, as a variable or flag's text is turned into it."""
        for start, kind in (("bool", bool), ("int", int), ("float", float)):
            if self.annotation.startswith(start):
                return kind
        return str

    @property
    def low(self) -> float:
        assert isinstance(self.rule, Range), self.key
        return self.rule.low

    @property
    def high(self) -> float | None:
        assert isinstance(self.rule, Range), self.key
        return self.rule.high

    @property
    def choices(self) -> tuple[str, ...]:
        return self.rule.values if isinstance(self.rule, Choices) else ()

    def up_to(self, high: float) -> Key:
        """The key with another upper bound, where another key's value sets it (a Lambda batch with a window)."""
        return dataclasses.replace(self, rule=Range(self.low, high))


@functools.cache
def field_of(owner: type, name: str) -> dataclasses.Field[Any]:
    """A dataclass's field by name: its type and default, read for each key at every start."""
    return next(field for field in dataclasses.fields(owner) if field.name == name)


def variable_of(option: str) -> str:
    return "WORKERLESS_" + option.upper()


def flag_of(option: str) -> str:
    return "--" + option.replace("_", "-")
