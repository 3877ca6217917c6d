"""Filter criteria in the syntax of Lambda's event source mappings, for one queue's messages.

A filter is a JSON pattern over the message as Lambda's SQS record shows it: `body` (the body's JSON
when the pattern for it is an object, else the body text), `attributes` and `messageAttributes`
(`{"name": {"stringValue": ..., "dataType": ...}}`). A message matches when any of the filters
matches. Leaves are lists of alternatives: exact strings, numbers, booleans or null, and the
operators `prefix`, `suffix`, `equals-ignore-case`, `anything-but`, `numeric` and `exists`.
"""

from __future__ import annotations

import json
import operator
from collections.abc import Callable
from typing import Any

from .message import Message

NUMERIC_OPERATORS: dict[str, Callable[[float, float], bool]] = {
    "=": operator.eq, "<": operator.lt, "<=": operator.le, ">": operator.gt, ">=": operator.ge}
OPERATORS = ("prefix", "suffix", "equals-ignore-case", "anything-but", "numeric", "exists")
MISSING = object()
Pattern = dict[str, Any]


class FilterError(ValueError):
    """A filter that does not parse, with what is wrong with it."""


def parse_filters(texts: list[str]) -> tuple[Pattern, ...]:
    """Each text is one JSON pattern; raises FilterError naming the first problem."""
    patterns = []
    for text in texts:
        try:
            pattern = json.loads(text)
        except json.JSONDecodeError as error:
            raise FilterError(f"is not valid JSON ({error.msg} at character {error.pos})") from None
        if not isinstance(pattern, dict) or not pattern:
            raise FilterError("must be a non-empty JSON object, e.g. {\"body\": {\"kind\": [\"order\"]}}")
        unknown = set(pattern) - {"body", "attributes", "messageAttributes"}
        if unknown:
            raise FilterError(f"may filter on body, attributes and messageAttributes only (got {sorted(unknown)[0]})")
        check_pattern(pattern, "")
        patterns.append(pattern)
    return tuple(patterns)


def check_pattern(pattern: Any, path: str) -> None:
    if isinstance(pattern, dict):
        for key, value in pattern.items():
            check_pattern(value, f"{path}.{key}" if path else key)
        return
    if not isinstance(pattern, list) or not pattern:
        raise FilterError(f"{path}: must be an object or a non-empty list of values to match")
    for leaf in pattern:
        if isinstance(leaf, dict):
            check_operator(leaf, path)
        elif isinstance(leaf, list):
            raise FilterError(f"{path}: a list of values cannot hold a list")


def check_operator(leaf: dict[str, Any], path: str) -> None:
    if len(leaf) != 1 or next(iter(leaf)) not in OPERATORS:
        raise FilterError(f"{path}: an operator must be one of {', '.join(OPERATORS)} (got {json.dumps(leaf)})")
    name, value = next(iter(leaf.items()))
    if name in ("prefix", "suffix", "equals-ignore-case") and not isinstance(value, str):
        raise FilterError(f"{path}: {name} takes a string")
    if name == "exists" and not isinstance(value, bool):
        raise FilterError(f"{path}: exists takes true or false")
    if name == "numeric":
        if not isinstance(value, list) or not value or len(value) % 2 or len(value) > 4:
            raise FilterError(f"{path}: numeric takes [op, number] or [op, number, op, number]")
        for op, number in zip(value[::2], value[1::2]):
            if op not in NUMERIC_OPERATORS or isinstance(number, bool) or not isinstance(number, (int, float)):
                raise FilterError(f"{path}: numeric takes operators = < <= > >= followed by numbers")


def matches_any(patterns: tuple[Pattern, ...], message: Message) -> bool:
    """True when there is no filter or when one of them matches the message."""
    return not patterns or any(matches(pattern, record_view(pattern, message)) for pattern in patterns)


def record_view(pattern: Pattern, message: Message) -> dict[str, Any]:
    view: dict[str, Any] = {"attributes": message.attributes}
    body: Any = message.body
    if isinstance(pattern.get("body"), dict):
        try:
            body = json.loads(message.body)
        except (ValueError, RecursionError):
            body = MISSING  # a body that is not JSON matches no pattern on its fields, as in Lambda
    view["body"] = body
    view["messageAttributes"] = {name: {"stringValue": value.get("StringValue"), "dataType": value.get("DataType")}
                                 for name, value in message.message_attributes.items()}
    return view


def matches(pattern: Any, value: Any) -> bool:
    if isinstance(pattern, dict):
        if not isinstance(value, dict):
            return False
        return all(matches(sub, value.get(key, MISSING)) for key, sub in pattern.items())
    values = value if isinstance(value, list) else [value]
    return any(matches_leaf(leaf, candidate) for leaf in pattern for candidate in values)


def matches_leaf(leaf: Any, value: Any) -> bool:
    if not isinstance(leaf, dict):
        return value is not MISSING and same_value(leaf, value)
    name, expected = next(iter(leaf.items()))
    if name == "exists":
        return (value is not MISSING) is bool(expected)
    if value is MISSING:
        return False
    if name == "prefix":
        return isinstance(value, str) and value.startswith(expected)
    if name == "suffix":
        return isinstance(value, str) and value.endswith(expected)
    if name == "equals-ignore-case":
        return isinstance(value, str) and value.lower() == expected.lower()
    if name == "anything-but":
        excluded = expected if isinstance(expected, list) else [expected]
        return not any(same_value(item, value) for item in excluded)
    return is_in_range(expected, value)


def same_value(expected: Any, value: Any) -> bool:
    if isinstance(expected, bool) or isinstance(value, bool) or expected is None or value is None:
        return bool(expected is value or (expected == value and type(expected) is type(value)))
    if isinstance(expected, (int, float)) and isinstance(value, (int, float)):
        return float(expected) == float(value)
    return bool(expected == value)


def is_in_range(conditions: list[Any], value: Any) -> bool:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return False
    return all(NUMERIC_OPERATORS[op](float(value), float(bound)) for op, bound in zip(conditions[::2], conditions[1::2]))
