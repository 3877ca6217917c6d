"""deploy/: every file parses, every configuration it embeds passes `workerless check`, and the numbers
that must agree do (stop timeouts above shutdown_timeout, probes on the status port, scaling on the
daemon's own metric and queues)."""

from __future__ import annotations

import json
import re
import shlex
import subprocess
import sys
import tomllib
from pathlib import Path
from typing import Any

import yaml

from tests.support import REPO_ROOT

DEPLOY = REPO_ROOT / "deploy"


def check(env: dict[str, str], *args: str) -> dict[str, Any]:
    """`workerless check` on a configuration; the effective configuration it prints."""
    done = subprocess.run([sys.executable, str(REPO_ROOT / "bin" / "workerless"), "check", *args], env=env,
                          capture_output=True, text=True, timeout=60, cwd=REPO_ROOT)
    assert done.returncode == 0, done.stderr
    effective: dict[str, Any] = json.loads(done.stdout)
    return effective


def status_port(effective: dict[str, Any]) -> int:
    return int(effective["status_listen"].rsplit(":", 1)[1])


def fenced_blocks(text: str) -> list[tuple[str, str]]:
    """(language, body) of each fenced code block of a markdown file."""
    return re.findall(r"^```(\w*)\n(.*?)^```", text, re.S | re.M)


def systemd_unit(text: str) -> dict[str, dict[str, str]]:
    sections: dict[str, dict[str, str]] = {}
    current: dict[str, str] = {}
    for line in text.splitlines():
        if not line.strip() or line.startswith("#"):
            continue
        if line.startswith("["):
            current = sections.setdefault(line.strip("[]"), {})
        else:
            key, _, value = line.partition("=")
            current[key.strip()] = value.strip()
    return sections


def yaml_documents(path: Path) -> dict[str, dict[str, Any]]:
    """kind -> the document (each kind appears once per file here)."""
    documents = [document for document in yaml.safe_load_all(path.read_text()) if document]
    kinds = {document["kind"]: document for document in documents}
    assert len(kinds) == len(documents), f"{path}: two documents of one kind"
    return kinds


def test_every_file_in_deploy_parses() -> None:
    parsers = {".json": lambda text: json.loads(text), ".yaml": lambda text: list(yaml.safe_load_all(text)),
               ".toml": tomllib.loads, ".service": systemd_unit, ".md": fenced_blocks}
    files = sorted(path for path in DEPLOY.rglob("*") if path.is_file())
    assert {path.relative_to(DEPLOY).as_posix() for path in files} >= {
        "ecs/task-definition.json", "ecs/scaling-policy.json", "kubernetes/workerless.yaml",
        "kubernetes/keda-sqs.yaml", "kubernetes/keda-utilization.yaml", "systemd/workerless.service",
        "systemd/workerless.toml", "heroku.md"}
    for path in files:
        assert path.suffix in parsers, f"{path}: no parser for it in this test"
        assert parsers[path.suffix](path.read_text()), path


def test_ecs_task_definition_and_its_scaling_policy(aws_env: dict[str, str]) -> None:
    task = json.loads((DEPLOY / "ecs" / "task-definition.json").read_text())
    containers = {container["name"]: container for container in task["containerDefinitions"]}
    sidecar, app = containers["workerless"], containers["app"]
    env = {item["name"]: item["value"] for item in sidecar["environment"]}
    effective = check({**aws_env, **env})
    assert effective["queues"] and effective["targets"]["default"]["url"].startswith("http://127.0.0.1:")
    assert sidecar["stopTimeout"] > effective["shutdown_timeout"]
    # It depends on the app, so ECS stops it first: the app answers while its deliveries finish.
    assert sidecar["dependsOn"] == [{"containerName": "app", "condition": "START"}] and app["essential"]
    command = " ".join(sidecar["healthCheck"]["command"])
    assert sidecar["healthCheck"]["command"][0] == "CMD"  # exec form: python is in the image, no shell needed
    assert f"http://127.0.0.1:{status_port(effective)}/healthz" in command
    policy = json.loads((DEPLOY / "ecs" / "scaling-policy.json").read_text())
    tracking = policy["TargetTrackingScalingPolicyConfiguration"]
    metric = tracking["CustomizedMetricSpecification"]
    assert metric == {"Namespace": f"Workerless-{effective['name']}", "MetricName": "Utilization",
                      "Statistic": "Average"}  # no dimensions: the average over every task of the service
    assert 0 < tracking["TargetValue"] < 1  # Utilization is a fraction (unit None), not a percentage
    assert policy["ResourceId"].endswith("/" + task["family"]) and policy["PolicyType"] == "TargetTrackingScaling"


