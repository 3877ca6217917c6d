"""How `workerless` with no command starts the daemon: on the wire's own clients where the environment or the
credentials child resolved region, endpoints and credentials (no botocore), else on a botocore session's."""

from __future__ import annotations

import logging
import random
import sys
from collections.abc import Callable, Mapping
from typing import Any

from ..aws.session import open_session
from ..config.model import Config, wire_services
from ..errors import ExitStatus, StartupError
from ..logs import configure_logging

logger = logging.getLogger("workerless_gevent.commands.cli")  # the lines it logs keep the name they have always had


def runs_on_the_wire_alone(config: Config) -> bool:
    """No botocore client needed (aws.child): no CloudWatch metrics, no DynamoDB claims or fleet, no S3 payloads."""
    claims = config.fleet is not None or (config.periodic is not None and bool(config.periodic.claims_table))
    large_payloads = any(queue.large_payloads for queue in config.queues)  # an S3 client
    return not config.name and not claims and not large_payloads


def run_with_child(config: Config, env: Mapping[str, str], early: Any = None,
                   reload: Callable[[], Config] | None = None) -> int:
    """The daemon with region, endpoint and credentials from the environment alone (`aws.environment`, with a
    container endpoint's or EC2 instance metadata's credentials fetched here: `aws.container`,
    `aws.instance_metadata`) or from `aws.child`, which runs while this process imports the rest of itself. Where the wire cannot follow botocore (a proxy, FIPS or dual-stack
    endpoints), the daemon resolves in-process as before. ConfigError goes up (exit 2)."""
    from ..aws.child import ChildResolution, Resolved
    from ..aws.environment import resolve_from_environment
    from ..aws.renewal import RenewingCredentials, fetch_for
    from ..wire.sqs import proxy_for

    services = wire_services(config)
    asked = tuple(dict.fromkeys([*services, "dynamodb"]))  # DynamoDB's too: a reload may add [idempotency]
    if early is not None:
        early.ask(config.aws, config.source, asked)
    resolution = early or resolve_from_environment(config.aws, env, config.source, asked) \
        or ChildResolution(config.aws, config.source, asked)
    from ..aws.clients import Clients, build_lambda_wire, build_sqs_wire
    from ..aws.lambda_endpoints import lambda_endpoint_builder
    from ..lifecycle.daemon import Daemon  # noqa: F401  (imported while the child works)

    try:
        resolved = resolution if isinstance(resolution, Resolved) else resolution.result()
    except StartupError as error:
        configure_logging(config.log_format, config.log_level)
        print(f"workerless: cannot start: {error}", file=sys.stderr)
        return ExitStatus.ERROR
    urls = [resolved.endpoints.get(service) for service in services]
    if not all(urls) or any(proxy_for(url) for url in urls if url):
        return run(config, *open_session(config.aws, env, config.source), reload=reload)
    credentials = RenewingCredentials(resolved.credentials, resolved.expires_at,
                                      fetch_for(resolution, config.aws, config.source))
    signing = credentials if resolved.credentials else None
    region, ca_bundle = resolved.region, resolved.ca_bundle
    lambda_url, dynamodb_url = resolved.endpoints.get("lambda"), resolved.endpoints.get("dynamodb")
    clients = Clients(sqs=build_sqs_wire(config, region, urls[0] or "", signing, ca_bundle),
                      lambda_=build_lambda_wire(config, region, lambda_url, signing, ca_bundle) if lambda_url else None,
                      cloudwatch=None, region=region,
                      **idempotency_wires(config, region, dynamodb_url, signing, ca_bundle),
                      renew_credentials=credentials.run if resolved.expires_at is not None else None,
                      build_lambda_endpoint=lambda_endpoint_builder(region, signing, ca_bundle, config.concurrency))
    return run(config, None, resolved.region, resolved.where, clients, reload)


def idempotency_wires(config: Config, region: str, url: str | None, credentials: Any,
                      ca_bundle: str) -> dict[str, Any]:
    """The Clients' `idempotency` (with [idempotency]) and `build_idempotency`, for a reload that adds it (None
    where the wire cannot go: only a restart can add it then)."""
    from ..aws.clients import build_dynamodb_wire
    from ..wire.sqs import proxy_for

    if not url or proxy_for(url):
        return {}
    endpoint: str = url

    def build(reloaded: Config) -> Any:
        return build_dynamodb_wire(reloaded, region, endpoint, credentials, ca_bundle)

    return {"idempotency": build(config) if config.idempotency else None, "build_idempotency": build}


def run(config: Config, session: Any, region: str, where: str, clients: Any = None,
        reload: Callable[[], Config] | None = None) -> int:
    """The daemon on `clients` (aws.Clients), or on clients built from `session`; `reload` reads the
    configuration again (SIGHUP)."""
    from ..aws.clients import build_clients
    from ..lifecycle.daemon import Daemon
    from ..metrics import Registry

    configure_logging(config.log_format, config.log_level)
    try:
        clients = clients or build_clients(config, region, session)
        # Resolving every queue at construction doubles as the credentials and endpoint check.
        daemon = Daemon(config, clients, Registry(), random.Random(), reload)
    except StartupError as error:
        print(f"workerless: cannot start: {error}", file=sys.stderr)
        return ExitStatus.ERROR
    logger.info("region: %s (from %s)", region, where)
    try:
        return daemon.run()
    except Exception:
        logger.critical("the daemon failed", exc_info=True)
        return ExitStatus.ERROR
