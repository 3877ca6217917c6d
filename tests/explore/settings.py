"""A schedule's configuration file for the daemon, as it starts and as its reloads change it (`Run.changes`):
`adds_key` turns the queue's idempotency_key and [idempotency] on, `adds_queue` adds a queue by name (its URL
asked of SQS with GetQueueUrl), `settings` changes the queue's visibility timeouts (the queue drains and
restarts). The target is the app: one message per POST, a batch per POST, or the app's Lambda side."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from tests.support.config_file import build_config_file

if TYPE_CHECKING:
    from .run import Run

EXPIRES_AFTER = 600
FUNCTION = "explore-fn"
LAMBDA_TIMEOUT_SECONDS = 2


def config_file(run: Run, directory: Path) -> Path:
    schedule, names, changes = run.schedule, run.names, run.changes
    keyed = schedule.is_keyed and (not schedule.reload_adds_key or "adds_key" in changes)
    bump = changes.count("settings")
    queue: dict[str, Any] = {"name": names.queue, "url": run.sqs.model.queues[names.queue].url,
                             "visibility_timeout": schedule.visibility_timeout + bump,
                             "error_visibility_timeout": schedule.error_visibility_timeout + bump,
                             "backoff": schedule.backoff, "max_retries": schedule.max_retries,
                             "dead_letter_queue": names.dead_letter if schedule.dead_letter_queue else None,
                             "idempotency_key": schedule.key if keyed else None,
                             "large_payloads": schedule.large_payloads or None}
    queues = [queue]
    if "adds_queue" in changes:
        queues.append({"name": names.extra, "visibility_timeout": schedule.visibility_timeout})
    tables = {"idempotency": {"table": names.table, "expires_after": EXPIRES_AFTER,
                              "on_store_failure": schedule.on_store_failure}} if keyed else {}
    return build_config_file(directory, queues=queues, polling={"poll_for": 1, "batch_size": schedule.batch_size},
                             targets={"default": target(run)}, tables=tables, concurrency=schedule.concurrency,
                             shutdown_timeout=schedule.shutdown_timeout)


def target(run: Run) -> dict[str, Any]:
    schedule = run.schedule
    if schedule.target == "lambda":
        return {"type": "lambda", "function": FUNCTION, "batch_size": schedule.target_batch_size,
                "timeout": LAMBDA_TIMEOUT_SECONDS}
    return {"type": "http", "url": run.app.url, "connect_timeout": 1, "inactivity_timeout": 1,
            "batch_size": schedule.target_batch_size if schedule.target == "http_batch" else None}
