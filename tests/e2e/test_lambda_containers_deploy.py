"""deploy/lambda-containers/: the compose file and the Kubernetes pod that run a Lambda function's image beside
workerless. Their configurations pass `workerless check`, the numbers that must agree do (the target's timeout
above the emulator's, stop timeouts above shutdown_timeout), the policy asks for no Lambda permission, and the
compose configuration delivers through the real daemon to the stand-in emulator."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import urllib.parse
from pathlib import Path
from typing import Any, Callable, Iterator

import pytest
import yaml

from tests.e2e.helpers import send_batch
from tests.e2e.test_deploy_kit import DEPLOY, check, yaml_documents
from tests.support import REPO_ROOT, Daemon, Queue, count_messages, wait_until
from tests.support.lambda_emulator import LambdaEmulator
from tests.support.lambda_handlers.sqs_batch import handler

KIT = DEPLOY / "lambda-containers"


def seconds(duration: str) -> int:
    match = re.fullmatch(r"(\d+)s", duration)
    assert match, duration
    return int(match.group(1))


def policy_actions(env: dict[str, str], config: Path) -> set[str]:
    """The actions of the policy `workerless check --iam` prints."""
    done = subprocess.run([sys.executable, str(REPO_ROOT / "bin" / "workerless"), "check", "--iam", "-c", str(config)],
                          env=env, capture_output=True, text=True, timeout=60, cwd=REPO_ROOT)
    assert done.returncode == 0, done.stderr
    return {action for item in json.loads(done.stdout)["Statement"] for action in item["Action"]}


def test_the_compose_file_and_its_configuration(aws_env: dict[str, str]) -> None:
    services = yaml.safe_load((KIT / "docker-compose.yaml").read_text())["services"]
    daemon, function = services["workerless"], services["orders-fn"]
    mounted = {volume.split(":")[1]: volume.split(":")[0] for volume in daemon["volumes"]}
    assert mounted[daemon["environment"]["WORKERLESS_CONFIG"]] == "./workerless.toml"
    effective = check(aws_env, "-c", str(KIT / "workerless.toml"))
    target = effective["targets"]["default"]
    endpoint = urllib.parse.urlsplit(target["endpoint_url"])
    assert (endpoint.hostname, endpoint.port) == ("orders-fn", 8080)  # the function's service, the emulator's port
    assert "orders-fn" in daemon["depends_on"]
    assert (target["function"], target["max_concurrency"]) == ("function", 1)
    assert target["timeout"] > int(function["environment"]["AWS_LAMBDA_FUNCTION_TIMEOUT"])
    assert seconds(daemon["stop_grace_period"]) >= effective["shutdown_timeout"] + 1
    assert not {action for action in policy_actions(aws_env, KIT / "workerless.toml") if action.startswith("lambda:")}


def test_the_kubernetes_pod_and_its_configuration(aws_env: dict[str, str], tmp_path: Path) -> None:
    manifest = yaml_documents(KIT / "kubernetes.yaml")
    config_map, deployment = manifest["ConfigMap"], manifest["Deployment"]
    pod = deployment["spec"]["template"]["spec"]
    containers = {container["name"]: container for container in pod["containers"]}
    sidecar, function = containers["workerless"], containers["function"]
    env = {item["name"]: item["value"] for item in sidecar["env"]}
    mount = sidecar["volumeMounts"][0]
    (key, toml_text), = config_map["data"].items()
    assert env.pop("WORKERLESS_CONFIG") == f"{mount['mountPath']}/{key}"
    config = tmp_path / key
    config.write_text(toml_text)
    effective = check({**aws_env, **env}, "-c", str(config))
    target = effective["targets"]["default"]
    assert target["endpoint_url"] == "http://127.0.0.1:8080"  # the function's container, in the same pod
    function_env = {item["name"]: item["value"] for item in function["env"]}
    assert target["timeout"] > int(function_env["AWS_LAMBDA_FUNCTION_TIMEOUT"])
    assert pod["terminationGracePeriodSeconds"] >= effective["shutdown_timeout"] + 1
    assert function["lifecycle"]["preStop"]["exec"]["command"] == ["sleep", str(effective["shutdown_timeout"])]
    port = int(effective["status_listen"].rsplit(":", 1)[1])
    assert sidecar["readinessProbe"]["httpGet"] == {"path": "/readyz", "port": port}
    assert not {action for action in policy_actions({**aws_env, **env}, config) if action.startswith("lambda:")}


@pytest.fixture
def emulator() -> Iterator[LambdaEmulator]:
    server = LambdaEmulator(handler)
    server.start()
    yield server
    server.stop()


def test_the_compose_configuration_delivers_to_the_emulator(
    daemon: Callable[..., Daemon], aws_env: dict[str, str], emulator: LambdaEmulator,
    sqs: Any, make_queue: Callable[..., Queue], tmp_path: Path,
) -> None:
    queue, dead_letters = make_queue(), make_queue()
    text = (KIT / "workerless.toml").read_text()
    text = text.replace('"orders-dlq"', f'"{dead_letters.name}"').replace('"orders"', f'"{queue.name}"')
    text = text.replace("http://orders-fn:8080", emulator.url).replace("poll_for = 20", "poll_for = 1")
    config = tmp_path / "workerless.toml"
    config.write_text(text)
    send_batch(sqs, queue.url, ["a", "fail-b", "c"])
    proc = daemon(["-c", str(config)], env=aws_env)
    wait_until(lambda: len(emulator.invocations) >= 2, 60, message=lambda: f"{emulator.invocations}")
    assert proc.stop(timeout=30) == 0
    assert sorted(record["body"] for record in emulator.invocations[0].payload["Records"]) == ["a", "c", "fail-b"]
    assert [record["body"] for record in emulator.invocations[1].payload["Records"]] == ["fail-b"]
    assert count_messages(sqs, queue.url) == 1 and emulator.overlapping == 0
