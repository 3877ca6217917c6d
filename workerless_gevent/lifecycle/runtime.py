"""Process-wide settings for a daemon whose start builds what lives as long as it does, and whose
deliveries make little cyclic garbage and spawn short greenlets by the thousand.

The garbage collector. Measured on a 20,000-message drain at concurrency 50 (gc.callbacks timing each
collection): at Python's default threshold of 700 a young collection ran every 150 to 230 messages, each
walking the young objects of the receive buffer (hundreds of messages, a few dicts each, alive until
delivered), 57 to 59 ms in all, plus 17 to 31 ms of middle ones, about 4 us per message; they found 168
objects of garbage. At 10,000 the same drain ran 3 young collections (5 ms) and no other. What is built at
start is frozen, so the full collections of a long run never walk it again (31,000 objects, 12 to 37 ms each).

gevent's greenlet tree. By default every greenlet records which greenlet spawned it and the stack it was
spawned from (line numbers worked out frame by frame); receives, batch calls and flushers spawn several per
hundred messages, and nothing here reads that record. GEVENT_TRACK_GREENLET_TREE, when set, still decides.
"""

from __future__ import annotations

import gc
import os

YOUNG_THRESHOLD = 10_000  # allocations (net of frees) between two young collections; Python's default is 700


def settle_runtime() -> None:
    """Once everything is built, before the first receive."""
    gc.freeze()
    _, middle, oldest = gc.get_threshold()
    gc.set_threshold(YOUNG_THRESHOLD, middle, oldest)
    if "GEVENT_TRACK_GREENLET_TREE" not in os.environ:
        import gevent

        gevent.config.track_greenlet_tree = False
