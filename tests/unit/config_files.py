"""Config files for the unit suites: written byte for byte, and the one error line they give."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from workerless_gevent.errors import ConfigError
from workerless_gevent.config.loading import load_config


def write_config(tmp_path: Path, text: str) -> str:
    """Write `text` unchanged (no dedent: error lines may point into it) and return the path."""
    path = tmp_path / "workerless.toml"
    path.write_text(text, encoding="utf-8")
    return str(path)


def error_line(path: str | Path | None, env: dict[str, str] | None = None, flags: dict[str, Any] | None = None) -> str:
    """The one line of the ConfigError that loading must raise."""
    with pytest.raises(ConfigError) as caught:
        load_config(None if path is None else str(path), env or {}, flags or {})
    return caught.value.line()
