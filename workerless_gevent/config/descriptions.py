"""Every configuration key's facts, the one place each is written: building reads its default, range and
choices from here, loading its variable and flag, the reference page and the tests all the rest."""

from __future__ import annotations

from typing import Any

from .cron import PeriodicConfig, PeriodicTask
from .fleet import FLEET_NAME_LENGTH, FleetConfig
from .idempotency import IdempotencyConfig
from .keys import Choices, Key, Range, field_of
from .model import (METRICS_NAME_LENGTH, QUEUE_NAME_LENGTH, TABLE_NAME_LENGTHS, AwsConfig, Config, HttpTargetConfig,
                    LambdaTargetConfig, PollingConfig, QueueConfig, TracingConfig)


def flow_keys(owner: type, overload: str) -> tuple[Key, ...]:
    """The flow-control keys every target has."""
    prefix = "targets.<name>."
    return (
        Key(prefix + "max_concurrency", owner, "max_concurrency", "Deliveries in flight to this target at most, "
            "across the queues that use it. Unset: only `concurrency` caps it.", Range(1, 10000)),
        Key(prefix + "rate_limit", owner, "rate_limit", "Deliveries per second to this target: a token bucket with "
            "bursts of up to this many. Unset: no rate limit.", Range(0.01, 100000)),
        Key(prefix + "fleet_max_concurrency", owner, "fleet_max_concurrency", "Deliveries in flight to this target "
            "across every daemon of the fleet. Needs `[fleet]`.", Range(1, 100000)),
        Key(prefix + "fleet_rate_limit", owner, "fleet_rate_limit", "Deliveries per second to this target across "
            "every daemon of the fleet (burst = rate). Needs `[fleet]`.", Range(0.01, 1000000)),
        Key(prefix + "overload", owner, "overload", overload, Choices(("backpressure", "failure"))),
    )


WINDOW_BATCH_SIZE = 10000  # a Lambda target's records per invocation at most with a batching window, as Lambda's
MAX_FILTERS = 5  # a queue's filter patterns at most, as an event source mapping's
QUEUE_NAME_RULE = f"1-{QUEUE_NAME_LENGTH} letters, digits, `-` or `_` (plus `.fifo`)"
TABLE_NAME_RULE = "{}-{} letters, digits, `_` `-` or `.` (a DynamoDB table name)".format(*TABLE_NAME_LENGTHS)
TABLE_NAME_PROBLEM = "must be " + TABLE_NAME_RULE.replace("`", "")  # the error's words: no Markdown

