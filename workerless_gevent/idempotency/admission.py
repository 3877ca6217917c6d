"""What a receive's keyed messages become once their keys are claimed (`Admission`), for the settler to carry out."""

from __future__ import annotations

from dataclasses import dataclass, field

from ..message import Message
from .store import Claim


@dataclass
class Admission:
    """What the settler does with a receive's keyed messages."""
    deliver: list[Message] = field(default_factory=list)
    duplicates: list[Message] = field(default_factory=list)  # completed: delete undelivered
    reused: list[Message] = field(default_factory=list)  # completed with another payload: fail undelivered
    # claimed, but the call outlasted the message's visibility: SQS may have handed it out again meanwhile, and
    # that copy may be claimed once this claim expires; neither delivered nor touched (its claim is given up)
    lapsed: list[Message] = field(default_factory=list)
    later: list[tuple[Message, int]] = field(default_factory=list)  # behind another's claim: visible in so many s
    # claims the table throttled or failed (on_store_failure = "hold"): kept by the daemon and claimed again in
    # place (`guard.Idempotency.retry`), never sent back to be received again
    pending: list[tuple[Message, Claim]] = field(default_factory=list)
    missing: int = 0  # delivered without a key

    def sort(self, received: list[Message], deferred: dict[int, int]) -> None:
        """`deliver` and `later` from what the claims said, in the receive's order."""
        undelivered = set(map(id, self.duplicates + self.reused + self.lapsed))
        undelivered.update(id(message) for message, _ in self.pending)
        for message in received:
            if id(message) in deferred:
                self.later.append((message, deferred[id(message)]))
            elif id(message) not in undelivered:
                self.deliver.append(message)
