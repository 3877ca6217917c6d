"""The region, endpoints and credentials when the environment alone says them, without botocore or a child.

With no profile and no AWS config or credentials file, botocore's chain ends at its first step (EnvProvider)
when static keys are in AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, and at its ContainerProvider (ECS task
roles, EKS Pod Identity) when no key variable, no web identity variable and no older credentials file (the EC2
tools', boto2's) is there and AWS_CONTAINER_CREDENTIALS_RELATIVE_URI or _FULL_URI names an endpoint botocore
accepts. Then what the child would answer is read from the environment, and the container's credentials are
fetched by the daemon itself (aws.container): so the daemon starts no child, and never holds botocore's session
(about 30 MB in a second process) beside its own memory, neither at start nor at a renewal. Whatever else (a
profile, a config file, FIPS, keys that expire, web identity, a proxy, a service other than SQS and Lambda)
goes to the child, which runs botocore's whole chain. tests/unit/test_environment_resolution.py holds each
answer to the child's and to botocore's chain.
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
SERVICE_VARIABLES = {"sqs": "AWS_ENDPOINT_URL_SQS", "lambda": "AWS_ENDPOINT_URL_LAMBDA"}
# What botocore's providers before the ContainerProvider read besides the AWS files (EnvProvider, web identity,
# the EC2 tools' file, boto2's config): any of them present (even empty), and the container is not for us to ask.
BEFORE_CONTAINER_VARIABLES = ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_SECURITY_TOKEN",
                              "AWS_WEB_IDENTITY_TOKEN_FILE", "AWS_ROLE_ARN", "AWS_ROLE_SESSION_NAME",
                              "AWS_CREDENTIAL_FILE", "BOTO_CONFIG")
BOTO_FILES = ("/etc/boto.cfg", "~/.boto")  # BotoProvider's, without BOTO_CONFIG


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
    """Where botocore's chain ends when no profile and no AWS file exist: "keys" (EnvProvider), "container"
    (ContainerProvider, nothing before it could answer), or None where only the chain itself can tell."""
    if env.get("AWS_ACCESS_KEY_ID") and env.get("AWS_SECRET_ACCESS_KEY"):
        return "keys"
    from .container import TOKEN_FILE, container_url

    if any(name in env for name in BEFORE_CONTAINER_VARIABLES) or TOKEN_FILE in env and not env[TOKEN_FILE]:
        return None
    if container_url(env) is None or any(os.path.exists(os.path.expanduser(path)) for path in BOTO_FILES):
        return None
    return "container"


def resolve_from_environment(aws: AwsConfig, env: Mapping[str, str], origin: str,
                             services: tuple[str, ...]) -> Resolved | FetchedResolution | None:
    """What the child would answer (its credentials still to fetch from the container endpoint: a
    FetchedResolution), or None where only botocore's chain can tell (the child then runs). ConfigError for
    a region botocore would refuse, as the child would raise it."""
    from .region import local_region

    if aws.profile is not None or not environment_suffices(env):
        return None
    if any(service not in SERVICE_VARIABLES for service in services):
        return None
    located = local_region(aws, env, origin)
    if located is None:  # the next steps of the chain are ECS and EC2 metadata: the child's
        return None
    region, where = located
    endpoints: dict[str, str | None] = {}
    for service in services:
        url = aws.endpoint_url or env.get(SERVICE_VARIABLES[service]) or env.get("AWS_ENDPOINT_URL")
        endpoints[service] = url or partition_endpoint(service, region, env)
        if endpoints[service] is None:
            return None
    resolved = Resolved(region=region, where=where, endpoints=endpoints, ca_bundle=ca_bundle(aws, env),
                        credentials=None, expires_at=None)
    if credential_source(env) == "keys":
        token = env.get("AWS_SESSION_TOKEN") or env.get("AWS_SECURITY_TOKEN") or None
        return resolved._replace(credentials=FrozenCredentials(env["AWS_ACCESS_KEY_ID"], env["AWS_SECRET_ACCESS_KEY"],
                                                               token))
    return container_resolution(resolved, env)


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
