"""botocore's session and what the daemon reads from it: the profile's config, the CA bundle, endpoints.

Shared by every command and by `aws.child`, so all build their session and trust CAs the same way.
It imports nothing of gevent or of the wire: the child process that resolves credentials loads only
this, the config and the region chain, beside botocore.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import botocore.session

    from ..config.model import AwsConfig


def build_session(profile: str | None) -> botocore.session.Session:
    """The session of a command: [aws] profile, else AWS_PROFILE; credentials from botocore's chain.

    botocore's session, not boto3's: boto3 wraps it with nothing the daemon uses, for 2 MB and 15 ms of
    imports (s3transfer, multiprocessing). An unknown profile or an unreadable config file fails here,
    as boto3's session would."""
    import botocore.session

    session = botocore.session.Session(profile=profile)
    session.get_scoped_config()
    return session


def trusted_ca_bundle(configured: str | None, session: botocore.session.Session) -> str:
    """[aws] ca_bundle, then AWS_CA_BUNDLE (or the profile's ca_bundle), then botocore's own bundle."""
    from botocore.httpsession import get_cert_path

    return str(configured or session.get_config_variable("ca_bundle") or get_cert_path(True))


def service_endpoint(core: botocore.session.Session, service: str, region: str, configured: str | None) -> str | None:
    """The endpoint URL a botocore client of `service` would use in `region`, or None where only a client can
    tell: [aws] endpoint_url, then AWS_ENDPOINT_URL_<SERVICE>, AWS_ENDPOINT_URL and the profile's endpoint_url
    (botocore's own lookup), then `https://<service>.<region>.<dnsSuffix>` of the region's partition
    (aws, aws-cn, aws-us-gov, ...) from botocore's small partitions data; tests/unit/test_service_endpoint.py
    holds it to what botocore's clients resolve for every region botocore knows."""
    if configured:
        return configured
    from botocore.configprovider import ConfiguredEndpointProvider

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


def open_session(aws: AwsConfig, env: Mapping[str, str], origin: str,
                 session: botocore.session.Session | None = None) -> tuple[Any, str, str]:
    """The botocore session, region and the region's source for every command (and aws.child); no silent
    default region, and botocore's refusals of the AWS config files as one line (ConfigError, exit 2)."""
    import botocore.exceptions

    from ..errors import ConfigError
    from .region import resolve_region

    try:
        session = session or build_session(aws.profile)
    except botocore.exceptions.ConfigParseError as error:
        path = str(error.kwargs.get("path", "AWS config file"))
        raise ConfigError(path, "", "cannot parse this AWS config file") from None
    except botocore.exceptions.ProfileNotFound:
        problem = "names a profile that is not in the AWS config files"
        if aws.profile:
            raise ConfigError(origin, "aws.profile", problem, aws.profile) from None
        variable = "AWS_PROFILE" if env.get("AWS_PROFILE") else "AWS_DEFAULT_PROFILE"
        raise ConfigError(variable, "", problem, env.get(variable, "")) from None
    return (session, *resolve_region(aws, env, session, origin))
