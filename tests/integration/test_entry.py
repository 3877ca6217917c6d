"""The entry function patches gevent, finds gevent's plugins with one cheap pass over the installed
distributions, and leaves importlib.metadata as it found it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from importlib import metadata
from pathlib import Path

from gevent import monkey

from tests.support import REPO_ROOT
from workerless_gevent.entry import gevent_plugins, patch_gevent


def test_patching_leaves_entry_points_as_it_was() -> None:
    before = metadata.entry_points
    patch_gevent()  # this process is patched already; patching again changes nothing
    assert metadata.entry_points is before and monkey.is_module_patched("socket")


def test_a_fresh_process_is_patched_before_ssl_and_boto3_are_imported() -> None:
    code = ("import sys; from workerless_gevent.entry import patch_gevent; "
            "assert 'ssl' not in sys.modules and 'boto3' not in sys.modules; patch_gevent(); "
            "from gevent import monkey; import socket, ssl, threading; "
            "assert monkey.is_module_patched('socket') and monkey.is_module_patched('ssl'); "
            "assert monkey.is_module_patched('threading'); print('ok')")
    done = subprocess.run([sys.executable, "-W", "error", "-c", code], cwd=REPO_ROOT, capture_output=True, text=True,
                          timeout=60)
    assert (done.returncode, done.stdout.strip()) == (0, "ok"), done.stderr


def test_gevent_plugins_are_called_without_importing_importlib_metadata(tmp_path: Path) -> None:
    """A plugin another distribution declares hears the patch steps, as with gevent's own lookup."""
    info = tmp_path / "noisy_plugin-1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: noisy-plugin\nVersion: 1.0\n")
    (info / "entry_points.txt").write_text("[gevent.plugins.monkey.will_patch_all]\nnoisy = noisy_plugin:heard [extra]\n"
                                           "[console_scripts]\nnot-a-plugin = noisy_plugin:nothing\n")
    (tmp_path / "noisy_plugin.py").write_text("events = []\ndef heard(event):\n    events.append(type(event).__name__)\n")
    code = ("import sys; from workerless_gevent.entry import patch_gevent; patch_gevent(); "
            "import noisy_plugin; from gevent import monkey; "
            "assert monkey.is_module_patched('socket') and monkey.is_module_patched('signal'); "
            "print(noisy_plugin.events, 'importlib.metadata' in sys.modules)")
    done = subprocess.run([sys.executable, "-W", "error", "-c", code], cwd=REPO_ROOT, capture_output=True, text=True,
                          timeout=60, env={**os.environ, "PYTHONPATH": f"{tmp_path}{os.pathsep}{REPO_ROOT}"})
    assert (done.returncode, done.stdout.strip()) == (0, "['GeventWillPatchAllEvent'] False"), done.stderr


def test_the_plugin_scan_reads_entry_point_files_as_importlib_metadata_does(tmp_path: Path) -> None:
    for name, text in (("a-1.0.dist-info", "[gevent.plugins.monkey.did_patch_all]\nx = a.hooks:after\n"),
                       ("b-2.0.egg-info", "[gevent.plugins.monkey.did_patch_all]\nx = a.hooks:after\n"
                                          "y = b:Hooks.before [fast]\n"),
                       ("c-1.0.dist-info", "[other]\nz = c:z\n")):
        (tmp_path / name).mkdir()
        (tmp_path / name / "entry_points.txt").write_text(text)
    assert gevent_plugins([str(tmp_path), str(tmp_path / "missing")]) == {
        "gevent.plugins.monkey.did_patch_all": ["a.hooks:after", "b:Hooks.before"]}
    archive = tmp_path / "bundle.zip"
    archive.write_bytes(b"PK\x05\x06" + b"\x00" * 18)  # an empty zip: only importlib.metadata reads those
    assert gevent_plugins([str(tmp_path), str(archive)]) is None
    found = gevent_plugins(sys.path)
    assert found is not None and "gevent.monkey:_subscribe_signal_os" in found["gevent.plugins.monkey.will_patch_all"]
    groups = {ep.group for dist in metadata.distributions() for ep in dist.entry_points
              if ep.group.startswith("gevent.plugins")}
    assert {group: set(targets) for group, targets in found.items()} == {
        group: {ep.value for ep in metadata.entry_points(group=group)} for group in groups}


def test_the_credentials_child_ends_quietly_when_the_daemon_is_gone() -> None:
    """The daemon stopped or was killed while its child resolved: the answer has nowhere to go, and the
    child exits 0 without a traceback on the stderr it shares with the daemon."""
    from workerless_gevent.aws.child import child_command, request_of
    from workerless_gevent.config.model import AwsConfig

    request = json.dumps(request_of(AwsConfig(region="eu-west-1"), "test", ("sqs",)))
    command, env = child_command(request)
    read_end, write_end = os.pipe()
    os.close(read_end)  # nobody will read the answer
    try:
        done = subprocess.run(command, env={**env, "AWS_ACCESS_KEY_ID": "a", "AWS_SECRET_ACCESS_KEY": "b"},
                              stdin=subprocess.DEVNULL, stdout=write_end, stderr=subprocess.PIPE, text=True, timeout=60)
    finally:
        os.close(write_end)
    assert (done.returncode, done.stderr) == (0, "")
