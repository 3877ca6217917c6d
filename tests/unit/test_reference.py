"""descriptions.KEYS, the one table of the configuration's facts, cannot drift from the code: every dataclass field
is a key or said to come from elsewhere, every key is one building reads, with the table's range, choices and
default (a reader that overrides one fails here), every option sets the key the table says, and every command has
a description. conf/example.toml is held to the same table by test_example_config.py."""

from __future__ import annotations

import copy
import dataclasses
from pathlib import Path
from typing import Any

import pytest

from workerless_gevent.commands import reference
from workerless_gevent.config.building import build_config
from workerless_gevent.config.cron import PeriodicConfig, PeriodicTask
from workerless_gevent.config.descriptions import KEYS, NOT_KEYS
from workerless_gevent.config.keys import Choices, Key, Range, variable_of
from workerless_gevent.config.fleet import FleetConfig
from workerless_gevent.config.idempotency import IdempotencyConfig
from workerless_gevent.config.loading import OPTION_NAMES, SCALAR_OPTIONS, load_config
from workerless_gevent.config.model import (AwsConfig, Config, HttpTargetConfig, LambdaTargetConfig, PollingConfig,
                                            QueueConfig, TracingConfig)
from workerless_gevent.config.reference import default_of, render_configuration, toml_value, type_of
from workerless_gevent.errors import ConfigError

DATACLASSES = (Config, PollingConfig, QueueConfig, HttpTargetConfig, LambdaTargetConfig, AwsConfig, TracingConfig,
               PeriodicConfig, PeriodicTask, FleetConfig, IdempotencyConfig)
BASE: dict[str, Any] = {"queues": [{"name": "payments"}],
                        "targets": {"default": {"type": "http", "url": "http://127.0.0.1:8080/"}}}
LAMBDA = {"type": "lambda", "function": "billing-fn"}
PERIODIC = {"queue": "payments", "tasks": [{"name": "report", "url": "/report", "schedule": "@daily"}]}
FLEET = {"table": "workerless-fleet", "name": "orders"}


def document_with(key: Key, value: object) -> dict[str, Any]:
    """A valid configuration but for `key`, which is set to `value`."""
    document = copy.deepcopy(BASE)
    if key.owner is LambdaTargetConfig:
        document["targets"]["default"] = dict(LAMBDA)
    if "fleet" in key.key:
        document["fleet"] = dict(FLEET)
    if key.key.startswith("periodic."):
        document["periodic"] = copy.deepcopy(PERIODIC)
    parts = key.key.replace("<name>", "default").split(".")
    table = document
    for part in parts[:-1]:
        table = table[part[:-2]][0] if part.endswith("[]") else table.setdefault(part, {})
    table[parts[-1]] = value
    return document


def dotted(key: Key) -> str:
    return key.key.replace("[]", "[0]").replace("<name>", "default")


def build(document: dict[str, Any]) -> Config:
    return build_config(document, "test.toml", {})


def sample_value(key: Key, tmp_path: Path) -> object:
    if key.key == "periodic.file":
        cron = tmp_path / "cron.yaml"
        cron.write_text("version: 1\ncron:\n - name: backup\n   url: /backup\n   schedule: '@daily'\n")
        return str(cron)
    if key.key == "aws.ca_bundle":
        (tmp_path / "ca.pem").write_text("-----BEGIN CERTIFICATE-----\n")
        return str(tmp_path / "ca.pem")
    if key.key.endswith(".type"):
        return "lambda" if key.owner is LambdaTargetConfig else "http"
    if isinstance(key.rule, Range):
        return key.rule.low
    if isinstance(key.rule, Choices):
        return key.rule.values[0]
    return key.example


def test_every_field_of_the_configuration_is_described_or_said_to_come_from_elsewhere() -> None:
    described = {(key.owner, key.field) for key in KEYS}
    fields = {(owner, field.name) for owner in DATACLASSES for field in dataclasses.fields(owner)}
    assert fields - described - set(NOT_KEYS) == set()
    assert (described | set(NOT_KEYS)) - fields == set()
    assert described & set(NOT_KEYS) == set()


def test_every_key_has_a_description_and_a_rule() -> None:
    for key in KEYS:
        assert key.description.strip().endswith("."), key.key
        assert key.rule is not None or key.allowed, key.key
        assert key.rule is not None or key.example is not None, key.key
    assert len({(key.key, key.owner) for key in KEYS}) == len(KEYS)


@pytest.mark.parametrize("key", KEYS, ids=lambda key: f"{key.owner.__name__}:{key.key}")
def test_every_described_key_is_read_by_building(key: Key, tmp_path: Path) -> None:
    build(document_with(key, sample_value(key, tmp_path)))


