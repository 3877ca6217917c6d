"""Precedence (defaults < TOML < WORKERLESS_* env < flags) and the source each error names."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.unit.bad_configs import config_text
from tests.unit.config_files import error_line, write_config
from workerless_gevent.config.model import Config, HttpTargetConfig, LambdaTargetConfig, QueueConfig
from workerless_gevent.config.loading import coerce, load_config, parse_queue_spec, strategy_for_spec

HTTP_FLAGS: dict[str, Any] = {"queues": "payments", "http": "http://127.0.0.1:8080/"}


def test_flags_alone_need_no_file() -> None:
    config = load_config(None, {}, HTTP_FLAGS)
    assert config.source == "command line"
    assert config.concurrency == 50
    assert config.queues == (QueueConfig(name="payments"),)
    assert config.targets == {"default": HttpTargetConfig(name="default", url="http://127.0.0.1:8080/")}


def test_each_layer_overrides_the_one_below(tmp_path: Path) -> None:
    path = write_config(tmp_path, config_text(top="concurrency = 5\nshutdown_timeout = 5\nmax_messages = 5\n"))
    env = {"WORKERLESS_SHUTDOWN_TIMEOUT": "6", "WORKERLESS_MAX_MESSAGES": "6"}
    flags = {"max_messages": "7"}
    config = load_config(path, env, flags)
    assert (config.concurrency, config.shutdown_timeout, config.max_messages) == (5, 6, 7)
    assert config.polling.poll_for == 10  # untouched default


def test_flag_beats_env_beats_toml_for_one_key(tmp_path: Path) -> None:
    path = write_config(tmp_path, config_text(top="concurrency = 5\n"))
    assert load_config(path, {}, {}).concurrency == 5
    assert load_config(path, {"WORKERLESS_CONCURRENCY": "8"}, {}).concurrency == 8
    assert load_config(path, {"WORKERLESS_CONCURRENCY": "8"}, {"concurrency": "9"}).concurrency == 9


def test_unset_flags_do_not_override(tmp_path: Path) -> None:
    path = write_config(tmp_path, config_text(top="drain = true\nconcurrency = 5\n"))
    config = load_config(path, {}, {"drain": False, "concurrency": None, "queues": None, "http": None})
    assert (config.drain, config.concurrency) == (True, 5)


def test_config_path_from_environment(tmp_path: Path) -> None:
    path = write_config(tmp_path, config_text(top="concurrency = 3\n"))
    config = load_config(None, {"WORKERLESS_CONFIG": path}, {})
    assert (config.source, config.concurrency) == (path, 3)


def test_explicit_path_beats_environment_path(tmp_path: Path) -> None:
    path = write_config(tmp_path, config_text(top="concurrency = 3\n"))
    config = load_config(path, {"WORKERLESS_CONFIG": str(tmp_path / "absent.toml")}, {})
    assert config.concurrency == 3


@pytest.mark.parametrize(
    ("option", "value", "read", "expected"),
    [
        pytest.param("name", "my-app", lambda c: c.name, "my-app", id="name"),
        pytest.param("concurrency", "12", lambda c: c.concurrency, 12, id="concurrency"),
        pytest.param("shutdown_timeout", "0", lambda c: c.shutdown_timeout, 0, id="shutdown_timeout"),
        pytest.param("poll_for", "3", lambda c: c.polling.poll_for, 3, id="poll_for"),
        pytest.param("sleep", "0.5", lambda c: c.polling.sleep, 0.5, id="sleep"),
        pytest.param("strategy", "round-robin", lambda c: c.polling.strategy, "round-robin", id="strategy"),
        pytest.param("batch_size", "4", lambda c: c.polling.batch_size, 4, id="batch_size"),
        pytest.param("metrics_interval", "30", lambda c: c.metrics_interval, 30, id="metrics_interval"),
        pytest.param("status", "0.0.0.0:9100", lambda c: c.status_listen, "0.0.0.0:9100", id="status"),
        pytest.param("log_format", "json", lambda c: c.log_format, "json", id="log_format"),
        pytest.param("log_level", "ERROR", lambda c: c.log_level, "ERROR", id="log_level"),
        pytest.param("max_messages", "100", lambda c: c.max_messages, 100, id="max_messages"),
    ],
)
def test_every_scalar_option_from_env_and_flag(
    option: str, value: str, read: Callable[[Config], object], expected: object
) -> None:
    from_env = load_config(None, {"WORKERLESS_" + option.upper(): value}, HTTP_FLAGS)
    from_flag = load_config(None, {}, {**HTTP_FLAGS, option: value})
    assert read(from_env) == expected
    assert read(from_flag) == expected


@pytest.mark.parametrize(
    ("text", "expected"),
    [("1", True), ("true", True), ("YES", True), ("0", False), ("false", False), ("No", False)],
)
def test_drain_from_environment(text: str, expected: bool) -> None:
    assert load_config(None, {"WORKERLESS_DRAIN": text}, HTTP_FLAGS).drain is expected


def test_drain_flag() -> None:
    assert load_config(None, {}, {**HTTP_FLAGS, "drain": True}).drain is True


@pytest.mark.parametrize(
    ("spec", "strategy", "weights"),
    [
        pytest.param("payments:3,submissions:2,default:1", "weighted", [3, 2, 1], id="weights-give-weighted"),
        pytest.param("payments,submissions,default", "priority", [1, 1, 1], id="no-weights-give-priority"),
        pytest.param("payments:2,submissions:2", "random", [2, 2], id="equal-weights-give-random"),
        pytest.param("payments:2,submissions", "weighted", [2, 1], id="some-weights-give-weighted"),
        pytest.param(" payments:3 , submissions ", "weighted", [3, 1], id="spaces-ignored"),
    ],
)
def test_queue_spec_implies_strategy(spec: str, strategy: str, weights: list[int]) -> None:
    config = load_config(None, {}, {**HTTP_FLAGS, "queues": spec})
    assert config.polling.strategy == strategy
    assert [queue.weight for queue in config.queues] == weights
    assert [queue.name for queue in config.queues] == [part.split(":")[0].strip() for part in spec.split(",")]


def test_queue_spec_keeps_priority_order() -> None:
    config = load_config(None, {}, {**HTTP_FLAGS, "queues": "payments:3,submissions:2,default:1"})
    assert [queue.name for queue in config.queues] == ["payments", "submissions", "default"]


@pytest.mark.parametrize("strategy", ["priority", "round-robin"])
def test_explicit_strategy_flag_wins_over_queue_spec(strategy: str) -> None:
    # the strategy flag comes first in the dict on purpose: order of flags must not matter
    flags = {"strategy": strategy, "queues": "payments:3,submissions:1", "http": "http://127.0.0.1:8080/"}
    assert load_config(None, {}, flags).polling.strategy == strategy


def test_explicit_strategy_env_wins_over_queue_spec_env() -> None:
    env = {"WORKERLESS_STRATEGY": "round-robin", "WORKERLESS_QUEUES": "payments:3,submissions:1"}
    assert load_config(None, env, {"http": "http://127.0.0.1:8080/"}).polling.strategy == "round-robin"


def test_queue_spec_replaces_toml_queues(tmp_path: Path) -> None:
    path = write_config(tmp_path, config_text(queue="weight = 9\nmax_retries = 3\n"))
    config = load_config(path, {}, {"queues": "submissions,default"})
    assert config.queues == (QueueConfig(name="submissions"), QueueConfig(name="default"))


def test_queue_spec_flag_beats_env() -> None:
    config = load_config(None, {"WORKERLESS_QUEUES": "a:1,b:2"}, {**HTTP_FLAGS, "queues": "c,d"})
    assert [queue.name for queue in config.queues] == ["c", "d"]
    assert config.polling.strategy == "priority"


def test_queue_spec_with_urls() -> None:
    url = "https://sqs.us-east-1.amazonaws.com/123456789012/payments"
    local = "http://127.0.0.1:4566/000000000000/default"
    config = load_config(None, {}, {**HTTP_FLAGS, "queues": f"{url}:3,{local}"})
    assert [(queue.name, queue.url, queue.weight) for queue in config.queues] == [
        ("payments", url, 3), ("default", local, 1)]


def test_function_flag_makes_a_lambda_default_target(tmp_path: Path) -> None:
    path = write_config(tmp_path, config_text())
    config = load_config(path, {}, {"function": "billing-fn"})
    assert config.targets == {"default": LambdaTargetConfig(name="default", function="billing-fn")}


def test_http_env_replaces_toml_target(tmp_path: Path) -> None:
    path = write_config(tmp_path, config_text(target="connect_timeout = 9\n"))
    config = load_config(path, {"WORKERLESS_HTTP": "http://127.0.0.1:9000/work"}, {})
    assert config.targets == {"default": HttpTargetConfig(name="default", url="http://127.0.0.1:9000/work")}


def test_flag_replaces_a_bad_toml_value(tmp_path: Path) -> None:
    path = write_config(tmp_path, config_text(top="concurrency = 0\n"))
    assert load_config(path, {}, {"concurrency": "4"}).concurrency == 4


@pytest.mark.parametrize(
    ("env", "flags", "expected"),
    [
        pytest.param({}, {"concurrency": "0"},
                     "--concurrency: concurrency: must be an integer from 1 to 10000 (got 0)", id="flag-range"),
        pytest.param({}, {"concurrency": "abc"},
                     '--concurrency: concurrency: must be an integer from 1 to 10000 (got "abc")', id="flag-not-number"),
        pytest.param({}, {"concurrency": "1.5"},
                     '--concurrency: concurrency: must be an integer from 1 to 10000 (got "1.5")', id="flag-fraction"),
        pytest.param({"WORKERLESS_CONCURRENCY": "0"}, {},
                     "WORKERLESS_CONCURRENCY: concurrency: must be an integer from 1 to 10000 (got 0)", id="env-range"),
        pytest.param({}, {"poll_for": "30"},
                     "--poll-for: polling.poll_for: must be an integer from 1 to 20 (got 30)", id="poll-for"),
        pytest.param({"WORKERLESS_POLL_FOR": "0"}, {},
                     "WORKERLESS_POLL_FOR: polling.poll_for: must be an integer from 1 to 20 (got 0)", id="env-poll-for"),
        pytest.param({}, {"sleep": "soon"},
                     '--sleep: polling.sleep: must be a number from 0 to 3600 (got "soon")', id="sleep"),
        pytest.param({}, {"strategy": "fastest"},
                     '--strategy: polling.strategy: must be one of priority, weighted, random, round-robin '
                     '(got "fastest")', id="strategy"),
        pytest.param({}, {"batch_size": "11"},
                     "--batch-size: polling.batch_size: must be an integer from 1 to 10 (got 11)", id="batch-size"),
        pytest.param({}, {"metrics_interval": "0"},
                     "--metrics-interval: metrics.interval: must be an integer from 1 to 86400 (got 0)",
                     id="metrics-interval"),
        pytest.param({}, {"status": "nine"},
                     '--status: status.listen: must be HOST:PORT or PORT (got "nine")', id="status"),
        pytest.param({}, {"name": "my app"},
                     '--name: name: must be letters, digits and . - _ / # (CloudWatch namespace) (got "my app")',
                     id="name"),
        pytest.param({}, {"log_format": "xml"},
                     '--log-format: log_format: must be one of text, json (got "xml")', id="log-format"),
        pytest.param({}, {"log_level": "LOUD"},
                     '--log-level: log_level: must be one of DEBUG, INFO, WARNING, ERROR (got "LOUD")', id="log-level"),
        pytest.param({}, {"max_messages": "0"},
                     "--max-messages: max_messages: must be an integer >= 1 (got 0)", id="max-messages"),
        pytest.param({"WORKERLESS_DRAIN": "maybe"}, {},
                     'WORKERLESS_DRAIN: drain: must be true or false (got "maybe")', id="env-drain"),
        pytest.param({}, {"shutdown_timeout": "-1"},
                     "--shutdown-timeout: shutdown_timeout: must be an integer from 0 to 3600 (got -1)",
                     id="shutdown-timeout"),
    ],
)
def test_option_errors_name_their_source(env: dict[str, str], flags: dict[str, Any], expected: str) -> None:
    assert error_line(None, env, {**HTTP_FLAGS, **flags}) == expected


@pytest.mark.parametrize(
    ("origin", "spec", "expected"),
    [
        pytest.param("flag", "payments:x", '--queues: queues[0].weight: must be an integer from 1 to 1000 (got "x")',
                     id="weight-not-number"),
        pytest.param("flag", "payments:0", "--queues: queues[0].weight: must be an integer from 1 to 1000 (got 0)",
                     id="weight-zero"),
        pytest.param("env", "a,b:2000", "WORKERLESS_QUEUES: queues[1].weight: must be an integer from 1 to 1000 "
                     "(got 2000)", id="env-weight"),
        pytest.param("flag", "a,,b", '--queues: queues: must be NAME[:WEIGHT],... with no empty names (got "a,,b")',
                     id="empty-name"),
        pytest.param("flag", ":3", '--queues: queues: must be NAME[:WEIGHT],... with no empty names (got ":3")',
                     id="weight-without-name"),
        pytest.param("flag", "pay ments", '--queues: queues[0].name: must be 1-80 letters, digits, - or _ '
                     '(plus .fifo) (got "pay ments")', id="bad-name"),
        pytest.param("flag", "a,a", '--queues: queues[1].name: duplicate queue (got "a")', id="duplicate"),
    ],
)
def test_queue_spec_errors_name_their_source(origin: str, spec: str, expected: str) -> None:
    env = {"WORKERLESS_QUEUES": spec} if origin == "env" else {}
    flags = {"http": "http://127.0.0.1:8080/"} if origin == "env" else {**HTTP_FLAGS, "queues": spec}
    assert error_line(None, env, flags) == expected


def test_queue_spec_without_a_target() -> None:
    assert error_line(None, {}, {"queues": "payments"}) == (
        '--queues: queues[0].target: has no target: define [targets.default] or pass --http=URL '
        'or --function=NAME (got "default")')


def test_target_flag_errors_name_the_flag() -> None:
    assert error_line(None, {}, {"queues": "payments", "http": "ftp://example.com/"}) == (
        '--http: targets.default.url: must be an http:// or https:// URL with a host (got "ftp://example.com/")')
    assert error_line(None, {}, {"queues": "payments", "function": ""}) == (
        '--function: targets.default.function: must be a non-empty string (got "")')


def test_file_errors_still_name_the_file_when_flags_are_given(tmp_path: Path) -> None:
    path = write_config(tmp_path, config_text(queue="weight = 0\n"))
    assert error_line(path, {"WORKERLESS_CONCURRENCY": "3"}, {"poll_for": "5"}) == (
        f"{path}: queues[0].weight: must be an integer from 1 to 1000 (got 0)")


@pytest.mark.parametrize(
    ("top", "env", "flags", "expected"),
    [
        pytest.param("polling = 5\n", {}, {"poll_for": "3"}, "{path}: polling: must be a table (got 5)",
                     id="poll-for-flag"),
        pytest.param("polling = 5\n", {"WORKERLESS_QUEUES": "a,b"}, {}, "{path}: polling: must be a table (got 5)",
                     id="queues-env"),
        pytest.param("targets = 5\n", {}, {"http": "http://127.0.0.1:8080/"}, "{path}: targets: must be a table (got 5)",
                     id="http-flag"),
    ],
)
def test_option_over_a_non_table_gives_a_config_error(
    tmp_path: Path, top: str, env: dict[str, str], flags: dict[str, Any], expected: str
) -> None:
    text = f"{top}[[queues]]\nname = \"payments\"\n"
    path = write_config(tmp_path, text)
    assert error_line(path, env, flags) == expected.replace("{path}", path)


@pytest.mark.parametrize(
    ("spec", "expected"),
    [
        pytest.param("a", [{"name": "a"}], id="name"),
        pytest.param("a:3", [{"name": "a", "weight": 3}], id="weight"),
        pytest.param("a:x", [{"name": "a", "weight": "x"}], id="weight-left-for-validation"),
        pytest.param("http://h:4566/0/q", [{"url": "http://h:4566/0/q"}], id="url-with-port"),
        pytest.param("http://h:4566/0/q:2", [{"url": "http://h:4566/0/q", "weight": 2}], id="url-with-weight"),
    ],
)
def test_parse_queue_spec(spec: str, expected: list[dict[str, object]]) -> None:
    assert parse_queue_spec(spec, "--queues") == expected


@pytest.mark.parametrize(
    ("weights", "strategy"),
    [([None, None], "priority"), ([3, 3], "random"), ([3, 1], "weighted"), ([None, 2], "weighted"), ([5], "random")],
)
def test_strategy_for_spec(weights: list[int | None], strategy: str) -> None:
    queues: list[dict[str, object]] = [{"name": f"q{i}"} if weight is None else {"name": f"q{i}", "weight": weight}
                                       for i, weight in enumerate(weights)]
    assert strategy_for_spec(queues) == strategy


@pytest.mark.parametrize(
    ("value", "kind", "expected"),
    [("5", int, 5), ("x", int, "x"), ("0.5", float, 0.5), ("x", float, "x"), ("yes", bool, True),
     ("off", bool, "off"), ("name", str, "name"), (7, int, 7), (True, bool, True)],
)
def test_coerce(value: object, kind: type, expected: object) -> None:
    assert coerce(value, kind) == expected
    assert type(coerce(value, kind)) is type(expected)


def test_a_bare_status_port_listens_on_loopback(tmp_path: Path) -> None:
    config = load_config(None, {}, {"queues": "payments", "http": "http://127.0.0.1:8080/", "status": "9100"})
    assert config.status_listen == "127.0.0.1:9100"
