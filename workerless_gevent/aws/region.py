"""The AWS region of a run and where it came from; never a silent default.

Order: [aws] region, AWS_REGION, AWS_DEFAULT_REGION, the profile's region, then (only when every
local source is empty) ECS task metadata and EC2 instance metadata, each given about a second.
botocore alone reads neither AWS_REGION nor any metadata service for the region.
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from ..config.model import AwsConfig
from ..errors import ConfigError

if TYPE_CHECKING:  # botocore and urllib are imported where used: aws.environment reads local_region without them
    import botocore.session

logger = logging.getLogger(__name__)

METADATA_TIMEOUT = 1.0  # seconds per metadata request; off AWS these only cost time
REGION_NAME = re.compile(r"[a-zA-Z0-9](?:[a-zA-Z0-9-]{0,61}[a-zA-Z0-9])?\Z")  # botocore's own check
NO_REGION = "no AWS region: set [aws] region, AWS_REGION or AWS_DEFAULT_REGION (or run on EC2/ECS)"


def resolve_region(aws: AwsConfig, env: Mapping[str, str], session: botocore.session.Session,
                   origin: str = "the config") -> tuple[str, str]:
    """(region, where it came from); `session` carries the profile, `origin` names the config file."""
    local = local_region(aws, env, origin)
    if local is not None:
        return local
    profile = session.profile or "default"
    in_profile = session.get_scoped_config().get("region")
    if in_profile:
        return checked(str(in_profile), f"profile {profile}", "region"), f"profile {profile}"
    ecs = ecs_region(env)
    if ecs:
        return ecs, "ECS task metadata"
    ec2 = ec2_region(env, session)
    if ec2:
        return ec2, "EC2 instance metadata"
    raise ConfigError("workerless", "", NO_REGION)


def local_region(aws: AwsConfig, env: Mapping[str, str], origin: str) -> tuple[str, str] | None:
    """The chain's first steps, which need no AWS config file: [aws] region, AWS_REGION, AWS_DEFAULT_REGION."""
    if aws.region:
        return checked(aws.region, origin, "aws.region"), f"[aws] region in {origin}"
    for name in ("AWS_REGION", "AWS_DEFAULT_REGION"):
        if env.get(name):
            return checked(env[name], name, ""), name
    return None


def checked(region: str, source: str, key: str) -> str:
    """A region botocore would refuse fails here, as one line naming where it was set."""
    if not REGION_NAME.match(region):
        raise ConfigError(source, key, "must be an AWS region name such as eu-west-1", region)
    return region


def ecs_region(env: Mapping[str, str]) -> str | None:
    """The task's region from the ECS task metadata endpoint, if this runs in an ECS task."""
    base = env.get("ECS_CONTAINER_METADATA_URI_V4") or env.get("ECS_CONTAINER_METADATA_URI")
    if not base:
        return None
    import urllib.request

    # A link-local endpoint: never through HTTP_PROXY.
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    try:
        with opener.open(base.rstrip("/") + "/task", timeout=METADATA_TIMEOUT) as response:
            task = json.loads(response.read())
    except (OSError, ValueError) as error:
        logger.debug("no region from ECS task metadata: %s", error)
        return None
    return region_of_task(task)


def region_of_task(task: Any) -> str | None:
    """The region in an ECS task metadata document: its task ARN's, else its zone's without the letter."""
    if not isinstance(task, dict):
        return None
    arn = task.get("TaskARN")
    parts = arn.split(":") if isinstance(arn, str) else []
    if len(parts) > 3 and parts[0] == "arn" and REGION_NAME.match(parts[3]):
        return parts[3]
    zone = task.get("AvailabilityZone")
    if isinstance(zone, str) and len(zone) > 1 and zone[-1].isalpha() and REGION_NAME.match(zone[:-1]):
        return zone[:-1]
    return None


def ec2_region(env: Mapping[str, str], core: botocore.session.Session) -> str | None:
    """The instance's region from IMDS (one short attempt); AWS_EC2_METADATA_DISABLED=true skips it."""
    from botocore.utils import InstanceMetadataRegionFetcher, resolve_imds_endpoint_mode

    try:
        fetcher = InstanceMetadataRegionFetcher(
            timeout=METADATA_TIMEOUT, num_attempts=1, env=dict(env),
            config={
                "ec2_metadata_service_endpoint": core.get_config_variable("ec2_metadata_service_endpoint"),
                "ec2_metadata_service_endpoint_mode": resolve_imds_endpoint_mode(core),
                "ec2_metadata_v1_disabled": core.get_config_variable("ec2_metadata_v1_disabled"),
            },
        )
        region = fetcher.retrieve_region()
    except Exception as error:  # a probe: any failure means "no region here", as in botocore itself
        logger.debug("no region from EC2 instance metadata: %s", error)
        return None
    return region if isinstance(region, str) and REGION_NAME.match(region) else None
