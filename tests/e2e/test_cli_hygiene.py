"""The real CLI on awkward input: where the region comes from, non-UTF-8 files, conflicting targets,
usage errors, and `workerless demo` on SIGHUP. Every refusal is one exact line and exit 2."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import boto3
import botocore.exceptions
import pytest

from tests.support import REPO_ROOT, CountingProxy, Daemon, HttpApp, RecordedRequest, wait_until, write_config
from tests.support.moto import CREDENTIALS

WORKERLESS = REPO_ROOT / "bin" / "workerless"
NO_REGION = "workerless: no AWS region: set [aws] region, AWS_REGION or AWS_DEFAULT_REGION (or run on EC2/ECS)"
TARGET = "http://127.0.0.1:9/"


def cli(args: list[str], env: dict[str, str], cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, str(WORKERLESS), *args], env=env, cwd=cwd, capture_output=True,
                          text=True, timeout=60, stdin=subprocess.DEVNULL)


def without_region(env: dict[str, str], tmp_path: Path) -> dict[str, str]:
    """`env` with no region anywhere: no variables, a profile file without one, no metadata service."""
    config = tmp_path / "aws-config"
    config.write_text("[default]\noutput = json\n")
    dropped = ("AWS_REGION", "AWS_DEFAULT_REGION", "AWS_PROFILE", "AWS_DEFAULT_PROFILE",
               "ECS_CONTAINER_METADATA_URI_V4", "ECS_CONTAINER_METADATA_URI")
    return {**{k: v for k, v in env.items() if k not in dropped}, "AWS_CONFIG_FILE": str(config),
            "AWS_EC2_METADATA_DISABLED": "true"}


# ------------------------------------------------------------------------------------------ region


@pytest.mark.parametrize("args", [
    pytest.param(["--queues=jobs", f"--http={TARGET}"], id="run"),
    pytest.param(["check", "--queues=jobs", f"--http={TARGET}"], id="check"),
    pytest.param(["check", "--online", "--queues=jobs", f"--http={TARGET}"], id="check-online"),
    pytest.param(["send", "jobs", "hello"], id="send"),
])
def test_without_a_region_every_command_exits_2_with_one_line(
    args: list[str], proxied_env: dict[str, str], counting_proxy: CountingProxy, tmp_path: Path,
) -> None:
    done = cli(args, without_region(proxied_env, tmp_path), tmp_path)
    assert (done.returncode, done.stderr.splitlines(), done.stdout) == (2, [NO_REGION], "")
    assert counting_proxy.requests == []  # never a silent us-east-1


def region_cases(tmp_path: Path) -> Iterator[tuple[list[str], dict[str, str], str, str]]:
    """(args, extra env, expected region, expected source) from each rung of the chain."""
    profiles = tmp_path / "profiles"
    profiles.write_text("[default]\nregion = ap-south-1\n\n[profile other]\nregion = sa-east-1\n")
    config = write_config(tmp_path, f'[[queues]]\nname = "jobs"\n\n[targets.default]\ntype = "http"\n'
                                    f'url = "{TARGET}"\n\n[aws]\nregion = "eu-central-1"\n')
    flags = ["--queues=jobs", f"--http={TARGET}"]
    everything = {"AWS_REGION": "eu-west-1", "AWS_DEFAULT_REGION": "us-west-2", "AWS_CONFIG_FILE": str(profiles)}
    yield ["-c", str(config)], everything, "eu-central-1", f"[aws] region in {config}"
    yield flags, everything, "eu-west-1", "AWS_REGION"
    yield flags, {**everything, "AWS_REGION": ""}, "us-west-2", "AWS_DEFAULT_REGION"
    yield flags, {"AWS_CONFIG_FILE": str(profiles)}, "ap-south-1", "profile default"
    yield flags, {"AWS_CONFIG_FILE": str(profiles), "AWS_PROFILE": "other"}, "sa-east-1", "profile other"


def test_check_says_which_region_and_where_it_came_from(aws_env: dict[str, str], tmp_path: Path) -> None:
    for args, extra, region, source in region_cases(tmp_path):
        done = cli(["check", *args], {**without_region(aws_env, tmp_path), **extra}, tmp_path)
        assert done.returncode == 0, (source, done.stderr)
        assert done.stderr.splitlines()[0] == f"region: {region} (from {source})"
        assert json.loads(done.stdout)["aws"]["region"] == region


def test_a_bad_region_or_profile_is_one_line(aws_env: dict[str, str], tmp_path: Path) -> None:
    cases = [
        ({"AWS_REGION": "eu west 1"}, 'AWS_REGION: must be an AWS region name such as eu-west-1 (got "eu west 1")'),
        ({"AWS_PROFILE": "nope"}, 'AWS_PROFILE: names a profile that is not in the AWS config files (got "nope")'),
    ]
    for extra, line in cases:
        done = cli(["check", "--queues=jobs", f"--http={TARGET}"], {**without_region(aws_env, tmp_path), **extra},
                   tmp_path)
        assert (done.returncode, done.stderr.splitlines(), done.stdout) == (2, [line], "")


def metadata_reply(request: RecordedRequest) -> tuple[int, dict[str, str], bytes]:
    """An ECS task metadata endpoint and an EC2 IMDSv2 endpoint, both on one local server."""
    if request.path == "/v4/task-1/task":
        return 200, {"Content-Type": "application/json"}, json.dumps({
            "TaskARN": "arn:aws:ecs:ap-southeast-2:111122223333:task/default/0123456789abcdef",
            "AvailabilityZone": "ap-southeast-2b"}).encode()
    if request.method == "PUT" and request.path == "/latest/api/token":
        return 200, {}, b"token-1"
    if request.path == "/latest/meta-data/placement/availability-zone/":
        return 200, {}, b"eu-north-1c"
    return 404, {}, b""


def test_region_from_ecs_then_ec2_metadata_only_when_nothing_local_has_one(
    aws_env: dict[str, str], http_app: HttpApp, tmp_path: Path,
) -> None:
    http_app.respond = metadata_reply
    bare = without_region(aws_env, tmp_path)
    ecs = {"ECS_CONTAINER_METADATA_URI_V4": f"{http_app.url}/v4/task-1"}
    ec2 = {k: v for k, v in bare.items() if k != "AWS_EC2_METADATA_DISABLED"}
    ec2["AWS_EC2_METADATA_SERVICE_ENDPOINT"] = f"{http_app.url}/"
    args = ["check", "--queues=jobs", f"--http={TARGET}"]
    done = cli(args, {**bare, **ecs}, tmp_path)
    assert done.stderr.splitlines()[0] == "region: ap-southeast-2 (from ECS task metadata)", done.stderr
    done = cli(args, ec2, tmp_path)
    assert done.stderr.splitlines()[0] == "region: eu-north-1 (from EC2 instance metadata)", done.stderr
    assert [(request.method, request.path) for request in http_app.requests] == [
        ("GET", "/v4/task-1/task"), ("PUT", "/latest/api/token"),
        ("GET", "/latest/meta-data/placement/availability-zone/")]
    assert http_app.requests[2].headers["x-aws-ec2-metadata-token"] == "token-1"
    asked = len(http_app.requests)
    done = cli(args, {**ec2, **ecs, "AWS_REGION": "eu-west-1"}, tmp_path)
    assert done.stderr.splitlines()[0] == "region: eu-west-1 (from AWS_REGION)", done.stderr
    assert len(http_app.requests) == asked  # a local source asks no metadata service


@pytest.fixture
def eu_queue(moto_endpoint: str) -> Iterator[tuple[Any, str]]:
    """A queue created in eu-west-1 on moto, and an SQS client of that region."""
    sqs = boto3.client("sqs", endpoint_url=moto_endpoint, region_name="eu-west-1", **CREDENTIALS)
    name = f"eu-{uuid.uuid4().hex[:12]}"
    url = sqs.create_queue(QueueName=name)["QueueUrl"]
    yield sqs, name
    sqs.delete_queue(QueueUrl=url)


def test_send_and_the_daemon_use_aws_region_alone(
    eu_queue: tuple[Any, str], sqs: Any, aws_env: dict[str, str], http_app: HttpApp,
    daemon: Callable[..., Daemon], tmp_path: Path,
) -> None:
    eu_sqs, name = eu_queue
    with pytest.raises(botocore.exceptions.ClientError):
        sqs.get_queue_url(QueueName=name)  # us-east-1 does not see it: only the right region works
    env = {**without_region(aws_env, tmp_path), "AWS_REGION": "eu-west-1"}
    done = cli(["send", name, "hello from eu-west-1"], env, tmp_path)
    assert done.returncode == 0, done.stderr
    proc = daemon([f"--queues={name}", f"--http={http_app.url}/", "--max-messages=1", "--concurrency=1"], env=env)
    assert proc.wait_exit(timeout=60) == 0
    assert [request.body for request in http_app.requests] == [b"hello from eu-west-1"]
    assert "region: eu-west-1 (from AWS_REGION)" in proc.output()
    url = eu_sqs.get_queue_url(QueueName=name)["QueueUrl"]
    attributes = eu_sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["ApproximateNumberOfMessages"])
    assert attributes["Attributes"]["ApproximateNumberOfMessages"] == "0"


# ------------------------------------------------------------------------------- input hygiene


def run_and_check(args: list[str], env: dict[str, str], cwd: Path) -> dict[str, subprocess.CompletedProcess[str]]:
    return {"run": cli(args, env, cwd), "check": cli(["check", *args], env, cwd)}


@pytest.mark.parametrize(("data", "problem"), [
    pytest.param(b'concurrency = 5\n\nname = "caf\xe9"\n', "not UTF-8: byte 0xe9 at line 3, column 12",
                 id="latin-1"),
    pytest.param("concurrency = 5\n".encode("utf-16"), "not UTF-8: the file is UTF-16", id="utf-16"),
])
def test_a_config_file_that_is_not_utf8_is_one_line(
    data: bytes, problem: str, proxied_env: dict[str, str], counting_proxy: CountingProxy, tmp_path: Path,
) -> None:
    path = tmp_path / "workerless.toml"
    path.write_bytes(data)
    line = f"{path}: {problem} (TOML files must be UTF-8)"
    for mode, done in {**run_and_check(["-c", str(path)], proxied_env, tmp_path),
                       "send": cli(["send", "jobs", "x", "-c", str(path)], proxied_env, tmp_path)}.items():
        assert (mode, done.returncode, done.stderr.splitlines(), done.stdout) == (mode, 2, [line], "")
    assert counting_proxy.requests == []


CONFLICTS = [
    pytest.param(["--queues=a", f"--http={TARGET}", "--function=f"], {},
                 "--http: targets.default: conflicts with --function: give one target, HTTP or Lambda", id="flags"),
    pytest.param(["--queues=a"], {"WORKERLESS_HTTP": TARGET, "WORKERLESS_FUNCTION": "f"},
                 "WORKERLESS_HTTP: targets.default: conflicts with WORKERLESS_FUNCTION: give one target, HTTP or "
                 "Lambda", id="variables"),
]


@pytest.mark.parametrize(("args", "extra_env", "line"), CONFLICTS)
def test_an_http_and_a_lambda_target_at_one_level_conflict(
    args: list[str], extra_env: dict[str, str], line: str, proxied_env: dict[str, str],
    counting_proxy: CountingProxy, tmp_path: Path,
) -> None:
    for mode, done in run_and_check(args, {**proxied_env, **extra_env}, tmp_path).items():
        assert (mode, done.returncode, done.stderr.splitlines(), done.stdout) == (mode, 2, [line], "")
    assert counting_proxy.requests == []


def test_a_target_flag_replaces_a_target_variable_of_the_other_kind(aws_env: dict[str, str], tmp_path: Path) -> None:
    done = cli(["check", "--queues=a", "--function=f"], {**aws_env, "WORKERLESS_HTTP": TARGET}, tmp_path)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["targets"]["default"]["function"] == "f"
    done = cli(["check", "--queues=a", f"--http={TARGET}"], {**aws_env, "WORKERLESS_FUNCTION": "f"}, tmp_path)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["targets"]["default"]["url"] == TARGET



@pytest.mark.parametrize(("args", "given"), [(["--config="], '""'), (["-c", ""], '""'), (["-c", " "], '" "')],
                         ids=["--config=", "-c ''", "-c ' '"])
def test_an_empty_config_file_name_is_one_line_not_a_run_without_a_file(
    args: list[str], given: str, proxied_env: dict[str, str], counting_proxy: CountingProxy, tmp_path: Path,
) -> None:
    line = f"--config: needs a file name (got {given})"
    for mode, done in run_and_check(args, proxied_env, tmp_path).items():
        assert (mode, done.returncode, done.stderr.splitlines(), done.stdout) == (mode, 2, [line], "")
    assert counting_proxy.requests == []


USAGE_ERRORS = [
    (["--queues=a", "--bogus-flag"], "unknown option --bogus-flag"),
    (["-x"], "unknown option -x"),
    (["--queues=a", "--concurrency"], "option --concurrency needs a value"),
    (["check", "-c"], "option -c needs a value"),
    (["--drain=yes"], "option --drain takes no value"),
    (["--con=3"], "ambiguous option --con: --config or --concurrency"),
    (["--concurrency=1", "--concurrency=2"], "option --concurrency given more than once"),
    (["frobnicate"], "unknown command frobnicate: the commands are check, send, demo, stats and redrive"),
    (["check", "extra"], "unexpected argument extra"),
    (["send"], "send needs a QUEUE"),
    (["send", "q", "body", "more"], "unexpected argument more"),
    (["--online", "--queues=a"], "option --online is only for workerless check"),
    (["check", "--attr=k=v"], "option --attr is only for workerless send"),
    (["redrive"], "redrive needs a DLQ (the dead-letter queue to move messages from)"),
    (["redrive", "dlq", "extra"], "unexpected argument extra"),
    (["stats", "--to=q"], "option --to is only for workerless redrive"),
    (["redrive", "dlq", "--json"], "option --json is only for workerless stats"),
]


@pytest.mark.parametrize(("args", "problem"), [pytest.param(a, p, id=" ".join(a)) for a, p in USAGE_ERRORS])
def test_a_usage_error_is_one_readable_line(args: list[str], problem: str, proxied_env: dict[str, str],
                                            counting_proxy: CountingProxy, tmp_path: Path) -> None:
    done = cli(args, proxied_env, tmp_path)
    line = f"workerless: {problem} (see workerless --help for usage)"
    assert (done.returncode, done.stderr.splitlines(), done.stdout) == (2, [line], "")
    assert counting_proxy.requests == []


# ------------------------------------------------------------------------------------ demo


def running(pid: int, marker: str) -> bool:
    """Whether `pid` is alive (not a zombie) and its command line still contains `marker`."""
    try:
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, ProcessLookupError, IndexError):
        return False
    return marker in cmdline and state != "Z"


def pid_in(log: str, pattern: str) -> int:
    match = re.search(pattern, log)
    assert match, log
    return int(match.group(1))


def test_demo_stops_the_daemon_and_the_emulator_on_sighup(tmp_path: Path) -> None:
    env = {key: value for key, value in os.environ.items() if not key.startswith("AWS_")}
    demo = Daemon(["demo"], env, cwd=REPO_ROOT, log_path=tmp_path / "demo.log")
    children: dict[int, str] = {}
    try:
        log = demo.wait_for_output("workerless started", timeout=90)
        moto_pid, daemon_pid = pid_in(log, r"moto, pid (\d+)"), pid_in(log, r"daemon \(pid (\d+)\)")
        children = {moto_pid: "moto.server", daemon_pid: "workerless"}
        assert running(moto_pid, "moto.server") and running(daemon_pid, "workerless")
        demo.send_signal(signal.SIGHUP)  # the terminal of `./dev demo` closed
        assert demo.wait_exit(timeout=45) == 0
        assert "[demo] stopping" in demo.output() and "workerless stopped" in demo.output()
        wait_until(lambda: not running(moto_pid, "moto.server") and not running(daemon_pid, "workerless"),
                   timeout=5, message=lambda: f"moto {moto_pid} or daemon {daemon_pid} outlived the demo")
    finally:
        if demo.alive():
            demo.kill()
        for pid, marker in children.items():  # a failed run must not leave them behind either
            if running(pid, marker):
                os.kill(pid, signal.SIGKILL)
