"""AWS clients, built once before anything is spawned, with explicit timeouts and retries: our own wire for
SQS, botocore clients for the rest, all on one botocore session (boto3 adds nothing the daemon uses)."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

import botocore.config
import botocore.exceptions
import botocore.session
from botocore.configprovider import ConfiguredEndpointProvider
from botocore.httpsession import get_cert_path

from .config import Config, LambdaTargetConfig
from .sqs_wire import SqsWire, proxy_for

AWS_ERRORS = (botocore.exceptions.BotoCoreError, botocore.exceptions.ClientError)


@dataclass(frozen=True, slots=True)
class Clients:
    sqs: Any  # every SQS call of the daemon: an sqs_wire.SqsWire, or the boto3 client where the wire cannot go
    lambda_: Any | None
    cloudwatch: Any | None
    region: str
    dynamodb: Any | None = None  # only with a [periodic] claims_table


def build_clients(config: Config, region: str | None = None, session: botocore.session.Session | None = None) -> Clients:
    """One session (the one the CLI resolved the region with, `region.resolve_region`), one client per
    service in that region; boto3's chain supplies credentials and endpoints.

    SQS goes on our own wire, whose endpoint is worked out without building a botocore client: a client
    loads botocore's endpoint data (about 7 MB resident and 60 ms). Only where the wire cannot follow
    botocore (a proxy, FIPS or dual-stack endpoints) is the boto3 client built instead."""
    session = session or build_session(config.aws.profile)
    region = region or default_region(config, session)
    endpoint: dict[str, Any] = {"endpoint_url": config.aws.endpoint_url} if config.aws.endpoint_url else {}
    # botocore's trust for every client and the wire alike; never the system store alone, which a slim
    # container may not have.
    ca_bundle = trusted_ca_bundle(config.aws.ca_bundle, session)
    endpoint["verify"] = ca_bundle
    sqs_pool = config.concurrency + len(config.queues) * 2 + 10
    sqs_read_timeout = max(config.polling.poll_for + 10, 30)
    sqs_url = service_endpoint(session, "sqs", region, config.aws.endpoint_url)
    sqs: Any
    if sqs_url is not None and proxy_for(sqs_url) is None:
        sqs = SqsWire(sqs_url, region, session.get_credentials(), concurrency=sqs_pool,
                      read_timeout=sqs_read_timeout, connect_timeout=5, ca_bundle=ca_bundle)
    else:  # botocore's proxy support and its FIPS/dual-stack endpoints are not repeated on the wire
        sqs = session.create_client(
            "sqs",
            region_name=region,
            config=botocore.config.Config(
                max_pool_connections=sqs_pool,
                connect_timeout=5,
                read_timeout=sqs_read_timeout,
                tcp_keepalive=True,
                retries={"mode": "standard", "total_max_attempts": 3},
            ),
            **endpoint,
        )
    lambda_timeouts = [t.timeout for t in config.targets.values() if isinstance(t, LambdaTargetConfig)]
    lambda_ = None
    if lambda_timeouts:
        lambda_ = session.create_client(
            "lambda",
            region_name=region,
            config=botocore.config.Config(
                max_pool_connections=config.concurrency + 10,
                connect_timeout=5,
                read_timeout=max(lambda_timeouts) + 10,
                tcp_keepalive=True,
                retries={"mode": "standard", "total_max_attempts": 1},
            ),
            **endpoint,
        )
    cloudwatch = None
    if config.name:
        cloudwatch = session.create_client(
            "cloudwatch",
            region_name=region,
            config=botocore.config.Config(
                connect_timeout=5, read_timeout=10, retries={"mode": "standard", "total_max_attempts": 3}
            ),
            **endpoint,
        )
    dynamodb = None
    if config.periodic is not None and config.periodic.claims_table:
        dynamodb = session.create_client(
            "dynamodb",
            region_name=region,
            config=botocore.config.Config(
                connect_timeout=5, read_timeout=10, retries={"mode": "standard", "total_max_attempts": 3}
            ),
            **endpoint,
        )
    return Clients(sqs=sqs, lambda_=lambda_, cloudwatch=cloudwatch, region=region, dynamodb=dynamodb)


def error_code(error: BaseException) -> str:
    """The AWS error code of a botocore error, or the exception's class name."""
    if isinstance(error, botocore.exceptions.ClientError):
        return str(error.response.get("Error", {}).get("Code", "ClientError"))
    return type(error).__name__


def describe_error(error: BaseException) -> str:
    """One line for logs: the code and the message, never a traceback."""
    if isinstance(error, botocore.exceptions.ClientError):
        detail = error.response.get("Error", {})
        return f"{detail.get('Code', 'ClientError')}: {detail.get('Message', '')}".strip()
    return f"{type(error).__name__}: {error}"


# Shared with `workerless send`, so every command builds its session and trusts CAs the same way.


def build_session(profile: str | None) -> botocore.session.Session:
    """The session of a command: [aws] profile, else AWS_PROFILE; credentials from botocore's chain.

    botocore's session, not boto3's: boto3 wraps it with nothing the daemon uses, for 2 MB and 15 ms of
    imports (s3transfer, multiprocessing). An unknown profile or an unreadable config file fails here,
    as boto3's session would."""
    session = botocore.session.Session(profile=profile)
    session.get_scoped_config()
    return session


def trusted_ca_bundle(configured: str | None, session: botocore.session.Session) -> str:
    """[aws] ca_bundle, then AWS_CA_BUNDLE (or the profile's ca_bundle), then botocore's own bundle."""
    return str(configured or session.get_config_variable("ca_bundle") or get_cert_path(True))


def service_endpoint(core: botocore.session.Session, service: str, region: str, configured: str | None) -> str | None:
    """The endpoint URL a botocore client of `service` would use in `region`, or None where only a client can
    tell: [aws] endpoint_url, then AWS_ENDPOINT_URL_<SERVICE>, AWS_ENDPOINT_URL and the profile's endpoint_url
    (botocore's own lookup), then `https://<service>.<region>.<dnsSuffix>` of the region's partition
    (aws, aws-cn, aws-us-gov, ...) from botocore's small partitions data; tests/unit/test_service_endpoint.py
    holds it to what botocore's clients resolve for every region botocore knows."""
    if configured:
        return configured
    if not core.get_config_variable("ignore_configured_endpoint_urls"):
        url = ConfiguredEndpointProvider(full_config=core.full_config, scoped_config=core.get_scoped_config(),
                                         client_name=service).provide()
        if url:
            return str(url)
    if core.get_config_variable("use_fips_endpoint") or core.get_config_variable("use_dualstack_endpoint"):
        return None
    partitions = core.get_component("data_loader").load_data("partitions")["partitions"]
    # The first partition whose pattern matches the region, else the first (aws): what botocore's clients resolve.
    chosen = next((p for p in partitions if re.match(p["regionRegex"], region)),
                  partitions[0])
    return f"https://{service}.{region}.{chosen['outputs']['dnsSuffix']}"


def default_region(config: Config, session: botocore.session.Session) -> str:
    """The region chain on this process's environment, for callers that did not resolve one first."""
    import os

    from .region import resolve_region

    return resolve_region(config.aws, os.environ, session, config.source)[0]
