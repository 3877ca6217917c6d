"""The interop keys: https targets, headers with ${VAR} from the environment, sns, large_payloads."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support import write_config
from tests.unit.bad_configs import QUEUE, config_text
from workerless_gevent.config.loading import load_config
from workerless_gevent.config.model import HttpTargetConfig
from workerless_gevent.errors import ConfigError

HTTPS_TARGET = '[targets.default]\ntype = "http"\nurl = "https://app.internal/jobs"\n'


def load(tmp_path: Path, text: str, env: dict[str, str] | None = None) -> HttpTargetConfig:
    target = load_config(str(write_config(tmp_path, text)), env or {}, {}).targets["default"]
    assert isinstance(target, HttpTargetConfig)
    return target


def test_https_target_with_headers_from_the_environment(tmp_path: Path) -> None:
    text = QUEUE + HTTPS_TARGET + 'headers = { Authorization = "Bearer ${APP_TOKEN}", X-Tenant = "${A}-${B_2}-$x" }\n'
    target = load(tmp_path, text, {"APP_TOKEN": "t0k3n", "A": "one", "B_2": "two"})
    assert target.url == "https://app.internal/jobs"
    assert target.headers == {"Authorization": "Bearer t0k3n", "X-Tenant": "one-two-$x"}
    assert "t0k3n" not in repr(target)


def test_no_headers_by_default(tmp_path: Path) -> None:
    assert load(tmp_path, config_text()).headers == {}


@pytest.mark.parametrize("env", [{}, {"APP_TOKEN": ""}], ids=["unset", "empty"])
def test_a_missing_variable_is_one_line_naming_the_header(tmp_path: Path, env: dict[str, str]) -> None:
    path = write_config(tmp_path, config_text(target='headers = { Authorization = "Bearer ${APP_TOKEN}" }\n'))
    with pytest.raises(ConfigError) as caught:
        load_config(str(path), env, {})
    assert caught.value.line() == (f"{path}: targets.default.headers.Authorization: uses ${{APP_TOKEN}}, which is "
                                   "not set or empty in the environment")


@pytest.mark.parametrize("value", ["line\nbreak", "café", " padded", "tab\there\x00"])
def test_a_value_a_header_cannot_carry_is_refused_without_showing_it(tmp_path: Path, value: str) -> None:
    path = write_config(tmp_path, config_text(target='headers = { X-Token = "${SECRET}" }\n'))
    with pytest.raises(ConfigError) as caught:
        load_config(str(path), {"SECRET": value}, {})
    assert caught.value.line() == (f"{path}: targets.default.headers.X-Token: must be printable ASCII without leading "
                                   "or trailing spaces once ${VAR}s are filled in (value not shown)")
    assert value not in caught.value.line()


def test_queue_interop_keys(tmp_path: Path) -> None:
    text = config_text(queue='sns = "unwrap"\nlarge_payloads = true\ndelete_payloads = true\n')
    queue = load_config(str(write_config(tmp_path, text)), {}, {}).queues[0]
    assert (queue.sns, queue.large_payloads, queue.delete_payloads) == ("unwrap", True, True)
    default = load_config(str(write_config(tmp_path, config_text())), {}, {}).queues[0]
    assert (default.sns, default.large_payloads, default.delete_payloads) == ("raw", False, False)
