"""Every bad configuration through the real CLI: exit 2, one exact line, no AWS request at all."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.support import REPO_ROOT, CountingProxy
from tests.unit.bad_configs import BAD_CONFIGS, KNOWN_BUGS, expected_line_for

WORKERLESS = REPO_ROOT / "bin" / "workerless"


def start_cli(args: list[str], env: dict[str, str], cwd: Path) -> subprocess.Popen[bytes]:
    return subprocess.Popen([sys.executable, str(WORKERLESS), *args], env=env, cwd=str(cwd),
                            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE)


def finish(proc: subprocess.Popen[bytes]) -> tuple[int, str, str]:
    try:
        out, err = proc.communicate(timeout=60)
    except subprocess.TimeoutExpired:
        proc.kill()
        out, err = proc.communicate()
        raise AssertionError(f"workerless {proc.args!r} did not exit on a bad config: {err!r}") from None
    return proc.returncode, out.decode("utf-8", "replace"), err.decode("utf-8", "replace")


def run_both(args: list[str], env: dict[str, str], cwd: Path) -> dict[str, tuple[int, str, str]]:
    """The daemon and `check` with the same arguments, side by side to halve the wait."""
    procs = {"run": start_cli(args, env, cwd), "check": start_cli(["check", *args], env, cwd)}
    return {mode: finish(proc) for mode, proc in procs.items()}


def case_params() -> list[Any]:
    params: list[Any] = []
    for case_id, text, expected in BAD_CONFIGS:
        marks = [pytest.mark.xfail(reason=KNOWN_BUGS[case_id], strict=True)] if case_id in KNOWN_BUGS else []
        params.append(pytest.param(text, expected, id=case_id, marks=marks))
    return params


@pytest.mark.parametrize(("toml_text", "expected"), case_params())
def test_bad_config_exits_2_with_one_line_and_no_aws_request(
    toml_text: str, expected: str, tmp_path: Path,
    proxied_env: dict[str, str], counting_proxy: CountingProxy,
) -> None:
    path = tmp_path / "workerless.toml"
    path.write_text(toml_text, encoding="utf-8")
    line = expected_line_for(expected, path)
    for mode, (code, out, err) in run_both(["-c", str(path)], proxied_env, tmp_path).items():
        assert (mode, code, err.splitlines()) == (mode, 2, [line]), err
        assert out == "", (mode, out)
    assert counting_proxy.requests == []


FLAG_CASES = [
    pytest.param(["--queues=a", "--http=http://127.0.0.1:9/", "--concurrency=abc"], {},
                 '--concurrency: concurrency: must be an integer from 1 to 10000 (got "abc")',
                 id="concurrency-not-a-number"),
    pytest.param(["--queues=a", "--http=http://127.0.0.1:9/", "--poll-for=0"], {},
                 "--poll-for: polling.poll_for: must be an integer from 1 to 20 (got 0)", id="poll-for-zero"),
    pytest.param(["--queues=a:0", "--http=http://127.0.0.1:9/"], {},
                 "--queues: queues[0].weight: must be an integer from 1 to 1000 (got 0)", id="weight-zero"),
    pytest.param(["--queues=a,,b", "--http=http://127.0.0.1:9/"], {},
                 '--queues: queues: must be NAME[:WEIGHT],... with no empty names (got "a,,b")',
                 id="queues-empty-name"),
    pytest.param(["--queues=a", "--http=http://127.0.0.1:9/", "--strategy=fastest"], {},
                 '--strategy: polling.strategy: must be one of priority, weighted, random, round-robin '
                 '(got "fastest")', id="strategy-unknown"),
    pytest.param(["--queues=a", "--http=http://127.0.0.1:9/"], {"WORKERLESS_CONCURRENCY": "abc"},
                 'WORKERLESS_CONCURRENCY: concurrency: must be an integer from 1 to 10000 (got "abc")',
                 id="env-concurrency-not-a-number"),
    pytest.param(["--queues=a"], {},
                 '--queues: queues[0].target: has no target: define [targets.default] or pass --http=URL '
                 'or --function=NAME (got "default")', id="queues-without-target"),
]


@pytest.mark.parametrize(("args", "extra_env", "expected"), FLAG_CASES)
def test_bad_flag_or_env_value_exits_2_with_one_line_and_no_aws_request(
    args: list[str], extra_env: dict[str, str], expected: str, tmp_path: Path,
    proxied_env: dict[str, str], counting_proxy: CountingProxy,
) -> None:
    for mode, (code, out, err) in run_both(args, {**proxied_env, **extra_env}, tmp_path).items():
        assert (mode, code, err.splitlines()) == (mode, 2, [expected]), err
        assert out == "", (mode, out)
    assert counting_proxy.requests == []


def test_missing_config_file_exits_2(tmp_path: Path, proxied_env: dict[str, str],
                                     counting_proxy: CountingProxy) -> None:
    missing = tmp_path / "nope.toml"
    for mode, (code, _, err) in run_both(["-c", str(missing)], proxied_env, tmp_path).items():
        assert (mode, code, err.splitlines()) == (mode, 2, [f"{missing}: config file not found"])
    assert counting_proxy.requests == []


def test_unknown_flag_is_a_usage_error(tmp_path: Path, proxied_env: dict[str, str],
                                       counting_proxy: CountingProxy) -> None:
    for mode, (code, _, err) in run_both(["--queues=a", "--bogus"], proxied_env, tmp_path).items():
        assert code == 2, (mode, err)
        assert "Traceback" not in err and "usage" in err.lower(), (mode, err)
    assert counting_proxy.requests == []
