"""Workerless config files for tests: TOML text as written, or built from plain dicts."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path
from typing import Any


# A Beanstalk cron.yaml with one task that fires every minute.
EVERY_MINUTE_CRON = """\
version: 1
cron:
 - name: "tick"
   url: "/cron/tick"
   schedule: "* * * * *"
"""


def write_config(tmp_path: Path, text: str, name: str = "workerless.toml") -> Path:
    """Write a (dedented) config file under `tmp_path` and return its path."""
    path = tmp_path / name
    path.write_text(textwrap.dedent(text).lstrip("\n"))
    return path


def toml_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return repr(value)
    return json.dumps(str(value), ensure_ascii=False)


def toml_table(header: str, items: dict[str, Any]) -> str:
    lines = [header] + [f"{key} = {toml_value(value)}" for key, value in items.items() if value is not None]
    return "\n".join(lines) + "\n\n"


def build_config_file(tmp_path: Path, *, queues: list[dict[str, Any]], targets: dict[str, dict[str, Any]],
                      polling: dict[str, Any] | None = None, tables: dict[str, dict[str, Any]] | None = None,
                      name: str = "workerless.toml", **top: Any) -> Path:
    """A TOML config from plain dicts: top-level keys, [polling], [[queues]], [targets.*], then `tables`.

    `poll_for` is 1 unless `polling` says otherwise; keys whose value is None are left out.
    """
    text = "".join(f"{key} = {toml_value(value)}\n" for key, value in top.items() if value is not None) + "\n"
    text += toml_table("[polling]", {"poll_for": 1, **(polling or {})})
    text += "".join(toml_table("[[queues]]", queue) for queue in queues)
    text += "".join(toml_table(f"[targets.{target}]", items) for target, items in targets.items())
    text += "".join(toml_table(f"[{table}]", items) for table, items in (tables or {}).items())
    path = tmp_path / name
    path.write_text(text)
    return path