KEYS: tuple[Key, ...] = (
    Key("name", Config, "name", "Turns CloudWatch metrics on, in the namespace `Workerless-<name>`. Unset: no "
        "CloudWatch metrics.",
        allowed=f"letters, digits and `. - _ / #`, up to {METRICS_NAME_LENGTH}, not starting with `AWS/`",
        example="my-app-production", option="name"),
    Key("concurrency", Config, "concurrency", "Deliveries in flight at most, across all queues (Beanstalk: HTTP "
        "connections).", Range(1, 10000), option="concurrency"),
    Key("shutdown_timeout", Config, "shutdown_timeout", "Seconds from SIGTERM to exit, whatever is stalled (and 1 s "
        "more for the process to end): the deliveries in flight get all but the last 3 s (a quarter, under 12), "
        "then what is left is released back to SQS and the last deletes, metrics and spans go out. Keep it at "
        "least 2 s below the platform's SIGKILL (28 for 30 s).", Range(0, 3600), option="shutdown_timeout"),
    Key("log_format", Config, "log_format", "`json` writes one JSON object per line, with each record's fields.",
        Choices(("text", "json")), option="log_format"),
    Key("log_level", Config, "log_level", "The lowest level logged.",
        Choices(("DEBUG", "INFO", "WARNING", "ERROR")), option="log_level"),
    Key("drain", Config, "drain", "Exit 0 once every queue came back empty from a long poll and nothing is in "
        "flight.", allowed="true or false", example=True, option="drain"),
    Key("max_messages", Config, "max_messages", "Exit after this many deliveries. Unset: no limit.", Range(1),
        option="max_messages"),
    Key("metrics.interval", Config, "metrics_interval", "Seconds between CloudWatch flushes; also the window "
        "`Utilization` is averaged over and how often each queue's `Backlog` is read.", Range(1, 86400),
        option="metrics_interval"),
    Key("status.listen", Config, "status_listen", "Serve `/healthz`, `/readyz`, `/metrics`, `/status` and the "
        "status page here. A bare port stays on loopback. Unset: no status server.",
        allowed="`HOST:PORT` or `PORT`", example="127.0.0.1:9100", option="status"),
    Key("status.unready_after", Config, "unready_after", "`/readyz` answers 503 once a queue's receives have "
        "failed for this many seconds.", Range(1, 86400)),
    Key("polling.strategy", PollingConfig, "strategy", "The order queues are served in: strict priority (the "
        "order of `[[queues]]`), weighted by `weight`, random, or round-robin.",
        Choices(("priority", "weighted", "random", "round-robin")), option="strategy"),
    Key("polling.poll_for", PollingConfig, "poll_for", "Long-poll seconds while a queue is empty: one request per "
        "idle queue per `poll_for`; an idle stop takes up to this long.", Range(1, 20), option="poll_for"),
    Key("polling.sleep", PollingConfig, "sleep", "Seconds to pause after an empty long poll.", Range(0, 3600),
        option="sleep"),
    Key("polling.batch_size", PollingConfig, "batch_size", "Messages per `ReceiveMessage`.", Range(1, 10),
        option="batch_size"),
    Key("queues[].name", QueueConfig, "name", "The queue's name. Required unless `url` is given (then its last "
        "path segment). Queues are listed in priority order.", allowed=QUEUE_NAME_RULE, example="payments",
        option="queues"),
    Key("queues[].url", QueueConfig, "url", "The queue's URL, instead of resolving `name` with `GetQueueUrl`.",
        allowed="an http(s) queue URL", example="https://sqs.eu-west-1.amazonaws.com/123456789012/payments"),
    Key("queues[].weight", QueueConfig, "weight", "Weight for the `weighted` strategy.", Range(1, 1000),
        option="queues"),
    Key("queues[].target", QueueConfig, "target", "The `[targets.<name>]` this queue delivers to.",
        allowed="a name defined in `[targets]`", example="default"),
    Key("queues[].visibility_timeout", QueueConfig, "visibility_timeout", "Seconds a received message stays "
        "hidden; extended by the heartbeat while its delivery runs.", Range(1, 43200)),
    Key("queues[].error_visibility_timeout", QueueConfig, "error_visibility_timeout", "Seconds before a failed "
        "message is retried (Beanstalk: error visibility timeout).", Range(0, 43200)),
    Key("queues[].backoff", QueueConfig, "backoff", "`exponential`: `error_visibility_timeout` x 2^(tries-1), "
        "capped at 12 hours; tries are the receives `max_retries` counts.", Choices(("constant", "exponential"))),
    Key("queues[].max_retries", QueueConfig, "max_retries", "Receives before a failed message is sent to "
        "`dead_letter_queue`.", Range(1, 1000)),
    Key("queues[].dead_letter_queue", QueueConfig, "dead_letter_queue", "Where a message goes after "
        "`max_retries` failed receives, with `workerless.*` attributes. Unset: the queue's own SQS redrive policy "
        "applies.", allowed=QUEUE_NAME_RULE + "; not a polled queue", example="payments-dlq"),
    Key("queues[].retention_period", QueueConfig, "retention_period", "Messages older than this (seconds since "
        "sent) are deleted undelivered and counted as expired.", Range(60, 1209600)),
    Key("queues[].max_concurrency", QueueConfig, "max_concurrency", "Deliveries in flight from this queue at most, "
        "inside `concurrency`. Unset: no cap.", Range(1, 10000)),
    Key("queues[].fleet_max_concurrency", QueueConfig, "fleet_max_concurrency", "Deliveries in flight from this "
        "queue across every daemon of the fleet. Needs `[fleet]`.", Range(1, 100000)),
    Key("queues[].max_concurrency_per_group", QueueConfig, "max_concurrency_per_group", "Deliveries of one "
        "`MessageGroupId` (a fair queue's tenant) in flight at most; a message over it waits in the daemon, kept "
        "invisible. Standard queues only: a FIFO group is always one at a time. Unset: no cap.", Range(1, 10000)),
    Key("queues[].filter", QueueConfig, "filter", "Lambda filter criteria: a message that matches none is deleted "
        "undelivered (counted `Filtered`). Unset: every message is delivered.",
        allowed=f"a JSON pattern string, or a list of 1 to {MAX_FILTERS}", example='{"body": {"kind": ["order"]}}'),
    Key("queues[].sns", QueueConfig, "sns", "`unwrap`: deliver an SNS envelope's `Message` and its attributes, as "
        "raw message delivery would.", Choices(("raw", "unwrap"))),
    Key("queues[].large_payloads", QueueConfig, "large_payloads", "Fetch the S3 payload of the AWS SQS extended "
        "clients' pointer before delivery.", allowed="true or false", example=True),
    Key("queues[].delete_payloads", QueueConfig, "delete_payloads", "Delete the S3 object after a successful "
        "delivery. Needs `large_payloads = true`.", allowed="true or false", example=False),
    Key("queues[].idempotency_key", QueueConfig, "idempotency_key", "Turns idempotent delivery on for the queue: "
        "a copy of a message whose key already succeeded is deleted undelivered. Unset: at least once. A reload "
        "applies a change once the queue's deliveries claimed under the old key have finished.",
        allowed="`message_id`, `dedup_id` (FIFO), `attribute:NAME` or `body:PATH`", example="body:order.id"),
    Key("targets.<name>.type", HttpTargetConfig, "type", "An HTTP target: one POST per message, as aws-sqsd "
        "sends, or per batch (`batch_size`).", Choices(("http", "lambda"))),
    Key("targets.<name>.url", HttpTargetConfig, "url", "Where each message is POSTed (Beanstalk: HTTP path). A "
        "`beanstalk.sqsd.path` message attribute replaces the path when `batch_size` is 1. An IP address is "
        "connected to as written; a host name is looked up for a new connection at most every 5 s, and again after "
        "a failed one. Required.",
        allowed="an `http://` or `https://` URL with a host", example="http://127.0.0.1:8080/", option="http"),
    Key("targets.<name>.content_type", HttpTargetConfig, "content_type", "The `Content-Type` of every POST "
        "of one message (Beanstalk: MIME type); a batch is `application/json`.", allowed="a non-empty string",
        example="application/json"),
    Key("targets.<name>.connect_timeout", HttpTargetConfig, "connect_timeout", "Seconds to wait for a connection.",
        Range(1, 60)),
    Key("targets.<name>.inactivity_timeout", HttpTargetConfig, "inactivity_timeout", "Seconds to wait for the "
        "answer; no answer is a failure.", Range(1, 1800)),
    Key("targets.<name>.max_connections", HttpTargetConfig, "max_connections", "Connections to the app at most "
        "(Beanstalk: HTTP connections). Below the deliveries that can reach the target at once (`concurrency`, "
        "or the target's or its queues' `max_concurrency`), `check` and the start warn: the other slots would "
        "wait for a connection.", Range(1, 10000)),
    Key("targets.<name>.keepalive_idle", HttpTargetConfig, "keepalive_idle", "Seconds a kept-alive connection "
        "may sit idle before it is closed: keep it below the app server's own idle timeout.", Range(0, 3600)),
    Key("targets.<name>.ready_path", HttpTargetConfig, "ready_path", "Receive nothing for this target's queues "
        "until `GET` of this path on the url's host and port answers 2xx. Unset: no check.",
        allowed="a path starting with `/`", example="/health"),
    Key("targets.<name>.signing_secret_env", HttpTargetConfig, "signing_secret_env", "The environment variable "
        "holding the secret that signs each POST (`X-Workerless-Signature`). Unset: unsigned.",
        allowed="the name of a variable that is set and not empty", example="WORKERLESS_SIGNING_SECRET"),
    Key("targets.<name>.headers", HttpTargetConfig, "headers", "Extra headers on every POST; `${VAR}` is filled "
        "from the environment at start. Values are never logged.",
        allowed="a table of header names to strings; not the daemon's own headers", example={"X-Tenant": "acme"}),
    Key("targets.<name>.batch_size", HttpTargetConfig, "batch_size", "Messages per POST. Above 1, each POST is "
        "Lambda's SQS event (`{\"Records\": [...]}`, under 6 MB) and a 2xx answer's `batchItemFailures` fail just "
        "the records they name; on a FIFO queue a POST holds one message group, at most 10.", Range(1, 10000)),
    Key("targets.<name>.max_batching_window", HttpTargetConfig, "max_batching_window", "Seconds to wait to fill "
        "`batch_size` messages from several receives of one queue (not on FIFO queues).", Range(0, 300)),
    *flow_keys(HttpTargetConfig, "429 or 503 without `Retry-After`: `backpressure` halves the target's in-flight "
               "limit and the attempt does not count toward `max_retries`; `failure` counts it as a failure."),
    Key("targets.<name>.type", LambdaTargetConfig, "type", "A Lambda target: messages received together go into "
        "one `Invoke` with Lambda's own SQS event.", Choices(("http", "lambda"))),
    Key("targets.<name>.function", LambdaTargetConfig, "function", "The function's name or ARN. Required, "
        "unless `endpoint_url` is set: then `function`, the name the emulator in AWS's Lambda images serves.",
        allowed="a non-empty string", example="billing-fn", option="function"),
    Key("targets.<name>.qualifier", LambdaTargetConfig, "qualifier", "An alias or version to invoke.",
        allowed="a non-empty string", example="live"),
    Key("targets.<name>.batch_size", LambdaTargetConfig, "batch_size", "Records per invocation (never over 6 MB); "
        f"up to {WINDOW_BATCH_SIZE} with `max_batching_window` > 0 (not on FIFO queues).", Range(1, 10)),
    Key("targets.<name>.timeout", LambdaTargetConfig, "timeout", "Seconds an invocation may take.", Range(1, 900)),
    Key("targets.<name>.max_batching_window", LambdaTargetConfig, "max_batching_window", "Seconds to wait to fill "
        "`batch_size` records from several receives of one queue (not on FIFO queues).", Range(0, 300)),
    Key("targets.<name>.endpoint_url", LambdaTargetConfig, "endpoint_url", "The Invoke API of a container beside "
        "the daemon instead of Lambda: the image that ran on Lambda, whose Runtime Interface Emulator listens on "
        "8080 ([Lambda handlers in containers](../deployment/lambda-containers.md)). Its answers are read as "
        "Lambda's; no IAM permission is needed; `max_concurrency` defaults to 1, as the emulator runs one "
        "invocation at a time. Requests to a loopback address are never signed; others are signed when the "
        "daemon has credentials. Unset: Lambda's endpoint.", allowed="an `http://` or `https://` URL with a host, "
        "without the Invoke path", example="http://127.0.0.1:8080"),
    *flow_keys(LambdaTargetConfig, "A throttle: `backpressure` halves the target's in-flight limit and the attempt "
               "does not count toward `max_retries`; `failure` counts it as a failure."),
    Key("aws.region", AwsConfig, "region", "The AWS region, first in the region chain (then `AWS_REGION`, "
        "`AWS_DEFAULT_REGION`, the profile, ECS or EC2 metadata). There is no default region.",
        allowed="an AWS region name", example="eu-west-1"),
    Key("aws.endpoint_url", AwsConfig, "endpoint_url", "One endpoint for every AWS service (a local emulator). "
        "Unset: botocore's (`AWS_ENDPOINT_URL`, `AWS_ENDPOINT_URL_SQS`, ...).", allowed="a URL",
        example="http://127.0.0.1:4566"),
    Key("aws.profile", AwsConfig, "profile", "The AWS profile of the config files. Unset: `AWS_PROFILE` or the "
        "default chain.", allowed="a profile in the AWS config files", example="default"),
    Key("aws.ca_bundle", AwsConfig, "ca_bundle", "PEM file of the CAs that AWS endpoints and `https://` targets "
        "are verified against, relative to the config file. Unset: `AWS_CA_BUNDLE`, else botocore's bundle (the "
        "system's CAs for targets).", allowed="a file that exists", example="certs/ca.pem"),
    Key("periodic.file", PeriodicConfig, "file", "A Beanstalk `cron.yaml`, read unchanged, relative to the config "
        "file. Either this or `[[periodic.tasks]]`.", allowed="a readable cron.yaml", example="cron.yaml"),
    Key("periodic.queue", PeriodicConfig, "queue", "The queue scheduled messages are sent to. Required.",
        allowed="one of the `[[queues]]`", example="payments"),
    Key("periodic.claims_table", PeriodicConfig, "claims_table", "DynamoDB table in which each instance claims "
        "each slot, so exactly one sends it; created on demand. Needed when more than one instance runs.",
        allowed=TABLE_NAME_RULE, example="workerless-cron"),
    Key("periodic.tasks", PeriodicConfig, "tasks", "Inline tasks, with the keys of `cron.yaml` entries.",
        allowed="a list of tables", example=[{"name": "report", "url": "/report", "schedule": "@daily"}]),
    Key("periodic.tasks[].name", PeriodicTask, "name", "The task's name (`X-Aws-Sqsd-Taskname`), unique.",
        allowed="a non-empty string", example="nightly-report"),
    Key("periodic.tasks[].url", PeriodicTask, "url", "The path the task's POST goes to.",
        allowed="a path on the local app", example="/tasks/nightly-report"),
    Key("periodic.tasks[].schedule", PeriodicTask, "schedule", "When, in UTC.",
        allowed="a 5-field crontab line or a macro such as `@daily`", example="0 23 * * *"),
    Key("fleet.table", FleetConfig, "table", "DynamoDB table (key `slot`) the fleet-wide limits live in; created "
        "if missing. Required.", allowed=TABLE_NAME_RULE, example="workerless-fleet"),
    Key("fleet.name", FleetConfig, "name", "Daemons with the same table and name share the limits. Required.",
        allowed=f"1-{FLEET_NAME_LENGTH} printable characters", example="orders"),
    Key("fleet.lease", FleetConfig, "lease", "Seconds a daemon's share lives without renewal: about 3 writes per "
        "lease per limit while busy.", Range(3, 120)),
    Key("idempotency.table", IdempotencyConfig, "table", "DynamoDB table (key `slot`) of the claims of idempotent "
        "delivery; created if missing, at start or by the reload that names it. A reload that changes "
        "`[idempotency]` lets the claims made under the old one finish there.", allowed=TABLE_NAME_RULE,
        example="workerless-idempotency"),
    Key("idempotency.expires_after", IdempotencyConfig, "expires_after", "Seconds a success is remembered.",
        Range(60, 31_536_000)),
    Key("idempotency.on_store_failure", IdempotencyConfig, "on_store_failure", "While DynamoDB fails: `hold` "
        "delivers nothing under a key without its claim (keyed queues stop receiving; claims the table refused are "
        "retried in place, their messages kept hidden); `deliver` falls back to at least once, with a WARNING.",
        Choices(("hold", "deliver"))),
    Key("idempotency.validate_payload", IdempotencyConfig, "validate_payload", "Remember a SHA-256 of each "
        "success's payload (the body, or the notification inside with `sns = \"unwrap\"`): a copy of a completed "
        "key with another payload is not deleted as a duplicate but fails as `IdempotencyKeyReused` (retried and "
        "dead-lettered as any failure, counted `IdempotencyKeyConflicts`), never delivered.",
        allowed="true or false", example=True),
    Key("tracing.exporter", TracingConfig, "exporter", "A span per delivery over OTLP/HTTP; the endpoint and the "
        "rest come from the `OTEL_*` variables. Needs the extra `otel`. Only a restart adds, removes or changes "
        "`[tracing]`: a reload that does is refused.", Choices(("otlp",))),
)

