"""Every config rule, with the exact one-line error it prints (config/model.py, config/schema.py, config/loading.py)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.unit.bad_configs import (
    BAD_CONFIGS,
    KNOWN_BUGS,
    QUEUE,
    TARGET,
    config_text,
    expected_line_for,
)
from tests.unit.config_files import error_line, write_config
from workerless_gevent.config.model import HttpTargetConfig, LambdaTargetConfig, PollingConfig, QueueConfig
from workerless_gevent.errors import ConfigError, format_value
from workerless_gevent.config.loading import load_config


def bad_config_params() -> list[Any]:
    params = []
    for case_id, text, expected in BAD_CONFIGS:
        marks = [pytest.mark.xfail(reason=KNOWN_BUGS[case_id], strict=True)] if case_id in KNOWN_BUGS else []
        params.append(pytest.param(text, expected, id=case_id, marks=marks))
    return params


def test_bad_config_ids_are_unique_and_bugs_are_listed() -> None:
    ids = [case_id for case_id, _, _ in BAD_CONFIGS]
    assert len(ids) == len(set(ids))
    assert set(KNOWN_BUGS) <= set(ids)
    assert all(expected.startswith("{path}: ") for _, _, expected in BAD_CONFIGS)


@pytest.mark.parametrize(("text", "expected"), bad_config_params())
def test_bad_config_gives_one_exact_line(tmp_path: Path, text: str, expected: str) -> None:
    path = write_config(tmp_path, text)
    line = error_line(path)
    assert line == expected_line_for(expected, path)
    assert "\n" not in line


def test_config_error_message_is_its_line() -> None:
    error = ConfigError("conf/prod.toml", "queues[1].weight", "must be an integer from 1 to 1000", "5")
    assert error.line() == 'conf/prod.toml: queues[1].weight: must be an integer from 1 to 1000 (got "5")'
    assert str(error) == error.line()
    assert ConfigError("f.toml", "", "config file not found").line() == "f.toml: config file not found"
    assert ConfigError("f.toml", "x", "is required").line() == "f.toml: x: is required"


@pytest.mark.parametrize(
    ("value", "shown"),
    [
        pytest.param("5", '"5"', id="string"),
        pytest.param('say "hi"', '"say \\"hi\\""', id="quotes"),
        pytest.param(True, "true", id="true"),
        pytest.param(False, "false", id="false"),
        pytest.param(5, "5", id="int"),
        pytest.param(5.5, "5.5", id="float"),
        pytest.param({"a": 1}, "a table", id="table"),
        pytest.param([1], "a list", id="list"),
    ],
)
def test_format_value_spells_values_as_toml(value: object, shown: str) -> None:
    assert format_value(value) == shown


@pytest.mark.parametrize(
    ("value", "shown"),
    [
        pytest.param("a\nb", '"a\\nb"', id="newline"),
        pytest.param("C:\\dir", '"C:\\\\dir"', id="backslash"),
    ],
)
def test_format_value_escapes_like_toml(value: str, shown: str) -> None:
    assert format_value(value) == shown


def test_missing_file(tmp_path: Path) -> None:
    path = tmp_path / "absent.toml"
    assert error_line(path) == f"{path}: config file not found"


def test_directory_is_not_a_config_file(tmp_path: Path) -> None:
    assert error_line(tmp_path) == f"{tmp_path}: cannot read config file: Is a directory"


def test_missing_file_named_by_environment(tmp_path: Path) -> None:
    path = tmp_path / "absent.toml"
    assert error_line(None, env={"WORKERLESS_CONFIG": str(path)}) == f"{path}: config file not found"


def test_no_file_and_no_queues_names_the_command_line() -> None:
    assert error_line(None) == "command line: queues: at least one queue is required (a [[queues]] table or --queues)"


def test_minimal_config_gets_every_default(tmp_path: Path) -> None:
    path = write_config(tmp_path, config_text())
    config = load_config(str(path), {}, {})
    assert config.source == str(path)
    assert (config.name, config.concurrency, config.shutdown_timeout) == (None, 50, 25)
    assert (config.log_format, config.log_level, config.drain, config.max_messages) == ("text", "INFO", False, None)
    assert (config.metrics_interval, config.status_listen) == (60, None)
    assert config.polling == PollingConfig(strategy="priority", poll_for=10, sleep=0.0, batch_size=10)
    assert config.queues == (QueueConfig(name="payments"),)
    queue = config.queues[0]
    assert (queue.weight, queue.target, queue.visibility_timeout, queue.error_visibility_timeout) == (1, "default", 300, 2)
    assert (queue.backoff, queue.max_retries, queue.dead_letter_queue, queue.retention_period) == (
        "constant", 10, None, 345600)
    assert config.targets == {"default": HttpTargetConfig(name="default", url="http://127.0.0.1:8080/")}


FULL_CONFIG = """
name = "my-app-production"
concurrency = 40
shutdown_timeout = 20
log_format = "json"
log_level = "DEBUG"
drain = true
max_messages = 500

[polling]
strategy = "weighted"
poll_for = 20
sleep = 1.5
batch_size = 5

[[queues]]
name = "payments"
weight = 3
target = "billing"
visibility_timeout = 600
error_visibility_timeout = 5
backoff = "exponential"
max_retries = 7
dead_letter_queue = "payments-dlq"
retention_period = 60

[[queues]]
url = "https://sqs.us-east-1.amazonaws.com/123456789012/submissions.fifo"
weight = 1000

[targets.default]
type = "http"
url = "http://127.0.0.1:8080/jobs"
content_type = "text/plain"
connect_timeout = 60
inactivity_timeout = 1800
max_connections = 10000
ready_path = "/health?deep=1"

