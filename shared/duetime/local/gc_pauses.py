"""Fewer garbage collector pauses in the local stack's two processes.

CPython's collector pauses the whole process to walk every object of the generation it
collects. A full (oldest-generation) collection walks everything alive: in the moto process
that is every item of every table and every queued message, so its pauses grow with the
data (measured in `scripts/bench.py`'s steady scenario: one every ~10 s, 190-290 ms, with
every call to the emulator waiting behind it; 120-340 ms in the stack's own process), and at
50 runs a second a 0.3 s stop makes runs start up to a second late.

`freeze_long_lived` moves what is alive once a process has started (modules, botocore's
service models, moto's backends) out of the collector's reach, and can switch automatic full
collections off. Young generations are still collected, so short-lived cycles (a request's
objects) are freed as before; only a cycle that survives two young collections stays until a
full collection runs, or the process ends.
"""

from __future__ import annotations

import gc
from collections.abc import Callable

# A full collection runs after this many middle-generation ones (CPython's default is 10):
# never, in practice.
NO_AUTOMATIC_FULL_COLLECTION = 10**9


def freeze_long_lived(*, full_collections: bool = True) -> Callable[[], None]:
    """Freeze every object alive now (gc.freeze), and without `full_collections` stop the
    automatic full collections. Returns the undo (unfreeze, thresholds as they were)."""
    thresholds = gc.get_threshold()
    gc.freeze()
    if not full_collections:
        gc.set_threshold(thresholds[0], thresholds[1], NO_AUTOMATIC_FULL_COLLECTION)

    def undo() -> None:
        gc.set_threshold(*thresholds)
        gc.unfreeze()

    return undo
