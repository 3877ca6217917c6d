"""The claims of receives made at once, gathered into shared transactions: a receive's claims go out at once when
no transaction is on its way; behind one, the receives that come meanwhile gather, and the next goes when it
ends, when 100 claims (TransactWriteItems' limit) wait, or when the latest has been on its way BEHIND_SECONDS (a
slow call holds back no receive longer). A busy daemon then sends one transaction for several receives, not one
each: each request costs the daemon (and DynamoDB) far more than the claims it carries."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field

import gevent.event

from ..message import Message
from .admission import Admission
from .store import Claim

MAX_CLAIMS = 100  # TransactWriteItems' limit on the items of one transaction
MAX_IN_FLIGHT = 16  # transactions on their way at once: full ones go out beside the one on its way
BEHIND_SECONDS = 0.5  # DynamoDB answers a transaction in tens of ms: one this slow is not waited for


@dataclass(eq=False)
class Request:
    """One receive's keys (or claims retried in place), filled in by the transaction that carries them."""
    queue: str
    pairs: list[tuple[Message, Claim]]
    admission: Admission
    deferred: dict[int, int]  # id(message) -> seconds until visible again
    slots: frozenset[str] = field(init=False)
    answered: bool = False  # its verdicts are in its admission

    def __post_init__(self) -> None:
        self.slots = frozenset(claim.slot for _, claim in self.pairs)

    def __len__(self) -> int:
        return len(self.pairs)


class Transactions:
    def __init__(self, claim_together: Callable[[list[Request]], None],
                 unanswered: Callable[[Request], None]) -> None:
        self.claim_together = claim_together  # one transaction for these requests; marks each answered
        self.unanswered = unanswered  # a request its transaction never answered (the sender was killed)
        self.gathered: list[Request] = []
        self.in_flight = 0
        self.sent_at = 0.0  # time.monotonic() of the latest transaction's start
        self.behind_seconds = BEHIND_SECONDS
        self.ended = gevent.event.Event()  # replaced as each transaction ends: the gathered look again

    def claim(self, request: Request) -> None:
        """Returns once a transaction has carried `request` (sent by this greenlet or by another's)."""
        self.gathered.append(request)
        try:
            while not request.answered:
                behind = self.behind_seconds - (time.monotonic() - self.sent_at)
                if request in self.gathered and (self.in_flight == 0 or (self.in_flight < MAX_IN_FLIGHT and (
                        behind <= 0 or sum(map(len, self.gathered)) >= MAX_CLAIMS))):
                    self._send()
                else:  # a transaction on its way (perhaps carrying this request) ends first, or gets slow
                    waits = request in self.gathered and self.in_flight < MAX_IN_FLIGHT
                    self.ended.wait(max(0.01, behind) if waits else None)
        finally:  # killed while it waited (a stop): nobody would use its claims
            if request in self.gathered:
                self.gathered.remove(request)

    def _send(self) -> None:
        """The oldest gathered requests, up to MAX_CLAIMS, in one transaction. A request with a key another of the
        batch claims waits for the next (one transaction may not write an item twice), which finds the key held."""
        batch: list[Request] = []
        slots: set[str] = set()
        claims = 0
        for request in self.gathered:
            if batch and claims + len(request) > MAX_CLAIMS:
                break
            if request.slots & slots:
                continue
            batch.append(request)
            slots |= request.slots
            claims += len(request)
        taken = set(map(id, batch))
        self.gathered = [request for request in self.gathered if id(request) not in taken]
        self.in_flight += 1
        self.sent_at = time.monotonic()
        try:
            self.claim_together(batch)
        finally:
            self.in_flight -= 1
            for request in batch:
                if not request.answered:
                    self.unanswered(request)
                    request.answered = True
            ended, self.ended = self.ended, gevent.event.Event()
            ended.set()
