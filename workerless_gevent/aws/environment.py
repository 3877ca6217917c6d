"""The region, endpoints and credentials when the environment alone says them, without botocore or a child.

With no profile and no AWS config or credentials file, botocore's chain ends at its first step (EnvProvider)
when static keys are in AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY; with no key variable, at its web identity
provider (EKS IRSA) when AWS_WEB_IDENTITY_TOKEN_FILE and AWS_ROLE_ARN are set. With no web identity variable and
no older credentials file (the EC2 tools', boto2's) either, it ends at its ContainerProvider (ECS task roles, EKS
Pod Identity) when AWS_CONTAINER_CREDENTIALS_RELATIVE_URI or _FULL_URI names an endpoint botocore accepts, and
otherwise, with no AWS_CONTAINER_* variable at all, at its last step, the InstanceMetadataProvider (an EC2
instance profile), unless AWS_EC2_METADATA_DISABLED=true. Then what the child would answer is read from the
environment, and the credentials are fetched by the daemon itself (aws.web_identity, aws.container,
aws.instance_metadata; on EC2 the region too, where no [aws] region, AWS_REGION or AWS_DEFAULT_REGION names one
and no ECS task metadata variable is set, as the region chain's last step): so the daemon never holds botocore's
session (about 30 MB in a second process) beside its own memory, neither at start nor at a renewal. Whatever
else (a profile, a config file, SSO, FIPS, keys that expire, a proxy, STS or IMDS settings we would read
differently, another service) goes to the child, which runs botocore's whole chain. tests/unit/test_environment_
resolution.py, test_web_identity_resolution.py and test_instance_metadata_resolution.py hold that to botocore.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from typing import TYPE_CHECKING

from .child import FrozenCredentials, Resolved

if TYPE_CHECKING:
    from ..config.model import AwsConfig
    from .renewal import FetchedResolution

# Each of these makes botocore's answer depend on more than the keys: a profile, expiring keys, endpoint
# variants, other data files. Their presence (even empty) sends the run to the child.
CHILD_VARIABLES = ("AWS_PROFILE", "AWS_DEFAULT_PROFILE", "AWS_CREDENTIAL_EXPIRATION", "AWS_USE_FIPS_ENDPOINT",
                   "AWS_USE_DUALSTACK_ENDPOINT", "AWS_IGNORE_CONFIGURED_ENDPOINT_URLS", "AWS_DATA_PATH")
SERVICE_VARIABLES = {"sqs": "AWS_ENDPOINT_URL_SQS", "lambda": "AWS_ENDPOINT_URL_LAMBDA",
                     "dynamodb": "AWS_ENDPOINT_URL_DYNAMODB"}
KEY_VARIABLES = ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_SECURITY_TOKEN")  # EnvProvider's
# What botocore's providers before the ContainerProvider read besides the AWS files (EnvProvider, web identity,
# the EC2 tools' file, boto2's config): any of them present (even empty), and the container is not for us to ask.
BEFORE_CONTAINER_VARIABLES = (*KEY_VARIABLES, "AWS_WEB_IDENTITY_TOKEN_FILE", "AWS_ROLE_ARN", "AWS_ROLE_SESSION_NAME",
                              "AWS_CREDENTIAL_FILE", "BOTO_CONFIG")
BOTO_FILES = ("/etc/boto.cfg", "~/.boto")  # BotoProvider's, without BOTO_CONFIG
ECS_METADATA_VARIABLES = ("ECS_CONTAINER_METADATA_URI_V4", "ECS_CONTAINER_METADATA_URI")  # aws.region.ecs_region's


def environment_suffices(env: Mapping[str, str]) -> bool:
    """True when botocore's chain would take its answer from these variables alone (the [aws] table may
    still send the run to the child: `resolve_from_environment`). Reads no module that opens a socket."""
    if credential_source(env) is None:
        return False
    if any(name in env for name in CHILD_VARIABLES):
        return False
    if any(name in env and not env[name] for name in ("AWS_ENDPOINT_URL", *SERVICE_VARIABLES.values())):
        return False  # an empty variable: botocore's reading of it is the child's to give
    # botocore merges the credentials file's profiles into the config's (a region there counts): neither may exist
    files = (env.get("AWS_CONFIG_FILE") or "~/.aws/config", env.get("AWS_SHARED_CREDENTIALS_FILE") or "~/.aws/credentials")
    return not any(os.path.exists(os.path.expanduser(path)) for path in files)


def credential_source(env: Mapping[str, str]) -> str | None:
    """Where botocore's chain ends when no profile and no AWS file exist: "keys" (EnvProvider), "web identity"
    (AssumeRoleWithWebIdentityProvider), "container" (ContainerProvider), "instance" (InstanceMetadataProvider, its
    last step), each with nothing before it able to answer; None where only the chain itself can tell."""
    if env.get("AWS_ACCESS_KEY_ID") and env.get("AWS_SECRET_ACCESS_KEY"):
        return "keys"
    from .container import FULL_URI, RELATIVE_URI, TOKEN_FILE, container_url
    from .instance_metadata import settings_of
    from .web_identity import ROLE_ARN
    from .web_identity import TOKEN_FILE as WEB_IDENTITY_TOKEN_FILE

    # Both set: that provider answers (fetching only when asked) before any after it, whatever they would say
    if env.get(WEB_IDENTITY_TOKEN_FILE) and env.get(ROLE_ARN) and not any(name in env for name in KEY_VARIABLES):
        return "web identity"
    if any(name in env for name in BEFORE_CONTAINER_VARIABLES) or TOKEN_FILE in env and not env[TOKEN_FILE]:
        return None
    if any(os.path.exists(os.path.expanduser(path)) for path in BOTO_FILES):
        return None
    if RELATIVE_URI in env or FULL_URI in env:  # even empty: botocore's ContainerProvider answers or fails
        return "container" if container_url(env) is not None else None
    if any(name.startswith("AWS_CONTAINER_") for name in env) or settings_of(env) is None:
        return None  # a container variable without its URI; IMDS disabled, or asked where we would not ask
    return "instance"


def resolve_from_environment(aws: AwsConfig, env: Mapping[str, str], origin: str,
                             services: tuple[str, ...]) -> Resolved | FetchedResolution | None:
    """What the child would answer (its credentials, and from EC2's metadata maybe its region, still to fetch
    from the endpoint: a FetchedResolution), or None where only botocore's chain can tell (the child then runs).
    ConfigError for a region botocore would refuse, as the child would raise it."""
    from .region import local_region

    if aws.profile is not None or not environment_suffices(env):
        return None
    if any(service not in SERVICE_VARIABLES for service in services):
        return None
    source, located = credential_source(env), local_region(aws, env, origin)
    if located is None:
        # The region chain's next steps: ECS task metadata (the child's), then EC2's, which we ask with IMDS's keys
        if source != "instance" or any(name in env for name in ECS_METADATA_VARIABLES):
            return None
        if not all(resolved_in(aws, env, services, ("us-east-1", "")).endpoints.values()):
            return None  # botocore's endpoint data could be overridden (~/.aws/models): the child's to read
        return instance_resolution(aws, env, services, None)
    resolved = resolved_in(aws, env, services, located)
    if not all(resolved.endpoints.values()):
        return None
    if source == "keys":
        token = env.get("AWS_SESSION_TOKEN") or env.get("AWS_SECURITY_TOKEN") or None
        return resolved._replace(credentials=FrozenCredentials(env["AWS_ACCESS_KEY_ID"], env["AWS_SECRET_ACCESS_KEY"],
                                                               token))
    if source == "container":
        return container_resolution(resolved, env)
    if source == "web identity":
        return web_identity_resolution(resolved, env)
    return instance_resolution(aws, env, services, resolved)


def resolved_in(aws: AwsConfig, env: Mapping[str, str], services: tuple[str, ...], located: tuple[str, str]) -> Resolved:
    """The answer in this region, without credentials; an endpoint only botocore can tell is None."""
    region, where = located
    endpoints: dict[str, str | None] = {}
    for service in services:
        url = aws.endpoint_url or env.get(SERVICE_VARIABLES[service]) or env.get("AWS_ENDPOINT_URL")
        endpoints[service] = url or partition_endpoint(service, region, env)
    return Resolved(region=region, where=where, endpoints=endpoints, ca_bundle=ca_bundle(aws, env),
                    credentials=None, expires_at=None)


def container_resolution(resolved: Resolved, env: Mapping[str, str]) -> FetchedResolution | None:
    """The container endpoint the daemon asks itself; None where botocore would ask it through a proxy."""
    from ..config.model import AwsConfig
    from ..wire.sqs import proxy_for
    from .container import ContainerEndpoint, container_url
    from .renewal import FetchedResolution

    url = container_url(env)
    if url is None or proxy_for(url) is not None:
        return None
    return FetchedResolution(lambda: resolved, ContainerEndpoint(url, env, ca_bundle(AwsConfig(), {})).fetch)


def web_identity_resolution(resolved: Resolved, env: Mapping[str, str]) -> FetchedResolution | None:
    """STS, asked by the daemon itself where botocore's client would ask it; None where botocore would ask it
    through a proxy or where only its client can tell which endpoint."""
    import random

    from ..config.model import AwsConfig
    from ..wire.sqs import proxy_for
    from .renewal import FetchedResolution
    from .web_identity import WebIdentity

    url = sts_url(env)
    bundles = [env[name] for name in ("AWS_CA_BUNDLE", "REQUESTS_CA_BUNDLE") if name in env]  # its client's verify
    if url is None or proxy_for(url) is not None or bundles and not bundles[0].strip():
        return None  # an empty bundle: botocore raises
    identity = WebIdentity(url, env, bundles[0] if bundles else ca_bundle(AwsConfig(), {}), random.Random())
    return FetchedResolution(lambda: resolved, identity.fetch)


def sts_url(env: Mapping[str, str]) -> str | None:
    """The endpoint of the STS client botocore's web identity provider creates first, in the session's region
    (AWS_DEFAULT_REGION only; none is aws-global); None where botocore would refuse or read differently."""
    from .region import REGION_NAME
    from .web_identity import CLIENT_VARIABLES, GLOBAL_URL, LEGACY_GLOBAL_REGIONS, is_endpoint_url

    if any(name in env for name in CLIENT_VARIABLES):
        return None
    configured = env.get("AWS_ENDPOINT_URL_STS", env.get("AWS_ENDPOINT_URL"))
    if configured is not None:
        return configured if is_endpoint_url(configured) else None
    region, mode = env.get("AWS_DEFAULT_REGION", "aws-global"), env.get("AWS_STS_REGIONAL_ENDPOINTS") or "regional"
    if not REGION_NAME.match(region) or mode not in ("regional", "legacy"):
        return None  # botocore raises
    if region == "aws-global" or mode == "legacy" and region in LEGACY_GLOBAL_REGIONS:
        return GLOBAL_URL
    return partition_endpoint("sts", region, env)


def instance_resolution(aws: AwsConfig, env: Mapping[str, str], services: tuple[str, ...],
                        resolved: Resolved | None) -> FetchedResolution | None:
    """EC2's metadata service, asked by the daemon itself (for the region too where `resolved` is None, as the
    region chain's last step); None where botocore would ask it through a proxy."""
    import random

    from ..errors import ConfigError
    from ..wire.sqs import proxy_for
    from .instance_metadata import InstanceMetadata, settings_of
    from .region import NO_REGION
    from .renewal import FetchedResolution

    settings = settings_of(env)
    if settings is None or proxy_for(settings.base_url) is not None:
        return None
    metadata = InstanceMetadata(settings, random.Random())

    def locate() -> Resolved:
        if resolved is not None:
            return resolved
        region = metadata.region()
        if region is None:  # the region chain's own error, as the child raises it
            raise ConfigError("workerless", "", NO_REGION)
        return resolved_in(aws, env, services, (region, "EC2 instance metadata"))

    return FetchedResolution(locate, metadata.fetch)