def test_kubernetes_manifest_and_keda(aws_env: dict[str, str], tmp_path: Path) -> None:
    manifest = yaml_documents(DEPLOY / "kubernetes" / "workerless.yaml")
    config_map, deployment = manifest["ConfigMap"], manifest["Deployment"]
    pod = deployment["spec"]["template"]["spec"]
    sidecar = next(container for container in pod["containers"] if container["name"] == "workerless")
    env = {item["name"]: item["value"] for item in sidecar["env"]}
    mount = sidecar["volumeMounts"][0]
    volume = next(volume for volume in pod["volumes"] if volume["name"] == mount["name"])
    assert volume["configMap"]["name"] == config_map["metadata"]["name"]
    (key, toml_text), = config_map["data"].items()
    assert env.pop("WORKERLESS_CONFIG") == f"{mount['mountPath']}/{key}"
    config = tmp_path / key
    config.write_text(toml_text)
    effective = check({**aws_env, **env}, "-c", str(config))
    assert pod["terminationGracePeriodSeconds"] > effective["shutdown_timeout"]
    port = status_port(effective)
    assert effective["status_listen"].startswith("0.0.0.0:")  # the kubelet probes the pod IP
    assert sidecar["livenessProbe"]["httpGet"] == {"path": "/healthz", "port": port}
    assert sidecar["readinessProbe"]["httpGet"] == {"path": "/readyz", "port": port}
    assert sidecar["securityContext"]["runAsNonRoot"] is True
    app = next(container for container in pod["containers"] if container["name"] == "app")
    assert app["lifecycle"]["preStop"]["exec"]["command"] == ["sleep", str(effective["shutdown_timeout"])]

    name = deployment["metadata"]["name"]
    sqs = yaml_documents(DEPLOY / "kubernetes" / "keda-sqs.yaml")["ScaledObject"]["spec"]
    (trigger,) = sqs["triggers"]
    assert sqs["scaleTargetRef"]["name"] == name and trigger["type"] == "aws-sqs-queue"
    assert trigger["metadata"]["queueURL"].rsplit("/", 1)[1] in [queue["name"] for queue in effective["queues"]]
    assert int(trigger["metadata"]["queueLength"]) == effective["concurrency"]
    assert trigger["metadata"]["scaleOnInFlight"] == "true"  # visible + in flight, as the Backlog metric
    utilization = yaml_documents(DEPLOY / "kubernetes" / "keda-utilization.yaml")
    scaled = utilization["ScaledObject"]["spec"]
    (trigger,) = scaled["triggers"]
    assert scaled["scaleTargetRef"]["name"] == name and trigger["type"] == "prometheus"
    assert trigger["metadata"]["query"].startswith("sum(workerless_utilization{") and trigger["metricType"] == "AverageValue"
    assert 0 < float(trigger["metadata"]["threshold"]) < 1 and scaled["minReplicaCount"] >= 1
    (endpoint,) = utilization["PodMonitor"]["spec"]["podMetricsEndpoints"]
    assert endpoint["path"] == "/metrics" and endpoint["port"] == sidecar["ports"][0]["name"]
    assert sidecar["ports"][0]["containerPort"] == port


def test_systemd_unit(aws_env: dict[str, str]) -> None:
    unit = systemd_unit((DEPLOY / "systemd" / "workerless.service").read_text())["Service"]
    program, *args = shlex.split(unit["ExecStart"])
    assert program.endswith("/bin/workerless") and args[0] == "-c"
    assert Path(args[1]).name == "workerless.toml"
    effective = check(aws_env, "-c", str(DEPLOY / "systemd" / "workerless.toml"))
    assert int(unit["TimeoutStopSec"]) > effective["shutdown_timeout"]
    assert unit["KillSignal"] == "SIGTERM" and unit["RestartPreventExitStatus"] == "2"


def test_heroku_notes(aws_env: dict[str, str]) -> None:
    blocks = fenced_blocks((DEPLOY / "heroku.md").read_text())
    procfile = dict(line.split(": ", 1) for language, body in blocks if not language for line in body.splitlines())
    shell = [line for language, body in blocks if language == "sh" for line in body.splitlines()]
    assert procfile["worker"] == "bin/worker"
    assert shell[0] == "#!/bin/sh" and shell.index("exec workerless") == 2  # the daemon replaces the shell
    settings: dict[str, str] = {}
    for line in shell:
        if line.startswith("heroku config:set "):
            settings.update(word.split("=", 1) for word in shlex.split(line)[2:])
    assert settings["AWS_REGION"] and settings["WORKERLESS_QUEUES"]
    env = {**aws_env, **{key: value for key, value in settings.items() if key.startswith(("WORKERLESS_", "AWS_REGION"))}}
    effective = check(env)
    assert effective["shutdown_timeout"] < 30  # Heroku's SIGKILL comes 30 s after SIGTERM
    assert effective["aws"]["region"] == settings["AWS_REGION"]


def test_the_sidecars_run_the_image_entry_point_as_it_is() -> None:
    """No command, args or entry point of their own: those would replace the image's (a shell among them
    would stand between the orchestrator's SIGTERM and the daemon)."""
    task = json.loads((DEPLOY / "ecs" / "task-definition.json").read_text())
    (ecs,) = [container for container in task["containerDefinitions"] if container["name"] == "workerless"]
    pod = yaml_documents(DEPLOY / "kubernetes" / "workerless.yaml")["Deployment"]["spec"]["template"]["spec"]
    (kubernetes,) = [container for container in pod["containers"] if container["name"] == "workerless"]
    assert not {"command", "entryPoint"} & set(ecs) and not {"command", "args"} & set(kubernetes)
