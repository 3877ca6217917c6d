"""bench/profile_summary.py: every module of the package counts under its folder, and py-spy stacks land in
the area of the SQS call, the delivery or the code they belong to; nothing of ours falls into "other"."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from bench import profile_summary
from bench.profile_summary import BASELINE, HUB, OTHER, TOP_LEVEL, area_of, folder_of, parse_frame, wire_part
from tests.support import REPO_ROOT

PACKAGE_DIR = REPO_ROOT / "workerless_gevent"
MODULES = sorted(PACKAGE_DIR.rglob("*.py"))


def frames(stack: str) -> list[profile_summary.Frame]:
    return [parse_frame(text) for text in stack.split(";")]


def expected_folder(module: Path) -> str:
    inside = module.relative_to(PACKAGE_DIR)
    return f"{inside.parts[0]}/" if len(inside.parts) > 1 else TOP_LEVEL


@pytest.mark.parametrize("module", MODULES, ids=lambda m: str(m.relative_to(PACKAGE_DIR)))
def test_every_module_of_the_package_counts_under_its_folder(module: Path) -> None:
    expected = expected_folder(module)
    # as py-spy shortens it, and in full (py-spy --full-filenames, another checkout)
    for path in (f"workerless_gevent/{module.relative_to(PACKAGE_DIR)}", str(module)):
        stack = frames(f"Hub.run (gevent/hub.py:647);work ({path}:12);loads (json/__init__.py:346)")
        assert folder_of(stack) == expected
        assert area_of(stack) == f"own code in {expected}: work"


def test_the_folders_are_the_package_folders_and_its_top_level() -> None:
    folders = {folder_of(frames(f"work (workerless_gevent/{m.relative_to(PACKAGE_DIR)}:1)")) for m in MODULES}
    on_disk = {f"{d.name}/" for d in PACKAGE_DIR.iterdir() if d.is_dir() and any(d.glob("*.py"))}
    assert folders == on_disk | {TOP_LEVEL}
    assert {"wire/", "delivery/", "targets/", "aws/", "observability/", "config/", "periodic/"} <= folders


def test_a_module_in_a_new_folder_is_counted_under_it_not_as_other() -> None:
    stack = frames("Slots.run_slot (workerless_gevent/delivery/slots.py:66);"
                   "Thing.do (workerless_gevent/newfolder/thing.py:3);dumps (json/__init__.py:231)")
    assert folder_of(stack) == "newfolder/"
    assert area_of(stack) == "own code in newfolder/: Thing.do"


def classes_of_the_package() -> dict[str, tuple[Path, set[str]]]:
    found = {}
    for module in MODULES:
        for node in ast.walk(ast.parse(module.read_text())):
            if isinstance(node, ast.ClassDef):
                methods = {item.name for item in node.body if isinstance(item, ast.FunctionDef)}
                found[node.name] = (module, methods)
    return found


def test_the_names_the_areas_rely_on_exist_in_the_package() -> None:
    for folder in (profile_summary.TARGETS, profile_summary.WIRE):
        assert (PACKAGE_DIR / folder).is_dir()
    for module in profile_summary.WIRE_PART_NAMES:
        assert (PACKAGE_DIR / (module.replace(".", "/") + ".py")).is_file()
    classes = classes_of_the_package()
    wires = {name: found for name, found in classes.items() if name.endswith(profile_summary.WIRE_SUFFIX)}
    assert set(wires) == {"JsonWire", "SqsWire", "DynamoDbWire", "LambdaWire"}
    assert all(module.parent.name == "wire" for module, _ in wires.values())
    every_method = set().union(*(methods for _, methods in wires.values()))
    assert profile_summary.WIRE_INNER_METHODS <= every_method
    hot = {"receive_message", "delete_message_batch", "change_message_visibility_batch"}
    assert hot <= wires["SqsWire"][1]


RECEIVE = ("Receiver._receive_now (workerless_gevent/delivery/receiving.py:80);"
           "SqsQueue.receive (workerless_gevent/delivery/queue.py:64);"
           "SqsWire.receive_message (workerless_gevent/wire/sqs.py:106);"
           "SqsWire.call (workerless_gevent/wire/sqs.py:139);"
           "Retrier.call (workerless_gevent/wire/retries.py:96);"
           "SqsWire.call.<locals>.<lambda> (workerless_gevent/wire/sqs.py:139);"
           "SqsWire.call_once (workerless_gevent/wire/sqs.py:150)")
DELETE = ("SqsQueue._delete_batch (workerless_gevent/delivery/queue.py:122);"
          "SqsWire.delete_message_batch (workerless_gevent/wire/sqs.py:130);"
          "SqsWire.call_once (workerless_gevent/wire/sqs.py:155)")
SLOT = ("Slots.run_slot (workerless_gevent/delivery/slots.py:66);"
        "Slots.deliver (workerless_gevent/delivery/slots.py:108);"
        "HttpTarget.deliver (workerless_gevent/targets/http.py:44);"
        "HttpTarget.post (workerless_gevent/targets/http.py:52)")
SEND = "Connections.exchange (workerless_gevent/wire/http.py:106);socket.sendall (gevent/_socketcommon.py:699)"


@pytest.mark.parametrize(
    ("stack", "folder", "area", "part"),
    [
        pytest.param(RECEIVE + ";Signer.headers (workerless_gevent/wire/sigv4.py:50);new (hmac.py:184)", "wire/",
                     "SQS ReceiveMessage via wire.sqs, from SqsQueue.receive (workerless_gevent/delivery/queue.py:64)",
                     "SigV4 signing (wire.sigv4)", id="receive-signing"),
        pytest.param(RECEIVE + ";parse_message (workerless_gevent/wire/sqs.py:221)", "wire/",
                     "SQS ReceiveMessage via wire.sqs, from SqsQueue.receive (workerless_gevent/delivery/queue.py:64)",
                     "parsing (wire.sqs.parse_*)", id="receive-parsing"),
        pytest.param(DELETE + ";" + SEND, "wire/", "SQS DeleteMessageBatch via wire.sqs, from "
                     "SqsQueue._delete_batch (workerless_gevent/delivery/queue.py:122)",
                     "HTTP request and response (wire.http)", id="delete-http"),
        pytest.param("SqsQueue._change_batch (workerless_gevent/delivery/queue.py:140);"
                     "SqsWire.change_message_visibility_batch (workerless_gevent/wire/sqs.py:133);"
                     "SqsWire.call_once (workerless_gevent/wire/sqs.py:155);"
                     "loads (/usr/lib/python3.11/json/__init__.py:346)",
                     "wire/", "SQS ChangeMessageVisibilityBatch via wire.sqs, from "
                     "SqsQueue._change_batch (workerless_gevent/delivery/queue.py:140)",
                     "JSON encode/decode (json.dumps, json.loads)", id="visibility-json"),
        pytest.param("SqsWire.call_once (workerless_gevent/wire/sqs.py:150)", "wire/",
                     "SQS call (action not in the stack) via wire.sqs, from ?", "SqsWire own code (wire.sqs)",
                     id="wire-call-cut-short"),
        pytest.param(SLOT + ";" + SEND, "wire/", "delivery to the target (targets.http through wire.http)", None,
                     id="post"),
        pytest.param(SLOT + ";build_headers (workerless_gevent/targets/http.py:90)", "targets/",
                     "own code in targets/: build_headers", None, id="target-own-code"),
        pytest.param("LambdaTarget.invoke (workerless_gevent/targets/aws_lambda.py:50);"
                     "LambdaWire.invoke (workerless_gevent/wire/aws_lambda.py:110);"
                     "LambdaWire.invoke_once (workerless_gevent/wire/aws_lambda.py:130);"
                     "RestSigner.headers (workerless_gevent/wire/sigv4.py:90)", "wire/",
                     "Lambda Invoke via wire.aws_lambda, from LambdaTarget.invoke "
                     "(workerless_gevent/targets/aws_lambda.py:50)", "SigV4 signing (wire.sigv4)", id="lambda"),
        pytest.param("Daemon.run (workerless_gevent/daemon.py:80);Registry.observe (workerless_gevent/metrics.py:120)",
                     TOP_LEVEL, "own code in top level: Registry.observe", None, id="top-level"),
        pytest.param("Hub.run (gevent/hub.py:647)", HUB, HUB, None, id="hub"),
        pytest.param("ABCMeta.__subclasscheck__ (<frozen abc>:123)", OTHER, OTHER, None, id="other"),
        pytest.param("SigV4Auth.add_auth (botocore/auth.py:400);_get_credentials (botocore/credentials.py:90)", OTHER,
                     "SigV4 signing (botocore.auth), the AWS call above it not in the stack", None, id="botocore-sign"),
        pytest.param("main.<locals>.slot (baseline.py:65);BaseClient._make_api_call (botocore/client.py:980)",
                     BASELINE, "AWS call via botocore, from main.<locals>.slot (baseline.py:65)", None,
                     id="baseline-sqs"),
        pytest.param("main.<locals>.slot (baseline.py:88);HTTPClient.request (geventhttpclient/client.py:300)",
                     BASELINE, "delivery to the target (the baseline's slot through geventhttpclient)", None,
                     id="baseline-post"),
    ],
)
def test_a_stack_lands_in_its_folder_area_and_wire_part(stack: str, folder: str, area: str, part: str | None) -> None:
    assert folder_of(frames(stack)) == folder
    assert area_of(frames(stack)) == area
    assert wire_part(frames(stack)) == part


def test_the_summary_adds_up_and_scales_to_microseconds(tmp_path: Path) -> None:
    raw = tmp_path / "profile.txt"
    raw.write_text("\n".join([f"{SLOT};{SEND} 6", f"{DELETE};{SEND} 2", "Hub.run (gevent/hub.py:647) 2",
                              " 7"]) + "\n")  # py-spy writes a sample without Python frames as an empty stack
    summary = profile_summary.summarize_profile(raw, cpu_us_per_msg=100.0)
    assert summary["samples"] == 10
    assert [(row["function"], row["share"], row["us_per_msg"]) for row in summary["by_folder"]] == \
        [("wire/", 0.8, 80.0), (HUB, 0.2, 20.0)]
    assert [row["function"] for row in summary["by_area"]] == [
        "delivery to the target (targets.http through wire.http)",
        "SQS DeleteMessageBatch via wire.sqs, from SqsQueue._delete_batch (workerless_gevent/delivery/queue.py:122)",
        HUB]
    assert summary["wire_call_parts"][0]["function"] == "HTTP request and response (wire.http)"
    assert summary["wire_call_parts"][0]["share"] == pytest.approx(0.2)
    inclusive = {row["function"]: row["share"] for row in summary["top_inclusive_own_code"]}
    assert inclusive["Connections.exchange (workerless_gevent/wire/http.py:106)"] == pytest.approx(0.8)
    assert inclusive["Slots.run_slot (workerless_gevent/delivery/slots.py:66)"] == pytest.approx(0.6)
    assert summary["top_self"][0]["function"] == "socket.sendall (gevent/_socketcommon.py:699)"
