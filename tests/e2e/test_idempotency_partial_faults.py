"""Idempotent delivery under faults that come in part, through the real process on moto: a table that throttles
a share of the claim transactions and answers every other write, and a table that fails while a receive's
messages wait in the daemon's buffer. A store failure never sends a message back to SQS to be received again
(a queue's redrive policy counts every receive, delivered or not), and a hold holds receives only."""

from __future__ import annotations

import json
import random
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from tests.e2e.helpers import send_batch
from tests.e2e.test_idempotency import KEY_HEADER, config, order
from tests.e2e.test_idempotency_faults import dynamodb_error, throttled_transaction
from tests.support import Daemon, HttpApp, Queue, build_config_file, count_messages, wait_until
from tests.support.faults import FaultySqs, faulty_sqs_fixture, sqs_env_fixture  # noqa: F401 (fixtures)
from tests.support.http_app import Reply

THROTTLED_SHARE = 0.7
THROTTLED_SECONDS = 15.0


def partly_throttled(rng: random.Random, share: float) -> Callable[[str, dict[str, Any]], Reply | None]:
    """A provisioned table under a burst: `share` of the claim transactions cancelled, each naming
    `ThrottlingError` for some of its items (at least one) and `None` for the rest, as DynamoDB does; every
    other call (completions, probes, extensions, give-ups) answered."""

    def fault(action: str, params: dict[str, Any]) -> Reply | None:
        if action != "TransactWriteItems" or rng.random() >= share:
            return None
        items = len(params.get("TransactItems", []))
        throttled = set(rng.sample(range(items), rng.randint(1, items))) if items else set()
        reasons = [{"Code": "ThrottlingError", "Message": "Throughput exceeds the current capacity of your table"}
                   if index in throttled else {"Code": "None"} for index in range(items)]
        return dynamodb_error("TransactionCanceledException", "Transaction cancelled, please refer cancellation "
                              "reasons for specific reasons", CancellationReasons=reasons)

    return fault


def test_a_partly_throttled_table_delivers_every_message_and_dead_letters_none(
    daemon: Callable[..., Daemon], sqs_env: dict[str, str], faulty_sqs: FaultySqs, http_app: HttpApp, sqs: Any,
    make_queue: Callable[..., Queue], claims_table: str, tmp_path: Path,
) -> None:
    """30 keyed messages on a queue whose redrive policy dead-letters at the 3rd receive; for 15 s the table
    cancels 70 % of the claim transactions with ThrottlingError reasons. Each throttled claim is retried in
    place while its message stays hidden: all 30 reach the app, from their first receive, none the DLQ."""
    dead_letters = make_queue()
    queue = make_queue(RedrivePolicy=json.dumps({"deadLetterTargetArn": dead_letters.arn, "maxReceiveCount": "2"}),
                       VisibilityTimeout="10")
    path = config(tmp_path, http_app, queue, claims_table, visibility_timeout=10)
    proc = daemon(["-c", str(path)], env=sqs_env)
    proc.wait_for_output("workerless started", timeout=60)
    faulty_sqs.fault = partly_throttled(random.Random(48), THROTTLED_SHARE)
    throttled_at = time.monotonic()
    bodies = [order(f"P-{index}", str(index)) for index in range(30)]
    for start in range(0, 30, 10):
        send_batch(sqs, queue.url, bodies[start:start + 10])
    # until the app has every message, or for 15 s (a redrive policy dead-letters them within that otherwise)
    wait_until(lambda: len({request.body for request in list(http_app.requests)}) == 30
               or time.monotonic() - throttled_at >= THROTTLED_SECONDS, THROTTLED_SECONDS + 5)
    cancelled = faulty_sqs.faulted_count("TransactWriteItems")
    faulty_sqs.fault = None
    wait_until(lambda: count_messages(sqs, queue.url) == 0, 90,
               message=lambda: f"{len(http_app.requests)} delivered; log:\n{proc.output()[-3000:]}")
    assert proc.stop(timeout=30) == 0
    assert count_messages(sqs, dead_letters.url) == 0, proc.output()[-3000:]
    delivered = [request.body.decode() for request in http_app.requests]
    assert sorted(set(delivered)) == sorted(bodies)
    print(f"{cancelled} claim transactions cancelled for throttling")
    assert cancelled >= 3, cancelled
    counts = [int(request.headers["x-aws-sqsd-receive-count"]) for request in http_app.requests]
    assert max(counts) == 1, counts  # never sent back to be received again
    assert "is claimed elsewhere" not in proc.output() and "Traceback" not in proc.output()


