"""The region, the endpoints and the credentials, resolved by botocore in a child process.

botocore's session (its credential chain, config files and endpoint rules) costs the daemon about 14 MB
of memory and a third of its start-up, and the daemon needs none of it once it knows where SQS is
and what to sign with: every SQS call and Lambda Invoke goes on our own wire. So when no botocore client is needed (no
CloudWatch metrics, no DynamoDB claims, no FIPS or dual-stack endpoint, no proxy),
`workerless` asks a child, `python -m workerless_gevent.aws.child`, to run exactly what the daemon would
have run itself: the region chain (`region.resolve_region`), the endpoint (`aws.service_endpoint`),
the CA bundle and botocore's credential chain ([aws] profile, AWS_PROFILE, the environment, config and
credentials files, SSO, assume-role, web identity, ECS and EC2 metadata, credential_process). The
child prints one JSON line and exits. No child runs at all when the environment alone answers (aws.environment):
static keys, or web identity (STS, aws.web_identity), a container endpoint (aws.container) or EC2's instance
metadata (aws.instance_metadata) asked here.
The daemon starts it first thing (`EarlyResolution`): the child
imports botocore while the daemon patches gevent and loads its configuration, then gets the request.

Temporary credentials the child found are renewed the same way, by a new child (`fetch_by_child`, run by
aws.renewal's loop 15 minutes before they expire, then every 30 s while that fails; the current ones stay in
use meanwhile).
"""

from __future__ import annotations

# Only what the entry function may import before gevent patches the standard library: no socket, ssl,
# threading or subprocess here (they are imported where used, once patched).
import json
import os
import sys
import time
from typing import TYPE_CHECKING, Any, NamedTuple

if TYPE_CHECKING:
    from ..config.model import AwsConfig

CHILD_TIMEOUT_SECONDS = 120.0  # SSO, assume-role with a slow STS, IMDS retries: generous, never unbounded


class FrozenCredentials(NamedTuple):
    """What `sigv4.Signer` reads, as botocore's ReadOnlyCredentials."""

    access_key: str
    secret_key: str
    token: str | None


class Resolved(NamedTuple):
    region: str
    where: str  # where the region came from
    endpoints: dict[str, str | None]  # service -> URL; None where only a botocore client can tell
    ca_bundle: str
    credentials: FrozenCredentials | None  # None: botocore found none
    expires_at: float | None  # epoch seconds; None for credentials that do not expire


def child_command(*arguments: str) -> tuple[list[str], dict[str, str]]:
    """The child's command line and environment: this interpreter, this copy of the package."""
    package_root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # holds the package
    path = os.pathsep.join(filter(None, (package_root, os.environ.get("PYTHONPATH"))))
    # -P: the working directory stays off sys.path, so another copy of the package there is not the one run
    return [sys.executable, "-P", "-m", "workerless_gevent.aws.child", *arguments], {**os.environ, "PYTHONPATH": path}


def parse_answer(text: str, status: object) -> Resolved:
    """The child's JSON line as Resolved; ConfigError for what botocore refused in the configuration,
    StartupError otherwise."""
    from ..errors import ConfigError, StartupError

    try:
        answer = json.loads(text.strip().splitlines()[-1])
    except (ValueError, IndexError):
        raise StartupError(f"resolving region and credentials failed (exit status {status})") from None
    if "config_error" in answer:
        raise ConfigError(*answer["config_error"])
    if "error" in answer:
        raise StartupError(answer["error"])
    found = answer["credentials"]
    return Resolved(region=answer["region"], where=answer["where"], endpoints=answer["endpoints"],
                    ca_bundle=answer["ca_bundle"], credentials=FrozenCredentials(*found) if found else None,
                    expires_at=answer["expires_at"])


