"""The installed dependencies are the ones pyproject.toml allows, and behave as the code assumes.

A CI or a developer's venv with something outside the bounds (an old venv, a pip that resolved
differently) fails here with the package named, rather than somewhere deep in a test.
"""

from __future__ import annotations

import re
import tomllib
from datetime import datetime, timedelta, timezone
from importlib.metadata import PackageNotFoundError, version

import pytest

from tests.support import REPO_ROOT
from workerless_gevent.config.cron import latest_slot, schedule_problem, slots_between

PYPROJECT = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text(encoding="utf-8"))
INSTALLED_EXTRA = "test"  # what ./dev and .ci/run install: pip install -e ".[test]"
REQUIREMENTS = PYPROJECT["project"]["dependencies"] + PYPROJECT["project"]["optional-dependencies"][INSTALLED_EXTRA]


def release(text: str) -> tuple[int, ...]:
    """The numeric release of a version ("2.6.1" -> (2, 6, 1)); a suffix such as rc1 is dropped."""
    match = re.match(r"\d+(?:\.\d+)*", text.strip())
    assert match, f"cannot read the version {text!r}"
    return tuple(int(part) for part in match.group().split("."))


def satisfies_plainly(installed: str, specifier: str) -> bool:
    """The fallback without `packaging`: ==, !=, >=, <=, >, < on numeric releases, comma meaning and."""
    have = release(installed)
    for clause in filter(None, (part.strip() for part in specifier.split(","))):
        operator, wanted = re.match(r"(==|!=|>=|<=|>|<)\s*(.+)", clause).groups()  # type: ignore[union-attr]
        want = release(wanted)
        width = max(len(have), len(want))
        a, b = have + (0,) * (width - len(have)), want + (0,) * (width - len(want))
        if not {"==": a == b, "!=": a != b, ">=": a >= b, "<=": a <= b, ">": a > b, "<": a < b}[operator]:
            return False
    return True


def parse(requirement: str) -> tuple[str, str, str | None]:
    """(distribution name, version specifier, marker or None) of a PEP 508 line without URLs."""
    match = re.match(r"\s*([A-Za-z0-9][A-Za-z0-9._-]*)\s*(?:\[[^\]]*\])?\s*([^;]*)(?:;(.*))?$", requirement)
    assert match, f"pyproject.toml: cannot read the requirement {requirement!r}"
    name, specifier, marker = match.groups()
    return name, specifier.strip(), marker.strip() if marker else None


def test_every_installed_dependency_is_within_the_bounds_of_pyproject() -> None:
    try:
        from packaging.markers import Marker
        from packaging.requirements import Requirement
    except ImportError:  # pytest needs packaging, so this is for a stripped-down environment
        Marker = Requirement = None  # type: ignore[assignment,misc]
    outside: list[str] = []
    for line in REQUIREMENTS:
        name, specifier, marker = parse(line)
        if marker is not None:
            assert Marker is not None, f"pyproject.toml: {line!r} has a marker; evaluating it needs packaging"
            if not Marker(marker).evaluate():
                continue
        try:
            installed = version(name)
        except PackageNotFoundError:
            outside.append(f"{name}: not installed, pyproject.toml requires {line!r}")
            continue
        if Requirement is not None:
            ok = Requirement(line).specifier.contains(installed, prereleases=True)
        else:
            ok = satisfies_plainly(installed, specifier)
        if not ok:
            outside.append(f"{name} {installed} is installed, outside {line!r} in pyproject.toml")
    assert not outside, ("installed versions outside pyproject.toml's bounds (reinstall with "
                         "`pip install -e '.[test]'` in a fresh venv):\n  " + "\n  ".join(outside))


@pytest.mark.parametrize(("installed", "specifier", "expected"), [
    ("2.6.1", ">=2.5,<3", True),
    ("2.4.0", ">=2.5,<3", False),
    ("3.0", ">=2.5,<3", False),
    ("7.0.0", ">=2.0,<8", True),
    ("1.19.1", "==1.19.1", True),
    ("1.19", "==1.19.0", True),
    ("1.20.0", "==1.19.1", False),
    ("2.0rc1", ">=2.0", True),
    ("5.2.5", "", True),
])
def test_the_plain_fallback_compares_releases(installed: str, specifier: str, expected: bool) -> None:
    assert satisfies_plainly(installed, specifier) is expected


def test_the_bounds_the_code_relies_on_are_declared() -> None:
    declared = {parse(line)[0].lower(): parse(line)[1] for line in REQUIREMENTS}
    # wire/parsing.py is httptools' callback protocol: 0.6.4 is the oldest release tested, 1.0 may change it.
    parser = declared["httptools"]
    assert not satisfies_plainly("0.6.3", parser) and not satisfies_plainly("1.0.0", parser), f"httptools{parser}"
    daemon = {parse(line)[0].lower() for line in PYPROJECT["project"]["dependencies"]}
    assert "geventhttpclient" not in daemon, "the daemon parses with httptools; geventhttpclient is the bench's"
    assert "<" in declared["croniter"], f"croniter{declared['croniter']}: an upper bound, as its API moves"
    assert re.fullmatch(r"==\d+(\.\d+)+", declared["mypy"]), f"mypy{declared['mypy']}: pin it for --strict in CI"
    assert "tomli" not in declared, "Python >= 3.11 has tomllib; tomli is not needed"
    assert not satisfies_plainly("3.10.13", PYPROJECT["project"]["requires-python"]), "tomllib and the type syntax need 3.11"


# --- croniter's reading of the crontab, through the project's schedule code ----------------------

def test_day_of_week_7_is_sunday() -> None:
    assert schedule_problem("0 12 * * 7") is None
    week = list(slots_between("0 12 * * 7", datetime(2026, 11, 23, tzinfo=timezone.utc),  # a Monday
                              datetime(2026, 11, 30, 23, 59, tzinfo=timezone.utc)))
    assert week == [datetime(2026, 11, 29, 12, 0, tzinfo=timezone.utc)], f"croniter {version('croniter')}: {week}"
    assert week[0].strftime("%A") == "Sunday"
    assert week == list(slots_between("0 12 * * 0", datetime(2026, 11, 23, tzinfo=timezone.utc),
                                      datetime(2026, 11, 30, 23, 59, tzinfo=timezone.utc)))


def test_a_range_ending_on_7_takes_in_sunday() -> None:
    friday = datetime(2026, 11, 27, tzinfo=timezone.utc)
    weekend = list(slots_between("0 12 * * 6-7", friday, friday + timedelta(days=3)))
    assert [slot.strftime("%A") for slot in weekend] == ["Saturday", "Sunday"], f"croniter {version('croniter')}: {weekend}"
    sunday_afternoon = datetime(2026, 11, 29, 13, 0, tzinfo=timezone.utc)
    assert latest_slot("0 12 * * 7", sunday_afternoon, timedelta(hours=2)) == sunday_afternoon - timedelta(hours=1)
