"""What a receive's keyed messages become once their keys are claimed (`Admission`), for the settler to carry out."""

from __future__ import annotations

from dataclasses import dataclass, field

from ..message import Message


@dataclass
class Admission:
    """What the settler does with a receive's keyed messages."""
    deliver: list[Message] = field(default_factory=list)
    duplicates: list[Message] = field(default_factory=list)  # completed: delete undelivered
    reused: list[Message] = field(default_factory=list)  # completed with another payload: fail undelivered
    # claimed, but the call outlasted the message's visibility: SQS may have handed it out again meanwhile, and
    # that copy may be claimed once this claim expires; neither delivered nor touched (its claim is given up)
    lapsed: list[Message] = field(default_factory=list)
    later: list[tuple[Message, int]] = field(default_factory=list)  # visible again in so many seconds
    missing: int = 0  # delivered without a key
    is_held: bool = False  # `later` holds keyed messages because the table is not usable (not another's claim)
