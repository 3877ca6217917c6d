"""The command-line side of `stats` and `redrive`: arguments in, lines out, exit codes (0 done, 1 an AWS
call or a move failed, 2 usage). The AWS client is built as `send` builds its own."""

from __future__ import annotations

import sys
import time
from collections.abc import Mapping
from typing import Any

from ..aws.clients import build_command_client, wire_command_client
from ..aws.session import open_session, trusted_ca_bundle
from ..config.loading import load_config
from ..config.model import AwsConfig, Config
from ..errors import AWS_ERRORS, ConfigError, ExitStatus, describe_error, error_code
from .entries import SOURCE_ATTRIBUTE, preview, source_of, summary_line
from .progress import NoProgress, build_progress
from .queues import dead_letter_sources, queue_name
from .batches import MissingDestination, RedriveFailed
from .redrive import DEFAULT_PARALLEL, MAX_PARALLEL, Redrive, RedriveRequest
from .stats import QueueUnreadable, read_stats, stats_json, stats_table

PLACEHOLDER_TARGET = "http://127.0.0.1/"  # stats reads queues only: a --queues list needs no target
INTERRUPTED = 130  # Ctrl-C, as a shell reports it
MISSING_QUEUE_CODES = ("QueueDoesNotExist", "NonExistentQueue")
CLEAR_SCREEN = "\x1b[H\x1b[2J"


def run_operator_command(args: dict[str, Any], env: Mapping[str, str], flags: Mapping[str, object]) -> int:
    """`stats` or `redrive`; a ConfigError goes up to the CLI (one line, exit 2)."""
    name = "stats" if args["stats"] else "redrive"
    try:
        if args["stats"]:
            return stats(args, env, flags)
        return redrive(args, env)
    except AWS_ERRORS as error:
        code = ExitStatus.BAD_CONFIG if error_code(error).endswith(MISSING_QUEUE_CODES) else ExitStatus.ERROR
        print(f"workerless {name}: {describe_error(error)}", file=sys.stderr)
        return code
    except QueueUnreadable as error:
        print(f"workerless stats: {error}", file=sys.stderr)
        return ExitStatus.BAD_CONFIG if error.is_missing else ExitStatus.ERROR


def command_client(config: Config | None, env: Mapping[str, str], connections: int = 10, wired: bool = False) -> Any:
    """`connections`: calls at once (redrive's --parallel); botocore merges its pool size into the client's
    configuration, so urllib3 never opens and drops connections past its pool. `wired`: the hot calls on our
    wire (`aws.clients.WiredSqs`)."""
    import botocore.config

    aws = config.aws if config else AwsConfig()
    session, region, _ = open_session(aws, env, config.source if config else "command line")
    session.set_default_client_config(botocore.config.Config(max_pool_connections=connections))
    client = build_command_client(session, aws, region, "sqs")
    return wire_command_client(client, session, connections, trusted_ca_bundle(aws.ca_bundle, session)) if wired \
        else client


def load_queues(path: str | None, env: Mapping[str, str], flags: Mapping[str, object]) -> Config:
    try:
        return load_config(path, env, flags)
    except ConfigError as error:
        if not error.problem.startswith("has no target"):
            raise
    return load_config(path, env, {**flags, "http": PLACEHOLDER_TARGET})


def stats(args: dict[str, Any], env: Mapping[str, str], flags: Mapping[str, object]) -> int:
    watch = positive_number(args["--watch"], "--watch") if args["--watch"] is not None else None
    config = load_queues(args["--config"], env, flags)
    sqs = command_client(config, env)
    in_place = sys.stdout.isatty()
    while True:
        rows = read_stats(sqs, config.queues)
        text = stats_json(rows) if args["--json"] else stats_table(rows)
        if watch is None:
            print(text)
            return ExitStatus.OK
        stamp = time.strftime("%Y-%m-%d %H:%M:%S")
        print(f"{CLEAR_SCREEN if in_place else ''}{stamp} (every {watch:g}s, Ctrl-C to stop)\n{text}", flush=True)
        try:
            time.sleep(watch)
        except KeyboardInterrupt:
            return ExitStatus.OK


def positive_number(text: str, option: str, integer: bool = False) -> float:
    try:
        value = int(text) if integer else float(text)
    except ValueError:
        value = 0
    if not value > 0 or value != value or value == float("inf"):
        kind = "a whole number" if integer else "a number"
        raise ConfigError(option, "", f"must be {kind} greater than 0", text)
    return value


def parallel_count(text: str | None) -> int:
    if text is None:
        return DEFAULT_PARALLEL
    value = text.strip()
    if not value.isdigit() or not 1 <= int(value) <= MAX_PARALLEL:
        raise ConfigError("--parallel", "", f"must be a whole number from 1 to {MAX_PARALLEL}", text)
    return int(value)


def redrive_request(args: dict[str, Any]) -> RedriveRequest:
    max_messages = args["--max"] and int(positive_number(args["--max"], "--max", integer=True))
    rate = args["--rate"] and positive_number(args["--rate"], "--rate")
    parallel = parallel_count(args["--parallel"])
    if args["--to"] is not None and queue_name(args["--to"]) == queue_name(args["DLQ"]):
        raise ConfigError("--to", "", "is the dead-letter queue itself", args["--to"])
    return RedriveRequest(dead_letter_queue=args["DLQ"], to=args["--to"] or None,
                          max_messages=max_messages or None, rate=rate or None, parallel=parallel)


def redrive(args: dict[str, Any], env: Mapping[str, str]) -> int:
    request = redrive_request(args)
    config = load_config(args["--config"], env, {}) if args["--config"] else None
    sqs = command_client(config, env, connections=2 * request.parallel, wired=True)  # a send and a delete each
    mover = Redrive(sqs, request, NoProgress())
    if args["--dry-run"]:
        return dry_run(mover)
    total = mover.approximate_total()
    mover.progress = build_progress(total, sys.stderr, f"redrive {mover.name}")
    status: int = ExitStatus.OK
    problem = ""
    try:
        mover.run()
    except MissingDestination as error:
        sources = ", ".join(dead_letter_sources(sqs, mover.url)) or "none (ListDeadLetterSourceQueues)"
        status, problem = ExitStatus.BAD_CONFIG, (
            f"message {error} has no {SOURCE_ATTRIBUTE}: give --to=QUEUE (queues whose redrive policy names "
            f"{mover.name}: {sources}); it was left where it was")
    except RedriveFailed as error:
        status, problem = ExitStatus.ERROR, str(error)
    except KeyboardInterrupt:
        status, problem = INTERRUPTED, (f"interrupted: the batches in hand stay in {mover.name} and may reach "
                                        "their queues twice if their copies were sent; run redrive again in 5 minutes")
    finally:
        mover.progress.close()
    print(summary_line(mover.tally.moved, total, mover.name, request.to and queue_name(request.to)))
    if problem:
        print(f"workerless redrive: {problem}", file=sys.stderr)
    return status


def dry_run(mover: Redrive) -> int:
    total = mover.approximate_total()
    shown = mover.peek(total)
    print(f"dry run: {total} messages in {mover.name} (approximate), nothing moved; the first {len(shown)}:")
    for message in shown:
        destination = mover.request.to or source_of(message)
        print(preview(message, destination and queue_name(destination)))
    return ExitStatus.OK
