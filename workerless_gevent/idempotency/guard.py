"""Idempotent delivery as the settler asks for it (`delivery.keyed.DeliveryGuard`): at receive, each keyed
message's claim (in a transaction shared with the receives made meanwhile: `transactions.py`) says deliver,
delete as a duplicate, or wait for the claim held elsewhere; after a success the key becomes `completed` before
the delete (`completions.py`); a message that fails or is released gives its claim up first, so its next
receive may claim it again at once."""

from __future__ import annotations

import logging
import random
from collections.abc import Callable, Collection

import gevent
import gevent.event
import gevent.pool

from ..aws.tables import DynamoTable
from ..config.idempotency import IdempotencyConfig, KeySpec, parse_key
from ..config.model import Config
from ..errors import AWS_ERRORS, describe_error
from ..logs import fields
from ..message import Message
from ..metrics import Count
from .admission import Admission
from .completions import Completions
from .deadlines import claim_deadline, claim_seconds, has_lapsed, within_limits
from .extensions import Extensions
from .health import StoreHold, StoreHealth
from .keys import claim_of, item_key, key_of, payload_digest, shown_key
from .pending import PendingClaims
from .store import Claim, IdempotencyStore, Verdict, VerdictKind
from .transactions import Request, Transactions

logger = logging.getLogger(__name__)

REMOVE_SECONDS = 5.0  # what releasing claims may add to a release (a stop, a failed FIFO group)
REMOVE_AT_ONCE = 10


