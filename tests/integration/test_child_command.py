"""The credentials child runs this copy of the package, whether or not it is installed."""

from __future__ import annotations

import subprocess
from pathlib import Path

import workerless_gevent
from workerless_gevent.aws.child import child_command


def test_the_childs_pythonpath_finds_this_copy_of_the_package_without_an_install() -> None:
    command, env = child_command()
    # -S: no site-packages, so an installed (or editable) copy cannot answer for the PYTHONPATH the child gets
    script = "import workerless_gevent; print(workerless_gevent.__file__)"
    found = subprocess.run([command[0], "-S", "-P", "-c", script], env=env, capture_output=True, text=True,
                           timeout=60, check=False)
    assert found.returncode == 0, found.stderr
    assert Path(found.stdout.strip()).resolve() == Path(workerless_gevent.__file__).resolve()
