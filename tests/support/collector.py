"""What a piece of code leaves to Python's cyclic collector, by type: objects of other kinds (a server's greenlets
in the same process, the test runner's own) may come and go in cycles at any time and are not counted."""

from __future__ import annotations

import gc
from collections.abc import Callable


def left_in_cycles(run: Callable[[], None], *kinds: type) -> list[object]:
    """The objects of `kinds` that only the cyclic collector could free after `run()`."""
    gc.collect()
    gc.disable()
    gc.set_debug(gc.DEBUG_SAVEALL)  # what a collection finds unreachable goes to gc.garbage, not away
    try:
        run()
        gc.collect()
        return [found for found in gc.garbage if isinstance(found, kinds)]
    finally:
        gc.set_debug(0)
        gc.garbage.clear()
        gc.enable()
