"""The soak's two ends around the daemon: the feeder that sends the messages and the sink's ledger of deliveries."""

from __future__ import annotations

import json
import random
import threading
import time
from typing import Any

from harness import Sqs
from local_app import LocalApp


class Ledger:
    """Every delivery the sink saw, by message number; thread-safe."""

    def __init__(self, failure_rate: float, seed: int) -> None:
        self.failure_rate = failure_rate
        self.rng = random.Random(seed)
        self.lock = threading.Lock()
        self.successes: dict[int, int] = {}  # n -> 2xx answers
        self.answered_at: dict[int, list[float]] = {}  # n -> time.monotonic() of each 2xx
        self.keys: dict[int, str] = {}  # n -> its X-Workerless-Idempotency-Key (the message id), when it has one
        self.failures: dict[int, int] = {}  # n -> 5xx answers
        self.deliveries = 0
        self.redeliveries_after_failure = 0
        self.unparsable = 0

    def judge(self, body: bytes, key: str | None = None) -> int:
        try:
            number = int(json.loads(body)["n"])
        except (ValueError, KeyError, TypeError):
            with self.lock:
                self.unparsable += 1
            return 400
        with self.lock:
            self.deliveries += 1
            if number in self.failures:
                self.redeliveries_after_failure += 1
            if self.rng.random() < self.failure_rate:
                self.failures[number] = self.failures.get(number, 0) + 1
                return 500
            self.successes[number] = self.successes.get(number, 0) + 1
            self.answered_at.setdefault(number, []).append(time.monotonic())
            if key:
                self.keys[number] = key
            return 200

    def delivered(self) -> int:
        with self.lock:
            return len(self.successes)

    def snapshot(self, total: int) -> dict[str, Any]:
        with self.lock:
            return {
                "deliveries": self.deliveries,
                "distinct_succeeded": len(self.successes),
                "lost": total - len([n for n in self.successes if n < total]),
                "duplicates": sum(1 for count in self.successes.values() if count > 1),
                "duplicate_deliveries": sum(count - 1 for count in self.successes.values()),
                "failed_deliveries": sum(self.failures.values()),
                "messages_that_failed_at_least_once": len(self.failures),
                "redeliveries_after_failure": self.redeliveries_after_failure,
                "unexpected_bodies": self.unparsable + len([n for n in self.successes if n >= total]),
            }


def soak_app(ledger: Ledger, delay_ms: float, seed: int) -> LocalApp:
    """The sink: judged by the ledger, each answer held up to twice `delay_ms` at random."""
    rng = random.Random(seed + 1)

    def handle(headers: Any, body: bytes) -> int:
        status = ledger.judge(body, headers.get("X-Workerless-Idempotency-Key"))
        if delay_ms:
            time.sleep(rng.uniform(0, 2 * delay_ms / 1000))
        return status

    return LocalApp(handle)


def message_body(number: int, run: str) -> str:
    return json.dumps({"n": number, "run": run, "pad": "x" * 100})


class Feeder(threading.Thread):
    """Sends messages 0..total-1 in batches of 10 at `rate` per second (0: as fast as it can)."""

    def __init__(self, sqs: Sqs, url: str, total: int, rate: float, run: str) -> None:
        super().__init__(daemon=True)
        self.sqs, self.url, self.total, self.rate, self.run_id = sqs, url, total, rate, run
        self.sent = 0
        self.error: BaseException | None = None

    def run(self) -> None:
        started = time.monotonic()
        try:
            for first in range(0, self.total, 10):
                if self.rate:
                    ahead = first / self.rate - (time.monotonic() - started)
                    if ahead > 0:
                        time.sleep(ahead)
                entries = [{"Id": str(i), "MessageBody": message_body(first + i, self.run_id)}
                           for i in range(min(10, self.total - first))]
                response = self.send(entries)
                if response.get("Failed"):
                    raise RuntimeError(f"send failed: {response['Failed'][:1]}")
                self.sent += len(entries)
        except Exception as error:  # noqa: BLE001 - reported by the main loop
            self.error = error

    def send(self, entries: list[dict[str, Any]]) -> dict[str, Any]:
        for attempt in range(5):
            try:
                return dict(self.sqs.client.send_message_batch(QueueUrl=self.url, Entries=entries))
            except Exception:
                if attempt == 4:
                    raise
                time.sleep(0.5)
        return {}
