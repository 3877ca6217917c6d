"""boto3 clients, built once before anything is spawned, with explicit timeouts and retries."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import boto3
import botocore.config
import botocore.exceptions
from botocore.httpsession import get_cert_path

from .config import Config, LambdaTargetConfig
from .lambda_wire import LambdaWire
from .sqs_wire import SqsWire, proxy_for

AWS_ERRORS = (botocore.exceptions.BotoCoreError, botocore.exceptions.ClientError)


@dataclass(frozen=True, slots=True)
class Clients:
    sqs: Any
    lambda_: Any | None
    cloudwatch: Any | None
    region: str
    dynamodb: Any | None = None  # only with a [periodic] claims_table
    sqs_wire: SqsWire | None = None  # the hot SQS calls without botocore's client (None: use `sqs`)
    lambda_wire: LambdaWire | None = None  # Invoke without botocore's client (None: use `lambda_`)


def build_clients(config: Config, region: str | None = None, session: boto3.session.Session | None = None) -> Clients:
    """One session (the one the CLI resolved the region with, `region.resolve_region`), one client per
    service in that region; boto3's chain supplies credentials and endpoints."""
    session = session or build_session(config.aws.profile)
    region = region or default_region(config, session)
    endpoint: dict[str, Any] = {"endpoint_url": config.aws.endpoint_url} if config.aws.endpoint_url else {}
    # botocore's trust for every client and the wire alike; never the system store alone, which a slim
    # container may not have.
    ca_bundle = trusted_ca_bundle(config.aws.ca_bundle, session)
    endpoint["verify"] = ca_bundle
    sqs_pool = config.concurrency + len(config.queues) * 2 + 10
    sqs_read_timeout = max(config.polling.poll_for + 10, 30)
    sqs = session.client(
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
    # Receive, delete and visibility batches go on the wire, on the endpoint, region and credentials
    # the client resolved; botocore's proxy support is not repeated there, so behind a proxy they stay on it.
    sqs_wire = None
    if proxy_for(sqs.meta.endpoint_url) is None:
        sqs_wire = SqsWire.for_client(sqs, session.get_credentials(), concurrency=sqs_pool,
                                      read_timeout=sqs_read_timeout, connect_timeout=5,
                                      ca_bundle=ca_bundle)
    lambda_timeouts = [t.timeout for t in config.targets.values() if isinstance(t, LambdaTargetConfig)]
    lambda_ = lambda_wire = None
    if lambda_timeouts:
        lambda_ = session.client(
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
        # Invokes go on the wire too, with the same limits, unless a proxy is in the way (as for SQS).
        if proxy_for(lambda_.meta.endpoint_url) is None:
            lambda_wire = LambdaWire.for_client(lambda_, session.get_credentials(), concurrency=config.concurrency + 10,
                                                read_timeout=max(lambda_timeouts) + 10, connect_timeout=5,
                                                ca_bundle=ca_bundle)
    cloudwatch = None
    if config.name:
        cloudwatch = session.client(
            "cloudwatch",
            region_name=region,
            config=botocore.config.Config(
                connect_timeout=5, read_timeout=10, retries={"mode": "standard", "total_max_attempts": 3}
            ),
            **endpoint,
        )
    dynamodb = None
    if config.periodic is not None and config.periodic.claims_table:
        dynamodb = session.client(
            "dynamodb",
            region_name=region,
            config=botocore.config.Config(
                connect_timeout=5, read_timeout=10, retries={"mode": "standard", "total_max_attempts": 3}
            ),
            **endpoint,
        )
    return Clients(sqs=sqs, lambda_=lambda_, cloudwatch=cloudwatch, region=region, dynamodb=dynamodb,
                   sqs_wire=sqs_wire, lambda_wire=lambda_wire)


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


def build_session(profile: str | None) -> boto3.session.Session:
    """The session of a command: [aws] profile, else AWS_PROFILE; credentials from boto3's chain."""
    return boto3.session.Session(profile_name=profile)


def trusted_ca_bundle(configured: str | None, session: boto3.session.Session) -> str:
    """[aws] ca_bundle, then AWS_CA_BUNDLE (or the profile's ca_bundle), then botocore's own bundle."""
    return str(configured or session._session.get_config_variable("ca_bundle") or get_cert_path(True))


def default_region(config: Config, session: boto3.session.Session) -> str:
    """The region chain on this process's environment, for callers that did not resolve one first."""
    import os

    from .region import resolve_region

    return resolve_region(config.aws, os.environ, session, config.source)[0]