RANGED = [key for key in KEYS if isinstance(key.rule, Range)]


@pytest.mark.parametrize("key", RANGED, ids=lambda key: f"{key.owner.__name__}:{key.key}")
def test_the_range_in_the_reference_is_the_one_building_enforces(key: Key) -> None:
    assert isinstance(key.rule, Range)
    low, high = key.rule.low, key.rule.high
    kind = "an integer" if type_of(key) == "integer" else "a number"
    build(document_with(key, low))
    if high is not None:
        build(document_with(key, high))
    below = low - 1 if low >= 1 or kind == "an integer" else low / 2 if low > 0 else -1
    for bad in [below] + ([] if high is None else [high + 1]):
        with pytest.raises(ConfigError) as raised:
            build(document_with(key, bad))
        assert raised.value.key == dotted(key)
        assert raised.value.problem.startswith(f"must be {kind} "), raised.value.line()
        bounds = [reference_number(low)] + ([] if high is None else [reference_number(high)])
        assert all(bound in raised.value.problem for bound in bounds), raised.value.line()


CHOICES = [key for key in KEYS if isinstance(key.rule, Choices) and not key.key.endswith(".type")]


@pytest.mark.parametrize("key", CHOICES, ids=lambda key: f"{key.owner.__name__}:{key.key}")
def test_the_choices_in_the_reference_are_the_ones_building_accepts(key: Key) -> None:
    assert isinstance(key.rule, Choices)
    for value in key.rule.values:
        build(document_with(key, value))
    with pytest.raises(ConfigError) as raised:
        build(document_with(key, "no-such-choice"))
    assert raised.value.key == dotted(key)
    assert raised.value.problem == "must be one of " + ", ".join(key.rule.values)


def test_the_defaults_in_the_reference_are_the_ones_building_applies() -> None:
    config = build(copy.deepcopy(BASE))
    lambda_config = build({**copy.deepcopy(BASE), "targets": {"default": dict(LAMBDA)}})
    owners: dict[type, object] = {Config: config, PollingConfig: config.polling, QueueConfig: config.queues[0],
                                  HttpTargetConfig: config.targets["default"], AwsConfig: config.aws,
                                  LambdaTargetConfig: lambda_config.targets["default"]}
    for key in KEYS:
        built = owners.get(key.owner)
        shown = default_of(key)
        if built is None or shown in ("required", "none"):
            continue
        value = getattr(built, key.field)
        assert shown == ("unset" if value is None else f"`{toml_value(value)}`"), key.key


def reference_number(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else f"{value:g}"


def test_the_configuration_page_shows_every_key_with_its_variable_and_flag() -> None:
    page = render_configuration(reference.long_flags())
    for key in KEYS:
        assert f"### `{key.key}`" in page
    assert "`WORKERLESS_POLL_FOR`, `--poll-for`" in page
    assert "`WORKERLESS_SHUTDOWN_TIMEOUT`" in page and "--shutdown-timeout" not in page  # no such flag
    assert "**Allowed** 1 to 20" in page


def test_every_option_the_table_names_is_one_loading_reads() -> None:
    assert {key.option for key in KEYS if key.option} == set(OPTION_NAMES)


@pytest.mark.parametrize("key", [key for key in KEYS if key.option in SCALAR_OPTIONS], ids=lambda key: key.key)
def test_the_variable_of_a_key_sets_that_key(key: Key, tmp_path: Path) -> None:
    value = sample_value(key, tmp_path)
    env = {"WORKERLESS_QUEUES": "payments", "WORKERLESS_HTTP": "http://127.0.0.1:8080/",
           variable_of(key.option): toml_value(value).strip('"')}
    config = load_config(None, env, {})
    assert getattr(config.polling if key.owner is PollingConfig else config, key.field) == value


def test_every_command_of_the_usage_text_has_a_description() -> None:
    commands = {reference.command_of(line) for line in reference.usage_lines()} - {None}
    assert commands == set(reference.COMMANDS)
    assert all(len(text) > 40 for text in reference.COMMANDS.values())


def test_every_option_of_the_usage_text_has_a_description_and_every_variable_a_flag_or_a_key() -> None:
    options = reference.parse_options()
    assert all(option.description for option in options)
    assert {"--config", "--queues", "--http", "--parallel", "--help"} <= reference.long_flags()
    page = reference.render_cli()
    for name in OPTION_NAMES:
        assert f"`WORKERLESS_{name.upper()}`" in page or f"`WORKERLESS_{name.upper()}`" in \
            render_configuration(reference.long_flags()), name
    assert "## `workerless redrive`" in page and "| `--poll-for=S` |" in page