class EarlyResolution:
    """The child started first thing, before gevent is patched (so with posix_spawn and two pipes, not the
    subprocess module that gevent patches next). It imports botocore while the daemon patches gevent and
    loads its configuration, then waits for the request on its stdin (`ask`); closing that pipe without
    a request (`discard`: another command, or a run that resolves in-process) ends it."""

    def __init__(self) -> None:
        command, env = child_command("--stdin")
        request_read, self.requests = os.pipe()
        self.answers, answer_write = os.pipe()
        actions = [(os.POSIX_SPAWN_DUP2, request_read, 0), (os.POSIX_SPAWN_DUP2, answer_write, 1)]
        self.pid = os.posix_spawn(command[0], command, env, file_actions=actions)  # other pipe ends: close-on-exec
        os.close(request_read)
        os.close(answer_write)

    def ask(self, aws: AwsConfig, origin: str, services: tuple[str, ...]) -> None:
        os.write(self.requests, (json.dumps(request_of(aws, origin, services)) + "\n").encode())  # < a pipe's buffer
        self.close_requests()

    def close_requests(self) -> None:
        if self.requests >= 0:
            os.close(self.requests)
            self.requests = -1

    def result(self, timeout: float = CHILD_TIMEOUT_SECONDS) -> Resolved:
        import select  # gevent's once patched: waiting here lets nothing else starve

        from ..errors import StartupError

        deadline, chunks = time.monotonic() + timeout, []
        try:
            while True:
                left = deadline - time.monotonic()
                if left <= 0 or not select.select([self.answers], [], [], left)[0]:
                    self.discard()
                    raise StartupError(f"resolving region and credentials took more than {timeout:.0f}s")
                chunk = os.read(self.answers, 65536)
                if not chunk:
                    break
                chunks.append(chunk)
        finally:
            os.close(self.answers)
            self.answers = -1
        _, status = os.waitpid(self.pid, 0)
        self.pid = 0
        return parse_answer(b"".join(chunks).decode("utf-8", "replace"), os.waitstatus_to_exitcode(status))

    def discard(self) -> None:
        """Not needed (after all): close its pipes, stop it and reap it."""
        self.close_requests()
        if self.answers >= 0:
            os.close(self.answers)
            self.answers = -1
        if self.pid:
            try:
                os.kill(self.pid, 9)
                os.waitpid(self.pid, 0)
            except (ProcessLookupError, ChildProcessError):
                pass
            self.pid = 0


def request_of(aws: AwsConfig, origin: str, services: tuple[str, ...]) -> dict[str, Any]:
    return {"profile": aws.profile, "region": aws.region, "endpoint_url": aws.endpoint_url,
            "ca_bundle": aws.ca_bundle, "origin": origin, "services": list(services)}


class ChildResolution:
    """One run of the child once gevent is patched (credential renewals); `result()` waits for it."""

    def __init__(self, aws: AwsConfig, origin: str, services: tuple[str, ...] = ("sqs",)) -> None:
        command, env = child_command(json.dumps(request_of(aws, origin, services)))
        import subprocess

        self.process = subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, env=env)

    def result(self, timeout: float = CHILD_TIMEOUT_SECONDS) -> Resolved:
        """The answer; ConfigError for what botocore refused in the configuration, StartupError otherwise."""
        import subprocess

        from ..errors import StartupError

        try:
            out, _ = self.process.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.communicate()
            raise StartupError(f"resolving region and credentials took more than {timeout:.0f}s") from None
        return parse_answer(out.decode("utf-8", "replace"), self.process.returncode)


def fetch_by_child(aws: AwsConfig, origin: str) -> tuple[FrozenCredentials, float | None]:
    """Renewed credentials from a new child (`aws.renewal`'s fetch where botocore's chain found them)."""
    from ..errors import StartupError

    resolved = ChildResolution(aws, origin, ()).result()
    if resolved.credentials is None:
        raise StartupError("botocore's credential chain found no credentials")
    return resolved.credentials, resolved.expires_at


if __name__ == "__main__":  # python -m workerless_gevent.aws.child: the child's own side is aws.child_answer
    import logging

    from .child_answer import child_main, exit_at_once

    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    exit_at_once(child_main(sys.argv[1:]))