def span_default(field: str) -> Any:
    """The span processor's setting where its `OTEL_BSP_*` variable is unset: `TracingConfig`'s default."""
    return field_of(TracingConfig, field).default


# Fields no TOML key sets, and where their value comes from.
NOT_KEYS: dict[tuple[type, str], str] = {
    (Config, "source"): "the configuration file's path, or `command line`",
    (Config, "polling"): "the `[polling]` table", (Config, "queues"): "the `[[queues]]` tables",
    (Config, "targets"): "the `[targets.<name>]` tables", (Config, "aws"): "the `[aws]` table",
    (Config, "periodic"): "the `[periodic]` table", (Config, "fleet"): "the `[fleet]` table",
    (Config, "idempotency"): "the `[idempotency]` table", (Config, "tracing"): "the `[tracing]` table",
    (HttpTargetConfig, "name"): "the target's table name", (LambdaTargetConfig, "name"): "the target's table name",
    (HttpTargetConfig, "signing_secret"): "the value of the variable `signing_secret_env` names",
    (TracingConfig, "max_queue_size"): f"`OTEL_BSP_MAX_QUEUE_SIZE` (default {span_default('max_queue_size')} spans)",
    (TracingConfig, "max_export_batch_size"):
        f"`OTEL_BSP_MAX_EXPORT_BATCH_SIZE` (default {span_default('max_export_batch_size')} spans)",
    (TracingConfig, "schedule_delay_seconds"):
        f"`OTEL_BSP_SCHEDULE_DELAY` in milliseconds (default {round(span_default('schedule_delay_seconds') * 1000)})",
}


def keys_of(owner: type) -> dict[str, Key]:
    """The keys that fill `owner`'s fields, by field: what building reads each with."""
    return {key.field: key for key in KEYS if key.owner is owner}