def test_a_receives_messages_without_a_key_are_delivered_while_the_table_fails(
    daemon: Callable[..., Daemon], sqs_env: dict[str, str], faulty_sqs: FaultySqs, http_app: HttpApp, sqs: Any,
    make_queue: Callable[..., Queue], claims_table: str, tmp_path: Path,
) -> None:
    """One receive brings a keyed message and nine without the key while the table throttles everything: the
    nine are delivered as usual at once (the hold holds receives, not what was received), and the keyed one
    stays with the daemon until the table answers, then is delivered from that same receive."""
    queue = make_queue()
    path = build_config_file(tmp_path, concurrency=1, shutdown_timeout=10,
                             queues=[{"name": queue.name, "idempotency_key": "body:order.id"}],
                             targets={"default": {"type": "http", "url": f"{http_app.url}/work"}},
                             tables={"idempotency": {"table": claims_table, "expires_after": 600}})
    proc = daemon(["-c", str(path)], env=sqs_env)
    proc.wait_for_output("workerless started", timeout=60)
    faulty_sqs.fault = throttled_transaction
    keyless = [json.dumps({"note": f"plain-{index}"}) for index in range(9)]
    send_batch(sqs, queue.url, [order("H-1", "keyed"), *keyless])
    http_app.wait_for_requests(9, timeout=30)  # on the table's back-off (1 s doubling to 30 s) they waited
    assert sorted(request.body.decode() for request in http_app.requests) == sorted(keyless)
    assert faulty_sqs.faulted_count() >= 1
    faulty_sqs.fault = None
    http_app.wait_for_requests(10, timeout=60)
    wait_until(lambda: count_messages(sqs, queue.url) == 0, 30, message=proc.output)
    assert proc.stop(timeout=30) == 0
    keyed = http_app.requests[9]
    assert keyed.headers.get(KEY_HEADER) == "H-1"
    assert keyed.headers["x-aws-sqsd-receive-count"] == "1"


def test_drain_waits_for_the_claims_retried_in_place(
    daemon: Callable[..., Daemon], sqs_env: dict[str, str], faulty_sqs: FaultySqs, http_app: HttpApp, sqs: Any,
    make_queue: Callable[..., Queue], claims_table: str, tmp_path: Path,
) -> None:
    """--drain with every claim throttled for 12 s: between probes the queue comes back empty from its long polls
    (the daemon keeps its messages while their claims are retried in place), and the daemon waits for them, not
    just for the queue (it exited after 6 s, having delivered nothing, on e5c2204)."""
    queue = make_queue(VisibilityTimeout="10")
    bodies = [order(f"D-{index}", str(index)) for index in range(10)]
    send_batch(sqs, queue.url, bodies)
    faulty_sqs.fault = partly_throttled(random.Random(7), 1.0)
    proc = daemon(["-c", str(config(tmp_path, http_app, queue, claims_table, visibility_timeout=10)), "--drain"],
                  env=sqs_env)
    wait_until(lambda: faulty_sqs.faulted_count("TransactWriteItems") >= 1, 30, message=proc.output)
    throttled_until = time.monotonic() + 12  # long polls of 1 s come back empty meanwhile, after each probe
    wait_until(lambda: not proc.alive() or time.monotonic() >= throttled_until, 20)
    assert proc.alive(), f"--drain exited while claims were retried in place:\n{proc.output()[-3000:]}"
    faulty_sqs.fault = None
    assert proc.wait_exit(timeout=60) == 0
    assert sorted({request.body.decode() for request in http_app.requests}) == sorted(bodies)
    assert count_messages(sqs, queue.url) == 0