class Idempotency:
    def __init__(self, config: Config, store: IdempotencyStore, count: Count, rng: random.Random,
                 stopping: gevent.event.Event | None = None) -> None:
        assert config.idempotency is not None
        self.config: IdempotencyConfig = config.idempotency
        self.specs: dict[str, KeySpec] = {}
        self.unwraps: dict[str, bool] = {}
        self.update(config)
        self.store = store
        self.count = count
        self.rng = rng
        self.health = StoreHealth(self.config, rng)
        self.wake: Callable[[], None] = lambda: None  # the poller's, once it is built: a probe answered
        self.transactions = Transactions(self.claim_together, self.not_taken)
        self.pending = PendingClaims(self.claim_keys, rng, stopping or gevent.event.Event())
        self.hold = StoreHold(self.health, store.probe, self.count_probe_failure, self.resume)
        # A write that gets through brings the probe forward: the poller looks again (it spawns the probe), while
        # the claims retried in place keep their back-off until the probe answers (each success must not wake
        # them all against a table that throttles)
        self.health.due = lambda: self.wake()
        self.extensions = Extensions(store, self.health, count)
        self.completions = Completions(store, self.health, self.config.expires_after, count, rng)

    def resume(self) -> None:
        """A probe answered (or the table was made): the held queues receive again, the pending claims are tried."""
        self.wake()
        self.pending.nudge()

    def update(self, config: Config) -> None:
        """The queues' keys, at start and after a reload (a claimed message keeps the key it was claimed under)."""
        self.specs = {queue.name: spec for queue in config.queues
                      if queue.idempotency_key and (spec := parse_key(queue.idempotency_key)) is not None}
        self.unwraps = {queue.name: queue.sns == "unwrap" for queue in config.queues}
        validates = config.idempotency is not None and config.idempotency.validate_payload
        self.payloads = {queue.name: queue.large_payloads for queue in config.queues} if validates else {}

    def has_key(self, queue: str) -> bool:
        return queue in self.specs

    def claim(self, queue: str, messages: list[Message]) -> Admission:
        """Read each message's key and claim the keys (`claim_keys`). A claim the table throttles or fails
        is `pending` (hold: `retry` claims it again in place, the message kept) or delivered without it
        (deliver: at least once). The admission keeps the receive's order (a FIFO group's messages are
        delivered in it, keyed or not)."""
        admission = Admission()
        spec, unwrap = self.specs[queue], self.unwraps[queue]
        keyed: dict[str, tuple[Message, Claim]] = {}
        deferred: dict[int, int] = {}  # id(message) -> seconds until visible again
        for message in messages:
            key = key_of(spec, message, unwrap)
            message.idempotency_key = key
            if key is None:
                admission.missing += 1
                continue
            slot = item_key(queue, key)
            if slot in keyed:  # the same key twice in one receive: the second waits for the first's claim
                deferred[id(message)] = claim_seconds(message)
                continue
            keyed[slot] = (message, Claim(slot, f"{self.rng.getrandbits(64):016x}", 0, self.payload_hash(message)))
        if keyed:
            self.claim_keys(queue, list(keyed.values()), admission, deferred)
        admission.sort(messages, deferred)
        return admission

    def claim_keys(self, queue: str, pairs: list[tuple[Message, Claim]], admission: Admission,
                   deferred: dict[int, int]) -> None:
        """Claim these keys, in a transaction shared with the receives made meanwhile (`transactions`): each
        claimed message gets its token, each copy of a success goes to `duplicates`, each key held elsewhere to
        `deferred`, each claim the table did not take (holding) to `pending`. validate_payload's digest goes with
        the claim, computed once, and is kept for `complete`."""
        if self.health.is_waiting_for_table:  # the table is being made: no claim can be made yet
            admission.pending.extend(pairs)
            return
        self.transactions.claim(Request(queue, pairs, admission, deferred))

    def claim_together(self, requests: list[Request]) -> None:
        """One transaction for the requests' claims; a failed or throttled one is one failed call."""
        # each try's deadline from its message's visibility now (the heartbeat extends it while a claim waits)
        sent = [[Claim(claim.slot, claim.token, claim_deadline(message), claim.payload_hash)
                 for message, claim in request.pairs] for request in requests]
        try:
            verdicts = self.store.claim_all([claim for claims in sent for claim in claims])
        except AWS_ERRORS as error:
            self.failed(requests[0].queue, describe_error(error))
            for request in requests:
                self.not_taken(request)
            return
        throttled = sum(1 for verdict in verdicts if verdict.kind is VerdictKind.THROTTLED)
        if throttled:
            self.failed(requests[0].queue, f"ThrottlingError: {throttled} of {len(verdicts)} claims throttled")
        else:
            self.health.succeeded()
        answers = iter(verdicts)
        for request, claims in zip(requests, sent):
            self.admit(request, claims, [next(answers) for _ in claims])

    def not_taken(self, request: Request) -> None:
        """Claims the table did not take as a whole (a failed call): kept and claimed again in place (hold), or
        delivered without them (deliver: at least once)."""
        if self.health.holds:
            request.admission.pending.extend(request.pairs)
        request.answered = True

    def admit(self, request: Request, sent: list[Claim], verdicts: list[Verdict]) -> None:
        admission, deferred = request.admission, request.deferred
        found: list[Message] = []  # claims an earlier try wrote: their items keep that try's deadline
        for (message, _), claim, verdict in zip(request.pairs, sent, verdicts):
            if verdict.kind is VerdictKind.CLAIMED:
                message.claim, message.payload_hash = claim.token, claim.payload_hash
                if has_lapsed(message, claim):
                    admission.lapsed.append(message)
                elif verdict.found:
                    found.append(message)
            elif verdict.kind is VerdictKind.COMPLETED:
                admission.duplicates.append(message)
            elif verdict.kind is VerdictKind.REUSED:
                admission.reused.append(message)
            elif verdict.kind is VerdictKind.THROTTLED:
                if self.health.holds:  # deliver: delivered without its claim
                    admission.pending.append((message, claim))
            else:
                deferred[id(message)] = within_limits(message, verdict.seconds)
        if found:  # moved to this try's deadline now, not at the heartbeat's next beat
            self.extensions.extend(found)
        request.answered = True

    def failed(self, queue: str, error: str) -> None:
        self.count(queue, "IdempotencyStoreErrors", 1)
        self.health.failed(error)

    def retry(self, queue: str, carried: list[Message], pending: list[tuple[Message, Claim]],
              done: Callable[[Admission | None], None]) -> None:
        """Claim `pending` again in place, after a jittered back-off, until the table takes them; then `done`
        with what `carried` (the pending ones and, on FIFO, the group-mates behind them) becomes, or None if the
        retries were given up (a stop, the queue retired, SQS's receipt limit)."""
        self.pending.retry(queue, carried, pending, done)

    def is_retrying(self) -> bool:
        """Claims are retried in place (their messages kept by the daemon, not in any queue for now)."""
        return len(self.pending.retries) > 0

    def abandon(self, queues: Collection[str]) -> None:
        """A reload took these queues out: their claims retried in place are given up (`retry`'s `done`)."""
        self.pending.abandon(queues)

    def count_probe_failure(self) -> None:
        """A failed probe is one failed call, whatever the number of queues it holds: counted once, under the
        first queue with a key."""
        for queue in self.specs:
            self.count(queue, "IdempotencyStoreErrors", 1)
            return

    def is_claimed(self, message: Message) -> bool:
        """The message holds a claim of ours (taken at its receive, not yet completed or given up)."""
        return message.claim is not None

    def complete(self, message: Message, delete: Callable[[], None]) -> None:
        """After a success: `completed`, then `delete`."""
        claim = claim_of(message)
        message.claim = None
        self.completions.add(message, claim, delete)

    def payload_hash(self, message: Message) -> str | None:
        """validate_payload's hash of a keyed message's payload; None without it."""
        if message.queue not in self.payloads:
            return None
        return payload_digest(message, self.unwraps.get(message.queue, False), self.payloads[message.queue])

    def give_up(self, messages: list[Message]) -> None:
        """Before these messages are visible again (a failure, a release) or dead-lettered: their claims go,
        several at once, within REMOVE_SECONDS. A claim left behind only delays its message until its deadline."""
        claims = [(message, claim_of(message)) for message in messages if message.claim is not None]
        for message, _ in claims:
            message.claim = None
        if not claims:
            return
        pool = gevent.pool.Pool(REMOVE_AT_ONCE)
        for message, claim in claims:
            pool.spawn(self._remove, message, claim)
        if not pool.join(timeout=REMOVE_SECONDS):
            pool.kill(block=False)
            logger.warning("%d idempotency claims not given up within %.0fs: their messages wait for the claims' "
                           "deadlines before they are delivered again", len(pool), REMOVE_SECONDS)

    def _remove(self, message: Message, claim: Claim) -> None:
        try:
            self.store.remove(claim)
        except AWS_ERRORS as error:
            self.count(message.queue, "IdempotencyStoreErrors", 1)
            self.health.failed(describe_error(error))
            logger.warning("queue=%s message=%s key=%s claim not given up (%s): the message waits until the claim's "
                           "deadline before it is delivered again", message.queue, message.message_id,
                           shown_key(message), describe_error(error),
                           extra=fields(queue=message.queue, message_id=message.message_id))

    def extend(self, messages: list[Message]) -> None:
        """The heartbeat kept these messages hidden longer: their claims follow (`extensions.py`)."""
        self.extensions.extend(messages)

    def make_table(self, stopping: gevent.event.Event) -> None:
        """The table, created if missing (as the daemon's other tables are), before the first claim."""
        if DynamoTable(self.store.dynamodb, self.config.table).wait_until_usable(stopping, self.rng,
                                                                          "nothing is claimed under a key"):
            self.health.is_table_ready = True
            self.resume()
