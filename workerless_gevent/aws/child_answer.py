"""The credentials child's own side (`aws.child` is the daemon's): botocore's region, endpoint and credential
chains run in the child process, and the one JSON line it prints for the daemon to read (`child.parse_answer`)."""

from __future__ import annotations

import json
import os
import sys
from typing import Any


def resolve(request: dict[str, Any], session: Any = None) -> dict[str, Any]:
    """What the daemon would resolve in-process with botocore, as JSON-ready values."""
    from ..config.model import AwsConfig
    from .session import open_session, service_endpoint, trusted_ca_bundle  # as in-process, errors included

    aws = AwsConfig(profile=request["profile"], region=request["region"], endpoint_url=request["endpoint_url"],
                    ca_bundle=request["ca_bundle"])
    session, region, where = open_session(aws, os.environ, request["origin"], session)
    endpoints = {service: service_endpoint(session, service, region, aws.endpoint_url)
                 for service in request["services"]}
    credentials = session.get_credentials()
    frozen, expires_at = None, None
    if credentials is not None:
        current = credentials.get_frozen_credentials()
        frozen = [current.access_key, current.secret_key, current.token]
        expiry = getattr(credentials, "_expiry_time", None)  # RefreshableCredentials only
        expires_at = expiry.timestamp() if expiry is not None else None
    return {"region": region, "where": where, "endpoints": endpoints, "credentials": frozen,
            "expires_at": expires_at, "ca_bundle": trusted_ca_bundle(aws.ca_bundle, session)}


def child_main(argv: list[str]) -> int:
    """The request from the command line, or from stdin when started early; the answer on stdout, one line."""
    from ..errors import ConfigError, describe_error

    try:
        if argv[0] == "--stdin":  # started early: load botocore and a session, then wait for the request
            from .session import build_session

            try:
                warm = build_session(None)
            except Exception:  # a bad AWS config file or AWS_PROFILE: open_session says so, in one line
                warm = None
            line = sys.stdin.readline()
            if not line.strip():
                return 0  # the daemon did not need this child
            request = json.loads(line)
            answer = resolve(request, warm if request["profile"] is None else None)
        else:
            answer = resolve(json.loads(argv[0]))
    except ConfigError as error:
        value = error.value if isinstance(error.value, (str, int, float, bool, type(None))) else str(error.value)
        answer = {"config_error": [error.source, error.key, error.problem, value]}
    except Exception as error:  # one line for the daemon to print, never a traceback
        answer = {"error": describe_error(error)}
    try:
        print(json.dumps(answer), flush=True)
    except BrokenPipeError:  # the daemon is gone (stopped or killed while this child worked): nobody to tell
        pass
    return 0


def exit_at_once(status: int) -> None:
    """The answer is out: skip the interpreter's teardown (10-20 ms the daemon would wait for)."""
    try:
        sys.stdout.flush()
    except OSError:  # a pipe the daemon closed: the answer had nowhere to go
        pass
    os._exit(status)
