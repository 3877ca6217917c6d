"""workerless: deliver SQS messages in priority order to a local HTTP app or a Lambda function.

Usage:
  workerless [options]
  workerless check [--online] [--iam] [options]
  workerless send QUEUE [BODY] [--attr=K=V...] [options]
  workerless demo [options]
  workerless stats [--json] [--watch=S] [options]
  workerless redrive DLQ [--to=QUEUE] [--max=N] [--rate=R] [--parallel=N] [--dry-run] [options]
  workerless -h | --help
  workerless --version

Options:
  -c FILE, --config=FILE     TOML configuration (env WORKERLESS_CONFIG).
  --queues=SPEC              Queues in priority order, NAME[:WEIGHT],...: no weights is strict
                             order, equal weights random, different weights weighted.
  --function=NAME            Deliver every queue to this Lambda function (not with --http).
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
  --iam                      check: print the least-privilege IAM policy (JSON) instead.
  --attr=K=V                 send: a String message attribute (repeatable).
  --trace-header=H           send: the X-Ray trace header (AWSTraceHeader), e.g.
                             Root=1-5759e988-bd862e3fe1be46a994272793;Parent=53995c3f42cd8ad8;Sampled=1
  --s3-bucket=B              send: a body over 256 KiB goes to this S3 bucket, and the message is
                             the AWS extended clients' pointer to it.
  --group=G                  send: the MessageGroupId: a FIFO queue's group, or on a standard
                             queue the tenant of a fair queue (1-128 characters).
  --json                     stats: a JSON list, one object per queue.
  --watch=S                  stats: read again every S seconds (in place on a terminal).
  --to=QUEUE                 redrive: send every message here, not to its workerless.source_queue.
  --max=N                    redrive: move at most N messages.
  --rate=R                   redrive: move at most R messages per second.
  --parallel=N               redrive: batches of up to 10 on their way at once, 1-100 (default 10).
  --dry-run                  redrive: count and show the first messages; move nothing.
  -h, --help                 Show this help.
  --version                  Show the version.

Settings come from defaults, then the TOML file, then WORKERLESS_<OPTION> environment
variables (e.g. WORKERLESS_CONCURRENCY), then these flags. A target flag replaces a
WORKERLESS_HTTP or WORKERLESS_FUNCTION variable; both flags, or both variables, is an error.
The AWS region comes from [aws] region, AWS_REGION, AWS_DEFAULT_REGION, the profile's region,
then ECS or EC2 metadata; with none, every command exits 2. Exit codes: 0 clean stop,
1 runtime failure, 2 bad configuration or usage.
"""

from __future__ import annotations

import functools
import os
import sys
from collections.abc import Mapping, Sequence
from typing import Any

from docopt import DocoptExit, docopt

from .. import __version__
from ..aws.session import open_session
from ..config.keys import flag_of
from ..config.loading import OPTION_NAMES, load_config
from ..config.model import AwsConfig, Config
from ..errors import ConfigError, ExitStatus
from .checking import check, print_policy
from .starting import run, run_with_child, runs_on_the_wire_alone
from .usage import describe_usage_error


def main(argv: Sequence[str] | None = None, env: Mapping[str, str] | None = None, early: Any = None) -> int:
    """`early`: the aws.child.EarlyResolution the entry function started, waiting for a request."""
    try:
        return command(argv, env, early)
    finally:
        if early is not None:
            early.discard()  # unless run_with_child took its answer: then it has ended already


def command(argv: Sequence[str] | None, env: Mapping[str, str] | None, early: Any) -> int:
    env = os.environ if env is None else env
    arguments = list(sys.argv[1:] if argv is None else argv)
    try:
        args = docopt(__doc__, argv=arguments, version=__version__)
    except DocoptExit:
        print(f"workerless: {describe_usage_error(arguments, __doc__ or '')} (see workerless --help for usage)",
              file=sys.stderr)
        return ExitStatus.BAD_CONFIG
    if args["demo"]:
        from .demo import run_demo

        return run_demo()
    flags = {name: args.get(flag_of(name)) for name in OPTION_NAMES}
    try:
        if args["send"]:
            return send(args, env)
        if args["stats"] or args["redrive"]:
            from .operations import run_operator_command

            return run_operator_command(args, env, flags)
        config = load_config(args["--config"], env, flags)
        require_tracing_extra(config)
        reload = functools.partial(load_config, args["--config"], env, flags)  # SIGHUP reads the file again
        if not args["check"] and runs_on_the_wire_alone(config):
            return run_with_child(config, env, early, reload)
        session, region, where = open_session(config.aws, env, config.source)
    except ConfigError as error:
        print(error.line(), file=sys.stderr)
        return ExitStatus.BAD_CONFIG
    if args["check"] and args["--iam"]:
        return print_policy(config, args["--online"], session, region, where)
    if args["check"]:
        return check(config, args["--online"], session, region, where)
    return run(config, session, region, where, reload=reload)


TRACING_MODULES = ("opentelemetry.sdk", "opentelemetry.exporter.otlp.proto.http", "opentelemetry.propagators.aws")


def require_tracing_extra(config: Config) -> None:
    """[tracing] without OpenTelemetry installed is a configuration the daemon cannot run: exit 2, one line."""
    if config.tracing is None:
        return
    missing = [name for name in TRACING_MODULES if not is_installed(name)]
    if missing:
        raise ConfigError(config.source, "tracing", "needs OpenTelemetry, the optional extra otel: "
                          "pip install 'workerless-gevent[otel]'", f"{missing[0]} is not installed")


def is_installed(module: str) -> bool:
    import importlib.util

    try:
        return importlib.util.find_spec(module) is not None
    except ModuleNotFoundError:  # a parent package is missing
        return False


def send(args: dict[str, Any], env: Mapping[str, str]) -> int:
    """Enqueue one message: for operators and demos, using the config's [aws] settings if given."""
    from ..errors import AWS_ERRORS, describe_error
    from .sending import is_group_id, send_message

    attributes = {}
    for item in args["--attr"]:
        name, equals, value = item.partition("=")
        if not equals or not name:
            raise ConfigError("--attr", "", "must be NAME=VALUE", item)
        attributes[name] = {"DataType": "String", "StringValue": value}
    group = args["--group"]
    if group is not None and not is_group_id(group):
        raise ConfigError("--group", "", "must be 1-128 letters, digits or punctuation (no spaces)", group)
    config = load_config(args["--config"], env, {}) if args["--config"] else None
    aws = config.aws if config else AwsConfig()
    session, region, _ = open_session(aws, env, config.source if config else "command line")
    body = args["BODY"] if args["BODY"] is not None else sys.stdin.read()
    try:
        message_id = send_message(session, aws, region, args["QUEUE"], body, attributes,
                                  trace_header=args["--trace-header"], s3_bucket=args["--s3-bucket"], group=group)
    except AWS_ERRORS as error:
        print(f"workerless send: {describe_error(error)}", file=sys.stderr)
        return ExitStatus.ERROR
    print(message_id)
    return ExitStatus.OK
