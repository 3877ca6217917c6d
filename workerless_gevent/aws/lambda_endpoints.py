"""The Invoke wire of a Lambda target with its own `endpoint_url`: a container beside the daemon running the image
that ran on Lambda, whose Runtime Interface Emulator answers on port 8080.

Signing: a loopback endpoint (127.0.0.0/8, ::1, localhost) is the same host or pod, where the emulator checks
nothing: it gets no signature, and the daemon's credentials (a role's session token among them) stay in the
daemon. Any other endpoint (a compose service such as http://lambda:8080, a Kubernetes Service) is signed with
the daemon's credentials when it has some, as botocore signs for any endpoint_url: an Invoke API that checks
them (LocalStack, a Lambda VPC endpoint) needs it, and the emulator ignores it. Without credentials it goes
unsigned rather than failing every delivery on a signature nobody asked for. The wire connects directly:
HTTP(S)_PROXY does not apply to a container beside the daemon."""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from ..config.model import LambdaTargetConfig
from ..rules import is_loopback_url

if TYPE_CHECKING:
    from ..wire.aws_lambda import LambdaWire


def is_signed(url: str, credentials: Any) -> bool:
    return credentials is not None and not is_loopback_url(url)


def build_lambda_endpoint(target: LambdaTargetConfig, *, region: str, credentials: Any, ca_bundle: str | None,
                          concurrency: int) -> LambdaWire:
    """A wire of the target's own, built with the target (at start, or by the reload that adds it)."""
    from ..wire.aws_lambda import LambdaWire

    url = target.endpoint_url
    assert url is not None
    return LambdaWire(url, region, credentials, concurrency=concurrency + 10, read_timeout=target.timeout + 10,
                      connect_timeout=5, ca_bundle=ca_bundle, is_signed=is_signed(url, credentials), is_emulator=True)


def lambda_endpoint_builder(region: str, credentials: Any, ca_bundle: str | None,
                            concurrency: int) -> Callable[[LambdaTargetConfig], Any]:
    """`Clients.build_lambda_endpoint`, with what the daemon resolved at start."""
    return functools.partial(build_lambda_endpoint, region=region, credentials=credentials, ca_bundle=ca_bundle,
                             concurrency=concurrency)
