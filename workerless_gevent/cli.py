"""workerless: deliver SQS messages in priority order to a local HTTP app or a Lambda function.

Usage:
  workerless [options]
  workerless check [--online] [options]
  workerless send QUEUE [BODY] [--attr=K=V...] [options]
  workerless demo [options]
  workerless -h | --help
  workerless --version

Options:
  -c FILE, --config=FILE     TOML configuration (env WORKERLESS_CONFIG).
  --queues=SPEC              Queues in priority order, NAME[:WEIGHT],...: no weights is strict
                             order, equal weights random, different weights weighted.
  --function=NAME            Deliver every queue to this Lambda function.
  --http=URL                 Deliver every queue as an HTTP POST to this URL (aws-sqsd).
  --concurrency=N            Deliveries in flight at most, across all queues.
  --strategy=NAME            priority | weighted | random | round-robin.
  --poll-for=S               Long-poll seconds while queues are empty (1-20).
  --sleep=S                  Seconds to pause after an empty long poll.
  --name=NAME                Send metrics to CloudWatch namespace Workerless-NAME.
  --metrics-interval=S       Seconds between CloudWatch flushes.
  --status=HOST:PORT         Serve /healthz, /metrics and /status here (a bare PORT is on loopback).
  --drain                    Exit once every queue is empty and nothing is in flight.
  --max-messages=N           Exit after N deliveries.
  --log-format=FORMAT        text | json.
  --log-level=LEVEL          DEBUG | INFO | WARNING | ERROR.
  --online                   check: also resolve queues and targets on AWS.
  --attr=K=V                 send: a String message attribute (repeatable).
  -h, --help                 Show this help.
  --version                  Show the version.

Settings come from defaults, then the TOML file, then WORKERLESS_<OPTION> environment
variables (e.g. WORKERLESS_CONCURRENCY), then these flags. Exit codes: 0 clean stop,
1 runtime failure, 2 bad configuration or usage.
"""

from __future__ import annotations

import json
import logging
import os
import random
import sys
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import asdict
from typing import Any

from docopt import DocoptExit, docopt

from . import __version__
from .errors import ConfigError, ExitStatus, StartupError
from .loading import OPTION_NAMES, load_config
from .logs import configure_logging

logger = logging.getLogger(__name__)


def main(argv: Sequence[str] | None = None, env: Mapping[str, str] | None = None) -> int:
    env = os.environ if env is None else env
    try:
        args = docopt(__doc__, argv=list(sys.argv[1:] if argv is None else argv), version=__version__)
    except DocoptExit as error:
        print(str(error).strip().splitlines()[0] if str(error).strip() else "bad usage", file=sys.stderr)
        print("usage: see workerless --help", file=sys.stderr)
        return ExitStatus.BAD_CONFIG
    if args["demo"]:
        from .demo import run_demo

        return run_demo()
    flags = {name: args.get("--" + name.replace("_", "-")) for name in OPTION_NAMES}
    try:
        if args["send"]:
            return send(args, env)
        config = load_config(args["--config"], env, flags)
    except ConfigError as error:
        print(error.line(), file=sys.stderr)
        return ExitStatus.BAD_CONFIG
    if args["check"]:
        return check(config, args["--online"])
    return run(config)


def run(config: Any) -> int:
    from .aws import build_clients
    from .daemon import Daemon
    from .metrics import Registry

    configure_logging(config.log_format, config.log_level)
    try:
        clients = build_clients(config)
        # Resolving every queue at construction doubles as the credentials and endpoint check.
        daemon = Daemon(config, clients, Registry(), random.Random())
    except StartupError as error:
        print(f"workerless: cannot start: {error}", file=sys.stderr)
        return ExitStatus.ERROR
    try:
        return daemon.run()
    except Exception:
        logger.critical("the daemon failed", exc_info=True)
        return ExitStatus.ERROR


def check(config: Any, online: bool) -> int:
    effective = asdict(config)
    for target in effective["targets"].values():
        if target.get("signing_secret"):
            target["signing_secret"] = "(set, hidden)"
    print(json.dumps(effective, indent=2, default=str))
    from .setup import build_parts, dead_letter_warnings

    if not online:
        for warning in dead_letter_warnings(config):
            print(f"warning: {warning}", file=sys.stderr)
        return ExitStatus.OK
    from .aws import build_clients
    from .metrics import Registry

    try:
        parts = build_parts(config, build_clients(config), Registry(), random.Random())
    except StartupError as error:
        print(f"workerless: {error}", file=sys.stderr)
        return ExitStatus.ERROR
    for warning in dead_letter_warnings(config, parts.queues):
        print(f"warning: {warning}", file=sys.stderr)
    print("online check passed: every queue resolved", file=sys.stderr)
    return ExitStatus.OK


def send(args: dict[str, Any], env: Mapping[str, str]) -> int:
    """Enqueue one message: for operators and demos, using the config's [aws] settings if given."""
    import boto3

    from .aws import AWS_ERRORS, describe_error

    attributes = {}
    for item in args["--attr"]:
        name, equals, value = item.partition("=")
        if not equals or not name:
            raise ConfigError("--attr", "", "must be NAME=VALUE", item)
        attributes[name] = {"DataType": "String", "StringValue": value}
    aws = load_config(args["--config"], env, {}).aws if args["--config"] else None
    session = boto3.session.Session(profile_name=aws.profile, region_name=aws.region) if aws else boto3.session.Session()
    endpoint = {"endpoint_url": aws.endpoint_url} if aws and aws.endpoint_url else {}
    sqs = session.client("sqs", **endpoint)
    queue = args["QUEUE"]
    body = args["BODY"] if args["BODY"] is not None else sys.stdin.read()
    try:
        url = queue if "://" in queue else sqs.get_queue_url(QueueName=queue)["QueueUrl"]
        # A fresh deduplication id: two sends of the same body are two messages, content-based or not.
        extra = {"MessageGroupId": "workerless-send", "MessageDeduplicationId": uuid.uuid4().hex} \
            if url.endswith(".fifo") else {}
        response = sqs.send_message(QueueUrl=url, MessageBody=body, MessageAttributes=attributes, **extra)
    except AWS_ERRORS as error:
        print(f"workerless send: {describe_error(error)}", file=sys.stderr)
        return ExitStatus.ERROR
    print(response["MessageId"])
    return ExitStatus.OK
