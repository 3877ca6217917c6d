"""conf/example.toml against `descriptions.KEYS`, the table building reads: every key is in it, set or commented
out; every default, range and choice its comments state is the table's; and it loads, commented keys too."""

from __future__ import annotations

import re
import tomllib
from dataclasses import dataclass
from pathlib import Path

import pytest

from workerless_gevent.config.descriptions import KEYS
from workerless_gevent.config.keys import Choices, Key, Range
from workerless_gevent.config.loading import load_config
from workerless_gevent.config.model import HttpTargetConfig, LambdaTargetConfig
from workerless_gevent.config.reference import number_text, toml_value

EXAMPLE = Path(__file__).resolve().parents[2] / "conf" / "example.toml"
HEADER = re.compile(r"(?:# )?\[\[?([a-z_.]+)\]\]?$")
KEY_LINE = re.compile(r"(?:# )?([a-z_]+) = (.*)$")
STATED_DEFAULT = re.compile(r"\bDefault (?!:)(\S+?)[.:,;]?(?:\s|$)")
STATED_UNSET = re.compile(r"\bDefault: (?:unset|none)\b")


@dataclass(frozen=True)
class Entry:
    """One key line of the example, with the comment lines right above it (none when another key is between)."""
    key: Key
    value: str
    comment: str


def example_entries(text: str) -> list[Entry]:
    types = {name: table.get("type") for name, table in tomllib.loads(uncommented(text)).get("targets", {}).items()}
    section, comment, entries = "", [], []
    for line in text.splitlines():
        header, key_line = HEADER.match(line), KEY_LINE.match(line)
        if header:
            section = header.group(1)
            entries += [Entry(key, "", " ".join(comment)) for key in KEYS if key.key == section]  # [[periodic.tasks]]
            comment = []
        elif key_line:
            entries.append(Entry(key_of(section, key_line.group(1), types), key_line.group(2), " ".join(comment)))
            comment = []
        else:
            comment = comment + [line.lstrip("# ")] if line.startswith("#") else []
    return entries


def key_of(section: str, name: str, types: dict[str, str]) -> Key:
    owner = None
    prefix = {"": "", "queues": "queues[].", "periodic.tasks": "periodic.tasks[]."}.get(section, section + ".")
    if section.startswith("targets."):
        prefix = "targets.<name>."
        owner = LambdaTargetConfig if types[section.split(".", 1)[1]] == "lambda" else HttpTargetConfig
    return next(key for key in KEYS if key.key == prefix + name and owner in (None, key.owner))


def uncommented(text: str) -> str:
    """The example with every commented-out key and table written in."""
    return "\n".join(line[2:] if line.startswith("# ") and (HEADER.match(line) or KEY_LINE.match(line)) else line
                     for line in text.splitlines())


def range_text(rule: Range) -> str:
    return f"{number_text(rule.low)}-{number_text(rule.high)}" if rule.high is not None else ""


ENTRIES = example_entries(EXAMPLE.read_text(encoding="utf-8"))


def test_the_example_loads_as_written_and_with_every_commented_key_written_in(tmp_path: Path) -> None:
    load_config(str(EXAMPLE), {}, {})
    config = tmp_path / "example.toml"
    config.write_text(uncommented(EXAMPLE.read_text(encoding="utf-8")))
    (tmp_path / "cron.yaml").write_text("version: 1\ncron:\n - name: backup\n   url: /backup\n   schedule: '@daily'\n")
    (tmp_path / "certs").mkdir()
    (tmp_path / "certs" / "corporate-ca.pem").write_text("-----BEGIN CERTIFICATE-----\n")
    load_config(str(config), {"APP_TOKEN": "token", "WORKERLESS_SIGNING_SECRET": "secret"}, {})


def test_every_key_is_in_the_example() -> None:
    assert {(key.key, key.owner) for key in KEYS} - {(entry.key.key, entry.key.owner) for entry in ENTRIES} == set()


@pytest.mark.parametrize("entry", [entry for entry in ENTRIES if STATED_DEFAULT.search(entry.comment)],
                         ids=lambda entry: entry.key.key)
def test_every_default_the_example_states_is_the_tables(entry: Entry) -> None:
    stated = STATED_DEFAULT.search(entry.comment)
    assert stated is not None and stated.group(1) == toml_value(entry.key.default), entry.comment


@pytest.mark.parametrize("entry", [entry for entry in ENTRIES if STATED_UNSET.search(entry.comment)],
                         ids=lambda entry: entry.key.key)
def test_every_key_the_example_says_is_unset_has_no_default(entry: Entry) -> None:
    """Unset: None, or an empty list of filters."""
    assert entry.key.default in (None, ()) and not entry.key.is_required, entry.comment


@pytest.mark.parametrize("key", [key for key in KEYS if isinstance(key.rule, Range) and key.rule.high is not None],
                         ids=lambda key: f"{key.owner.__name__}:{key.key}")
def test_every_range_is_stated_in_the_example(key: Key) -> None:
    """Stated beside the key, or beside a key of the same name and rule (a Lambda target's flow keys are an HTTP
    target's); any other range beside the key is a stale one."""
    assert isinstance(key.rule, Range)
    comments = [entry.comment for entry in ENTRIES if entry.key.key == key.key and entry.key.rule == key.rule]
    bound = re.compile(rf"(?<![\d.-]){re.escape(range_text(key.rule))}(?!\d|\.\d)")
    assert any(bound.search(comment) for comment in comments), (key.key, comments)


@pytest.mark.parametrize("key", [key for key in KEYS if isinstance(key.rule, Choices)],
                         ids=lambda key: f"{key.owner.__name__}:{key.key}")
def test_every_choice_is_named_in_the_example(key: Key) -> None:
    assert isinstance(key.rule, Choices)
    said = " ".join(entry.comment + " " + entry.value for entry in ENTRIES if entry.key.key == key.key)
    assert [choice for choice in key.rule.values if not re.search(rf"\b{re.escape(choice)}\b", said)] == [], key.key
