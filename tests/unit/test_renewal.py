"""aws.renewal's loop on a fetch that answers at once: when it is due, and that keys handed out already inside
the renewal window (an IMDS about to rotate them) do not make it ask again in a loop."""

from __future__ import annotations

import time

import gevent
import gevent.event

from tests.support import wait_until
from workerless_gevent.aws.child import FrozenCredentials
from workerless_gevent.aws.renewal import RENEW_BEFORE_SECONDS, RenewingCredentials

KEYS = FrozenCredentials("ASIAOLD", "secret", "token")


def test_a_renewal_is_due_in_the_advisory_window_and_never_for_keys_that_do_not_expire() -> None:
    now = time.time()
    assert RenewingCredentials(KEYS, now + RENEW_BEFORE_SECONDS + 60, lambda: (KEYS, None)).next_renewal(now) == 60
    assert RenewingCredentials(KEYS, now + 60, lambda: (KEYS, None)).next_renewal(now) == 0
    assert RenewingCredentials(KEYS, None, lambda: (KEYS, None)).next_renewal(now) is None


def test_keys_already_due_when_renewed_are_not_asked_for_again_at_once() -> None:
    calls: list[float] = []

    def fetch() -> tuple[FrozenCredentials, float | None]:
        calls.append(time.monotonic())
        gevent.sleep(0)  # lets the test see a loop that would ask again and again
        return FrozenCredentials(f"ASIA{len(calls)}", "secret", "token"), time.time() + 60  # inside the window

    credentials = RenewingCredentials(KEYS, time.time() + 60, fetch)
    stopped = gevent.event.Event()
    loop = gevent.spawn(credentials.run, stopped)
    wait_until(lambda: credentials.renewals == 1, 5, message="never renewed")
    for _ in range(20):
        gevent.sleep(0)  # yields to the loop: no fixed wait, only turns of the hub
    stopped.set()
    loop.join(timeout=5)
    assert loop.dead and len(calls) == 1 and credentials.get_frozen_credentials() == ("ASIA1", "secret", "token")
