"""The documentation site builds with `mkdocs build --strict`: no broken link or anchor, no page left out of the
navigation, and the generated reference pages in it."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

from tests.support import REPO_ROOT


def test_the_site_builds_in_strict_mode_with_the_generated_reference(tmp_path: Path) -> None:
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}
    result = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "-d", str(tmp_path / "site")],
                            cwd=REPO_ROOT, capture_output=True, text=True, timeout=240, env=env)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-5000:]
    site = tmp_path / "site"
    configuration = (site / "reference" / "configuration" / "index.html").read_text()
    assert "queues[].visibility_timeout" in configuration and "WORKERLESS_POLL_FOR" in configuration
    cli = (site / "reference" / "cli" / "index.html").read_text()
    assert "workerless redrive" in cli and "--max-messages" in cli
    assert "workerless_received_total" in (site / "reference" / "metrics" / "index.html").read_text()
    assert "delivery/poller.py" in (site / "contributing" / "modules" / "index.html").read_text()
    assert (site / "images" / "status-page.png").stat().st_size > 10_000



def test_the_readme_stays_a_front_door_whose_links_all_lead_somewhere() -> None:
    readme = (REPO_ROOT / "README.md").read_text()
    assert len(readme.splitlines()) <= 150
    links = re.findall(r"\]\(([^)#]+)(?:#[^)]*)?\)", readme)
    local = [link for link in links if "://" not in link]
    assert "docs/getting-started/demo.md" in local and "docs/troubleshooting.md" in local
    assert [link for link in local if not (REPO_ROOT / link).is_file()] == []
