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
import json
import logging
import os
import random
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict
from typing import Any

from docopt import DocoptExit, docopt

from .. import __version__
from ..aws.session import open_session
from ..config.loading import OPTION_NAMES, load_config
from ..config.model import AwsConfig, Config, wire_services
from ..errors import ConfigError, ExitStatus, StartupError
from ..logs import configure_logging
from .usage import describe_usage_error

logger = logging.getLogger(__name__)



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
    flags = {name: args.get("--" + name.replace("_", "-")) for name in OPTION_NAMES}
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


def runs_on_the_wire_alone(config: Config) -> bool:
    """No botocore client needed (aws.child): no CloudWatch metrics, no DynamoDB claims or fleet, no S3 payloads."""
    claims = config.fleet is not None or (config.periodic is not None and bool(config.periodic.claims_table))
    large_payloads = any(queue.large_payloads for queue in config.queues)  # an S3 client
    return not config.name and not claims and not large_payloads


def run_with_child(config: Config, env: Mapping[str, str], early: Any = None,
                   reload: Callable[[], Config] | None = None) -> int:
    """The daemon with region, endpoint and credentials from the environment alone (`aws.environment`, with a
    container endpoint's or EC2 instance metadata's credentials fetched here: `aws.container`,
    `aws.instance_metadata`) or from `aws.child`, which runs while this process imports the rest of itself. Where the wire cannot follow botocore (a proxy, FIPS or dual-stack
    endpoints), the daemon resolves in-process as before. ConfigError goes up (exit 2)."""
    from ..aws.child import ChildResolution, Resolved
    from ..aws.environment import resolve_from_environment
    from ..aws.renewal import RenewingCredentials, fetch_for
    from ..wire.sqs import proxy_for

    services = wire_services(config)
    asked = tuple(dict.fromkeys([*services, "dynamodb"]))  # DynamoDB's too: a reload may add [idempotency]
    if early is not None:
        early.ask(config.aws, config.source, asked)
    resolution = early or resolve_from_environment(config.aws, env, config.source, asked) \
        or ChildResolution(config.aws, config.source, asked)
    from ..aws.clients import Clients, build_lambda_wire, build_sqs_wire
    from ..aws.lambda_endpoints import lambda_endpoint_builder
    from ..lifecycle.daemon import Daemon  # noqa: F401  (imported while the child works)

    try:
        resolved = resolution if isinstance(resolution, Resolved) else resolution.result()
    except StartupError as error:
        configure_logging(config.log_format, config.log_level)
        print(f"workerless: cannot start: {error}", file=sys.stderr)
        return ExitStatus.ERROR
    urls = [resolved.endpoints.get(service) for service in services]
    if not all(urls) or any(proxy_for(url) for url in urls if url):
        return run(config, *open_session(config.aws, env, config.source), reload=reload)
    credentials = RenewingCredentials(resolved.credentials, resolved.expires_at,
                                      fetch_for(resolution, config.aws, config.source))
    signing = credentials if resolved.credentials else None
    region, ca_bundle = resolved.region, resolved.ca_bundle
    lambda_url, dynamodb_url = resolved.endpoints.get("lambda"), resolved.endpoints.get("dynamodb")
    clients = Clients(sqs=build_sqs_wire(config, region, urls[0] or "", signing, ca_bundle),
                      lambda_=build_lambda_wire(config, region, lambda_url, signing, ca_bundle) if lambda_url else None,
                      cloudwatch=None, region=region,
                      **idempotency_wires(config, region, dynamodb_url, signing, ca_bundle),
                      renew_credentials=credentials.run if resolved.expires_at is not None else None,
                      build_lambda_endpoint=lambda_endpoint_builder(region, signing, ca_bundle, config.concurrency))
    return run(config, None, resolved.region, resolved.where, clients, reload)


def idempotency_wires(config: Config, region: str, url: str | None, credentials: Any,
                      ca_bundle: str) -> dict[str, Any]:
    """The Clients' `idempotency` (with [idempotency]) and `build_idempotency`, for a reload that adds it (None
    where the wire cannot go: only a restart can add it then)."""
    from ..aws.clients import build_dynamodb_wire
    from ..wire.sqs import proxy_for

    if not url or proxy_for(url):
        return {}
    endpoint: str = url

    def build(reloaded: Config) -> Any:
        return build_dynamodb_wire(reloaded, region, endpoint, credentials, ca_bundle)

    return {"idempotency": build(config) if config.idempotency else None, "build_idempotency": build}