[targets.billing]
type = "lambda"
function = "billing-fn"
qualifier = "live"
batch_size = 1
timeout = 900

[metrics]
interval = 86400

[status]
listen = "127.0.0.1:9100"

[aws]
region = "eu-west-1"
endpoint_url = "http://127.0.0.1:4566"
profile = "ops"
"""


def test_every_key_at_its_limits_loads(tmp_path: Path) -> None:
    config = load_config(str(write_config(tmp_path, FULL_CONFIG)), {}, {})
    assert (config.name, config.concurrency, config.shutdown_timeout) == ("my-app-production", 40, 20)
    assert (config.log_format, config.log_level, config.drain, config.max_messages) == ("json", "DEBUG", True, 500)
    assert config.polling == PollingConfig(strategy="weighted", poll_for=20, sleep=1.5, batch_size=5)
    assert config.queues == (
        QueueConfig(name="payments", weight=3, target="billing", visibility_timeout=600, error_visibility_timeout=5,
                    backoff="exponential", max_retries=7, dead_letter_queue="payments-dlq", retention_period=60),
        QueueConfig(name="submissions.fifo", url="https://sqs.us-east-1.amazonaws.com/123456789012/submissions.fifo",
                    weight=1000),
    )
    assert [queue.is_fifo for queue in config.queues] == [False, True]
    assert config.targets == {
        "default": HttpTargetConfig(name="default", url="http://127.0.0.1:8080/jobs", content_type="text/plain",
                                    connect_timeout=60, inactivity_timeout=1800, max_connections=10000,
                                    ready_path="/health?deep=1"),
        "billing": LambdaTargetConfig(name="billing", function="billing-fn", qualifier="live", batch_size=1,
                                      timeout=900),
    }
    assert (config.metrics_interval, config.status_listen) == (86400, "127.0.0.1:9100")
    assert (config.aws.region, config.aws.endpoint_url, config.aws.profile) == (
        "eu-west-1", "http://127.0.0.1:4566", "ops")


@pytest.mark.parametrize(
    "queue_name",
    [
        pytest.param("a", id="one-character"),
        pytest.param("q" * 80, id="80-characters"),
        pytest.param("Pay_ments-2", id="letters-digits-dash-underscore"),
        pytest.param("f" * 75 + ".fifo", id="fifo-80-characters-with-suffix"),
    ],
)
def test_valid_queue_names(tmp_path: Path, queue_name: str) -> None:
    text = f'[[queues]]\nname = "{queue_name}"\n\n{TARGET}'
    assert load_config(str(write_config(tmp_path, text)), {}, {}).queues[0].name == queue_name


@pytest.mark.parametrize(
    ("polling", "expected"),
    [
        pytest.param("poll_for = 1\nbatch_size = 1\nsleep = 0", (1, 1, 0.0), id="low"),
        pytest.param("poll_for = 20\nbatch_size = 10\nsleep = 3600", (20, 10, 3600.0), id="high"),
        pytest.param("sleep = 0.25", (10, 10, 0.25), id="fractional-sleep"),
    ],
)
def test_polling_limits_are_inclusive(tmp_path: Path, polling: str, expected: tuple[int, int, float]) -> None:
    config = load_config(str(write_config(tmp_path, config_text(tables=f"[polling]\n{polling}\n"))), {}, {})
    assert (config.polling.poll_for, config.polling.batch_size, config.polling.sleep) == expected


@pytest.mark.parametrize("strategy", ["priority", "weighted", "random", "round-robin"])
def test_every_strategy_is_accepted(tmp_path: Path, strategy: str) -> None:
    text = config_text(tables=f'[polling]\nstrategy = "{strategy}"\n')
    assert load_config(str(write_config(tmp_path, text)), {}, {}).polling.strategy == strategy


def test_dead_letter_queue_may_be_unpolled_and_shared(tmp_path: Path) -> None:
    text = (f'{QUEUE}dead_letter_queue = "shared-dlq"\n\n[[queues]]\nname = "submissions"\n'
            f'dead_letter_queue = "shared-dlq"\n\n{TARGET}')
    config = load_config(str(write_config(tmp_path, text)), {}, {})
    assert [queue.dead_letter_queue for queue in config.queues] == ["shared-dlq", "shared-dlq"]


def test_unused_target_is_allowed(tmp_path: Path) -> None:
    text = config_text(tables='[targets.spare]\ntype = "lambda"\nfunction = "spare-fn"\n')
    assert set(load_config(str(write_config(tmp_path, text)), {}, {}).targets) == {"default", "spare"}


def test_first_unknown_key_in_sorted_order_is_reported(tmp_path: Path) -> None:
    path = write_config(tmp_path, config_text(top="zeta = 1\nalpha = 2\n"))
    assert error_line(path) == f"{path}: alpha: unknown key"


def test_config_is_frozen(tmp_path: Path) -> None:
    config = load_config(str(write_config(tmp_path, config_text())), {}, {})
    with pytest.raises(AttributeError):
        config.concurrency = 1  # type: ignore[misc]


def test_validate_payload_is_off_by_default_and_read_when_written(tmp_path: Path) -> None:
    keyed = config_text(queue='idempotency_key = "body:order.id"\n')
    config = load_config(str(write_config(tmp_path, keyed)), {}, {})
    assert config.idempotency is not None and config.idempotency.validate_payload is False
    text = config_text(queue='idempotency_key = "body:order.id"\n', tables="[idempotency]\nvalidate_payload = true\n")
    config = load_config(str(write_config(tmp_path, text)), {}, {})
    assert config.idempotency is not None and config.idempotency.validate_payload is True
