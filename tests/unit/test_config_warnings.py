"""The warnings `check` prints and the daemon logs at start for settings that work, but likely not as meant:
here, an HTTP target with fewer connections than the deliveries that can reach it at once."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.unit.config_files import write_config
from workerless_gevent.config.loading import load_config
from workerless_gevent.lifecycle.assembly import connection_warnings


def warnings_for(tmp_path: Path, text: str) -> list[str]:
    return connection_warnings(load_config(write_config(tmp_path, text), {}, {}))


def config_text(concurrency: int, target: str = "", queues: str = '[[queues]]\nname = "jobs"\n') -> str:
    return (f"concurrency = {concurrency}\n\n{queues}\n[targets.default]\ntype = \"http\"\n"
            f"url = \"http://127.0.0.1:8080/\"\n{target}")


def test_a_thousand_slots_on_fifty_connections_are_named(tmp_path: Path) -> None:
    (warning,) = warnings_for(tmp_path, config_text(1000))
    assert warning.startswith("target default: max_connections = 50 is below the 1000 deliveries that can reach it "
                              "at once (concurrency = 1000): the others wait for a connection"), warning


@pytest.mark.parametrize("text", [
    config_text(50),  # Beanstalk's defaults: 50 and 50
    config_text(1000, "max_connections = 1000\n"),
    config_text(1000, "max_concurrency = 50\n"),  # the target takes no more than its connections
    config_text(1000, queues='[[queues]]\nname = "a"\nmax_concurrency = 20\n\n[[queues]]\nname = "b"\n'
                             'max_concurrency = 30\n'),  # its queues bring it 50 at most
    config_text(1000, queues='[[queues]]\nname = "a"\ntarget = "fn"\n') + '\n[targets.fn]\ntype = "lambda"\n'
                                                                          'function = "fn"\n',  # no queue uses it
], ids=["defaults", "connections-raised", "target-capped", "queues-capped", "unused"])
def test_no_warning_where_the_connections_suffice(tmp_path: Path, text: str) -> None:
    assert warnings_for(tmp_path, text) == []


def test_the_queues_that_use_the_target_bound_what_reaches_it(tmp_path: Path) -> None:
    text = config_text(1000, queues='[[queues]]\nname = "a"\nmax_concurrency = 40\n\n[[queues]]\nname = "b"\n'
                                    'max_concurrency = 30\n')
    (warning,) = warnings_for(tmp_path, text)
    assert "below the 70 deliveries" in warning