def run(config: Config, session: Any, region: str, where: str, clients: Any = None,
        reload: Callable[[], Config] | None = None) -> int:
    """The daemon on `clients` (aws.Clients), or on clients built from `session`; `reload` reads the
    configuration again (SIGHUP)."""
    from ..aws.clients import build_clients
    from ..lifecycle.daemon import Daemon
    from ..metrics import Registry

    configure_logging(config.log_format, config.log_level)
    try:
        clients = clients or build_clients(config, region, session)
        # Resolving every queue at construction doubles as the credentials and endpoint check.
        daemon = Daemon(config, clients, Registry(), random.Random(), reload)
    except StartupError as error:
        print(f"workerless: cannot start: {error}", file=sys.stderr)
        return ExitStatus.ERROR
    logger.info("region: %s (from %s)", region, where)
    try:
        return daemon.run()
    except Exception:
        logger.critical("the daemon failed", exc_info=True)
        return ExitStatus.ERROR


def check(config: Config, online: bool, session: Any, region: str, where: str) -> int:
    effective = asdict(config)
    for target in effective["targets"].values():
        if target.get("signing_secret"):
            target["signing_secret"] = "(set, hidden)"
        if target.get("headers"):  # often credentials: the names only
            target["headers"] = dict.fromkeys(target["headers"], "(set, hidden)")
    effective["aws"]["region"] = region  # the one the daemon would use, wherever it came from
    print(json.dumps(effective, indent=2, default=str))
    from ..lifecycle.assembly import build_parts, config_warnings

    if config.tracing is not None:
        print("tracing: a span per delivery over OTLP/HTTP; endpoint, headers, sampler and service name from the "
              "OTEL_* environment variables (default http://localhost:4318/v1/traces)", file=sys.stderr)
    if not online:
        print(f"region: {region} (from {where})", file=sys.stderr)
        for warning in config_warnings(config):
            print(f"warning: {warning}", file=sys.stderr)
        return ExitStatus.OK
    from ..aws.clients import build_clients
    from ..metrics import Registry

    try:
        clients = build_clients(config, region, session)
        parts = build_parts(config, clients, Registry(), random.Random())
        if config.fleet is not None:
            from ..fleet.membership import describe_table
            print(describe_table(clients.dynamodb, config.fleet.table), file=sys.stderr)
    except StartupError as error:
        print(f"workerless: {error}", file=sys.stderr)
        return ExitStatus.ERROR
    print(f"region: {region} (from {where})", file=sys.stderr)
    for warning in config_warnings(config, parts.queues):
        print(f"warning: {warning}", file=sys.stderr)
    print("online check passed: every queue resolved", file=sys.stderr)
    return ExitStatus.OK


def print_policy(config: Config, online: bool, session: Any, region: str, where: str) -> int:
    """check --iam: the policy on stdout (to paste or redirect), notes on stderr."""
    from .iam import ANY_ACCOUNT, build_policy, policy_notes, resolve_online

    account, known = ANY_ACCOUNT, dict[str, str]()
    if online:
        try:
            account, known = resolve_online(config, region, session)
        except StartupError as error:
            print(f"workerless: {error}", file=sys.stderr)
            return ExitStatus.ERROR
    policy = build_policy(config, region, account, known)
    print(json.dumps(policy, indent=2))
    print(f"region: {region} (from {where})", file=sys.stderr)
    for note in policy_notes(policy):
        print(f"note: {note}", file=sys.stderr)
    return ExitStatus.OK


def send(args: dict[str, Any], env: Mapping[str, str]) -> int:
    """Enqueue one message: for operators and demos, using the config's [aws] settings if given."""
    from ..errors import AWS_ERRORS, describe_error
    from .sending import send_message

    attributes = {}
    for item in args["--attr"]:
        name, equals, value = item.partition("=")
        if not equals or not name:
            raise ConfigError("--attr", "", "must be NAME=VALUE", item)
        attributes[name] = {"DataType": "String", "StringValue": value}
    config = load_config(args["--config"], env, {}) if args["--config"] else None
    aws = config.aws if config else AwsConfig()
    session, region, _ = open_session(aws, env, config.source if config else "command line")
    body = args["BODY"] if args["BODY"] is not None else sys.stdin.read()
    try:
        message_id = send_message(session, aws, region, args["QUEUE"], body, attributes,
                                  trace_header=args["--trace-header"], s3_bucket=args["--s3-bucket"])
    except AWS_ERRORS as error:
        print(f"workerless send: {describe_error(error)}", file=sys.stderr)
        return ExitStatus.ERROR
    print(message_id)
    return ExitStatus.OK
