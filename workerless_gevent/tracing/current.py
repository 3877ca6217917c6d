"""Which delivery span is current in a greenlet, for the log lines made while it runs and settles and for the
settler's retry or dead letter (`Tracing.note`). A slot's greenlet runs one delivery at a time, and each greenlet
begins with an empty context: its ContextVar is set once, at its first delivery, to a holder that each delivery
then takes, current until it is finished. Setting the ContextVar itself at each start and finish (a copy of the
context's mapping each time) and reading it back cost a fifth of an unsampled delivery's span."""

from __future__ import annotations

import logging
from contextvars import ContextVar
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .spans import Delivery


@dataclass(slots=True, eq=False)
class Held:
    delivery: Delivery | None = None


CURRENT: ContextVar[Held | None] = ContextVar("workerless_delivery_span", default=None)  # per greenlet


def held() -> Held:
    """This greenlet's holder, made at its first delivery."""
    holder = CURRENT.get()
    if holder is None:
        holder = Held()
        CURRENT.set(holder)
    return holder


def current() -> Delivery | None:
    holder = CURRENT.get()
    return None if holder is None or holder.delivery is None or holder.delivery.is_finished else holder.delivery


class TraceIds(logging.Filter):
    """`trace_id` and `span_id` on every log record made while a delivery span is current."""

    def filter(self, record: logging.LogRecord) -> bool:
        delivery = current()
        if delivery is not None:
            record.trace_id = format(delivery.trace_id, "032x")
            record.span_id = format(delivery.span_id, "016x")
        return True
