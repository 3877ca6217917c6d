"""MkDocs hook: the pages generated at every build, so that they cannot drift from what they describe.

- reference/configuration.md, reference/cli.md, reference/metrics.md: from the code
  (workerless_gevent.commands.reference);
- contributing/modules.md: every module of the package with the first sentence of its docstring;
- performance/benchmarks.md and contributing/architecture-in-depth.md: BENCHMARKS.md and ARCHITECTURE.md as
  they are in the repository.
"""

from __future__ import annotations

import ast
from pathlib import Path
from typing import Any

from mkdocs.structure.files import File, Files

from workerless_gevent.commands.reference import render

ROOT = Path(__file__).resolve().parents[1]
WITHOUT_DOCSTRING = {"__main__.py": "`python -m workerless_gevent`: the same as `bin/workerless` (`entry.main`)."}
PACKAGE = ROOT / "workerless_gevent"


def on_files(files: Files, config: Any) -> Files:
    pages = {
        "reference/configuration.md": render("configuration"),
        "reference/cli.md": render("cli"),
        "reference/metrics.md": render("metrics"),
        "contributing/modules.md": render_modules(),
        "performance/benchmarks.md": (ROOT / "BENCHMARKS.md").read_text(encoding="utf-8"),
        "contributing/architecture-in-depth.md": (ROOT / "ARCHITECTURE.md").read_text(encoding="utf-8"),
    }
    for path, content in pages.items():
        files.append(File.generated(config, path, content=content))
    return files


def render_modules() -> str:
    lines = ["# Modules", "", "Every module of `workerless_gevent/`, folder by folder, with the first sentence of its "
             "docstring (generated at each build). [Architecture](architecture.md) says how the folders fit.", ""]
    folders: dict[str, list[Path]] = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        if path.name == "__init__.py" and path.parent != PACKAGE:
            continue
        folder = path.parent.relative_to(PACKAGE).as_posix()
        folders.setdefault("" if folder == "." else folder, []).append(path)
    for folder, paths in sorted(folders.items()):
        lines += ["", f"## `{folder}/`" if folder else "## Top level", "", "| module | its job |", "|---|---|"]
        for path in paths:
            lines.append(f"| `{path.relative_to(PACKAGE).as_posix()}` | {first_sentence(path)} |")
    return "\n".join(lines) + "\n"


def first_sentence(path: Path) -> str:
    docstring = ast.get_docstring(ast.parse(path.read_text(encoding="utf-8"))) or WITHOUT_DOCSTRING.get(path.name, "")
    text = " ".join(docstring.split())
    end = text.find(". ")
    return (text if end < 0 else text[:end + 1]).replace("|", "&#124;")
