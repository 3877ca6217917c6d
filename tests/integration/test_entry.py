"""The entry function patches gevent with one scan of the installed distributions, and leaves
importlib.metadata as it found it."""

from __future__ import annotations

import subprocess
import sys
from importlib import metadata

from gevent import monkey

from tests.support import REPO_ROOT
from workerless_gevent.entry import patch_gevent


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
