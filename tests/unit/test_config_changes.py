"""What a configuration re-read on SIGHUP changes (config/changes.py): which queues drain and restart,
which keys only a restart applies."""

from __future__ import annotations

from pathlib import Path

from tests.unit.config_files import write_config
from workerless_gevent.config.changes import Changes, compare
from workerless_gevent.config.loading import load_config
from workerless_gevent.config.model import Config

BASE = """concurrency = 4
[[queues]]
name = "payments"
[[queues]]
name = "emails"
target = "mail"
[targets.default]
type = "http"
url = "http://127.0.0.1:8080/"
[targets.mail]
type = "http"
url = "http://127.0.0.1:8081/"
"""


def load(tmp_path: Path, text: str) -> Config:
    return load_config(write_config(tmp_path, text), {}, {})


def changes(tmp_path: Path, edited: str) -> Changes:
    return compare(load(tmp_path, BASE), load(tmp_path, edited))


def test_the_same_file_changes_nothing(tmp_path: Path) -> None:
    assert changes(tmp_path, BASE) == Changes() and Changes().is_empty and Changes().summary() == "nothing"


def test_a_queue_key_restarts_that_queue_alone(tmp_path: Path) -> None:
    found = changes(tmp_path, BASE.replace('name = "emails"\n', 'name = "emails"\nvisibility_timeout = 60\n'))
    assert found == Changes(changed_queues=("emails",))
    assert found.summary() == "restarted=emails"


def test_a_target_change_restarts_every_queue_on_it(tmp_path: Path) -> None:
    found = changes(tmp_path, BASE.replace("8081/", "8082/"))
    assert found == Changes(changed_queues=("emails",), changed_targets=("mail",))


def test_queues_added_removed_and_reordered(tmp_path: Path) -> None:
    reordered = BASE.replace('[[queues]]\nname = "payments"\n', "") + '[[queues]]\nname = "payments"\n'
    assert changes(tmp_path, reordered) == Changes(is_reordered=True)
    added = BASE + '[[queues]]\nname = "reports"\n'
    assert changes(tmp_path, added) == Changes(added_queues=("reports",))
    removed = BASE.replace('[[queues]]\nname = "emails"\ntarget = "mail"\n', "")
    assert changes(tmp_path, removed) == Changes(removed_queues=("emails",))


def test_an_unused_target_changes_no_queue(tmp_path: Path) -> None:
    found = changes(tmp_path, BASE + '[targets.spare]\ntype = "http"\nurl = "http://127.0.0.1:9/"\n')
    assert found == Changes(changed_targets=("spare",))


def test_concurrency_and_polling_are_global(tmp_path: Path) -> None:
    assert changes(tmp_path, BASE.replace("concurrency = 4", "concurrency = 8")).is_global
    assert changes(tmp_path, BASE + "[polling]\nstrategy = \"weighted\"\n").is_global


def test_restart_only_keys_are_named(tmp_path: Path) -> None:
    """The reload refuses them whole (lifecycle/reload.py): none is read and left unapplied."""
    running = load(tmp_path, BASE)
    loaded = load(tmp_path, 'name = "prod"\nshutdown_timeout = 5\n' + BASE + '[status]\nlisten = "9100"\n'
                  '[aws]\nregion = "eu-west-1"\n[tracing]\nexporter = "otlp"\n')
    found = compare(running, loaded)
    assert found.restart_only == ("name", "[status] listen", "[aws]", "[tracing]")
    assert found.settings == ("shutdown_timeout",)
    assert changes(tmp_path, BASE + "[metrics]\ninterval = 5\n").restart_only == ("[metrics] interval",)
    assert changes(tmp_path, "drain = true\n" + BASE).restart_only == ("drain",)


KEYED = BASE.replace('name = "payments"\n', 'name = "payments"\nidempotency_key = "message_id"\n')


def test_idempotency_added_restarts_the_queue_that_gets_a_key(tmp_path: Path) -> None:
    for edited in (KEYED, KEYED + '[idempotency]\ntable = "keys"\n'):  # the first key brings the defaults
        found = changes(tmp_path, edited)
        assert found == Changes(changed_queues=("payments",), is_idempotency=True), edited
        assert found.summary() == "restarted=payments [idempotency] changed" and not found.restart_only


def test_an_idempotency_change_restarts_every_queue_with_a_key_and_no_other(tmp_path: Path) -> None:
    running = load(tmp_path, KEYED)
    found = compare(running, load(tmp_path, KEYED + '[idempotency]\nexpires_after = 120\n'))
    assert found == Changes(changed_queues=("payments",), is_idempotency=True)
    removed = compare(running, load(tmp_path, BASE))  # the last key goes, and the defaults with it
    assert removed == Changes(changed_queues=("payments",), is_idempotency=True)
    moved = compare(running, load(tmp_path, BASE.replace('name = "emails"\n',
                                                         'name = "emails"\nidempotency_key = "message_id"\n')))
    assert moved == Changes(changed_queues=("payments", "emails"))  # the same [idempotency]: no new table
