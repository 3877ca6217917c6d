"""Temporary credentials for the wire's signers, renewed before they expire: one loop, whatever fetches them
(a new credentials child, `aws.child.fetch_by_child`; STS AssumeRoleWithWebIdentity, `aws.web_identity`; the
container endpoint, `aws.container`; EC2's instance metadata service, `aws.instance_metadata`).

A renewal is due 15 minutes before the expiry (botocore's advisory window), then every 30 s while it fails;
the current credentials stay in use meanwhile.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from .child import FrozenCredentials, Resolved

if TYPE_CHECKING:
    import gevent.event

    from ..config.model import AwsConfig

logger = logging.getLogger(__name__)

RENEW_BEFORE_SECONDS = 15 * 60  # botocore's advisory refresh window
RETRY_SECONDS = 30.0

# New credentials and their expiry (epoch seconds, None: they never expire); StartupError or ConfigError if none.
Fetch = Callable[[], tuple[FrozenCredentials, "float | None"]]


class RenewingCredentials:
    """Credentials for `sigv4.Signer`, replaced by what `fetch` answers before they expire."""

    def __init__(self, frozen: FrozenCredentials | None, expires_at: float | None, fetch: Fetch) -> None:
        self.frozen, self.expires_at = frozen, expires_at
        self.fetch = fetch
        self.renewals = 0

    def get_frozen_credentials(self) -> FrozenCredentials | None:
        return self.frozen

    def next_renewal(self, now: float) -> float | None:
        """Seconds until the next renewal is due; None if these credentials never expire."""
        if self.expires_at is None:
            return None
        return max(0.0, self.expires_at - RENEW_BEFORE_SECONDS - now)

    def renew(self) -> None:
        self.frozen, self.expires_at = self.fetch()
        self.renewals += 1
        logger.info("AWS credentials renewed%s", "" if self.expires_at is None else
                    f"; they expire in {(self.expires_at - time.time()) / 60:.0f} min")

    def run(self, stopped: gevent.event.Event) -> None:
        """The renewal loop (supervised by the daemon, so it returns only once `stopped` is set)."""
        from ..errors import ConfigError, StartupError

        while not stopped.is_set():
            due = self.next_renewal(time.time())
            if stopped.wait(due):  # None: credentials that never expire wait for the stop
                return
            try:
                self.renew()
            except (StartupError, ConfigError) as error:
                left = (self.expires_at or 0) - time.time()
                logger.warning("AWS credentials not renewed (%s); they expire in %.0f s; trying again in %.0f s",
                               error, left, RETRY_SECONDS)
                stopped.wait(RETRY_SECONDS)
                continue
            if self.next_renewal(time.time()) == 0:
                # The source handed out keys already inside the window (IMDS does in the last minutes before it
                # rotates them): asking again at once would only get them again, in a loop.
                stopped.wait(RETRY_SECONDS)


class FetchedResolution:
    """The environment's answer with the credentials still to fetch by the daemon itself (`fetch`, which also
    renews them) and, from EC2's metadata, maybe the region (`locate`): `result` fetches both, as the child's
    resolutions answer, so start-up waits for them in one place."""

    def __init__(self, locate: Callable[[], Resolved], fetch: Fetch) -> None:
        self.locate, self.fetch = locate, fetch

    def result(self) -> Resolved:
        resolved = self.locate()  # first, as the child resolves the region before the credentials
        frozen, expires_at = self.fetch()
        return resolved._replace(credentials=frozen, expires_at=expires_at)


def fetch_for(resolution: Any, aws: AwsConfig, origin: str) -> Fetch:
    """Renew where the credentials came from: the endpoint (or STS) the daemon asked, else a new child."""
    import functools

    from .child import fetch_by_child

    if isinstance(resolution, FetchedResolution):
        return resolution.fetch
    return functools.partial(fetch_by_child, aws, origin)