def partition_endpoint(service: str, region: str, env: Mapping[str, str]) -> str | None:
    """`https://<service>.<region>.<dnsSuffix>` from botocore's partitions data file, as session.service_endpoint
    reads it through botocore's loader; None if a customer data folder (~/.aws/models) could override it."""
    import importlib.util
    import re

    if os.path.exists(os.path.expanduser("~/.aws/models")):
        return None
    spec = importlib.util.find_spec("botocore")
    if spec is None or not spec.submodule_search_locations:
        return None
    path = os.path.join(list(spec.submodule_search_locations)[0], "data", "partitions.json")
    try:
        with open(path, encoding="utf-8") as handle:
            partitions = json.load(handle)["partitions"]
    except (OSError, ValueError, KeyError):
        return None
    chosen = next((p for p in partitions if re.match(p["regionRegex"], region)), partitions[0])
    return f"https://{service}.{region}.{chosen['outputs']['dnsSuffix']}"


def ca_bundle(aws: AwsConfig, env: Mapping[str, str]) -> str:
    """[aws] ca_bundle, AWS_CA_BUNDLE, then certifi's bundle or botocore's own (botocore.httpsession.get_cert_path)."""
    if aws.ca_bundle or env.get("AWS_CA_BUNDLE"):
        return str(aws.ca_bundle or env["AWS_CA_BUNDLE"])
    try:
        from certifi import where
    except ImportError:
        import importlib.util

        spec = importlib.util.find_spec("botocore")
        assert spec is not None and spec.submodule_search_locations
        return os.path.join(list(spec.submodule_search_locations)[0], "cacert.pem")
    return str(where())
