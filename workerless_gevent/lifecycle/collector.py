"""Python's cyclic garbage collector, set for a daemon whose start builds what lives as long as it does,
and whose deliveries make little cyclic garbage.

Measured on a 20,000-message drain at concurrency 50 (gc.callbacks timing each collection): at Python's
default threshold of 700 a young collection ran every 150 to 230 messages, each walking the young objects
of the receive buffer (hundreds of messages, a few dicts each, alive until delivered), 57 to 59 ms in all,
plus 17 to 31 ms of middle ones, about 4 us per message; they found 168 objects of garbage. At 10,000 the
same drain ran 3 young collections (5 ms) and no other. What is built at start is frozen, so the full
collections of a long run never walk it again (31,000 objects, 12 to 37 ms each).
"""

from __future__ import annotations

import gc

YOUNG_THRESHOLD = 10_000  # allocations (net of frees) between two young collections; Python's default is 700


def settle_collector() -> None:
    """Once everything is built, before the first receive: freeze it, and collect the young generation less often."""
    gc.freeze()
    _, middle, oldest = gc.get_threshold()
    gc.set_threshold(YOUNG_THRESHOLD, middle, oldest)
