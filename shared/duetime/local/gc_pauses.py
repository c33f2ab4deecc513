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
objects) are freed as before; a cycle that survives two young collections waits for the next
full collection, which `IdleFullCollections` makes when the process is quiet (at most 30
requests since its last look, once a second: an idle `duetime local`'s pollers make 7-19), or
after ten minutes of a collection being due under load: a long-running `duetime local` does
not grow with its garbage, and a pause seldom falls on a busy second.
"""

from __future__ import annotations

import gc
import threading
from collections.abc import Callable

# A threshold no process reaches: no automatic full collection.
NO_AUTOMATIC_FULL_COLLECTION = 10**9
# CPython's default: a full collection is due after this many middle-generation ones.
FULL_COLLECTION_DUE_AFTER = 10
# Requests between two looks (a second apart) that still leave a process quiet: an idle local
# stack's pollers and stream readers make 7-19 a second, a load hundreds.
QUIET_REQUESTS = 30


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


class IdleFullCollections:
    """Full collections where `freeze_long_lived(full_collections=False)` stopped the automatic
    ones: one is made when it is due (as many middle-generation collections since the last
    one as CPython waits for) and `activity()` (a count of requests taken) has moved by at
    most `quiet` since the last look, or when it has been due for `overdue_s` of load."""

    def __init__(
        self,
        activity: Callable[[], int],
        *,
        every_s: float = 1.0,
        overdue_s: float = 600.0,
        due_after: int = FULL_COLLECTION_DUE_AFTER,
        quiet: int = QUIET_REQUESTS,
    ) -> None:
        self._activity = activity
        self._quiet = quiet
        self._every_s = every_s
        self._overdue_looks = max(1, round(overdue_s / every_s))
        self._due_after = due_after
        self._seen = activity()
        self._due_looks = 0
        self.collections = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="idle-full-gc", daemon=True)

    def look(self) -> bool:
        """One look: collect if a full collection is due and the process is quiet or the
        collection overdue. Whether it collected."""
        before, self._seen = self._seen, self._activity()
        if gc.get_count()[2] < self._due_after:
            self._due_looks = 0
            return False
        self._due_looks += 1
        busy = self._seen - before > self._quiet
        if busy and self._due_looks < self._overdue_looks:
            return False
        gc.collect()
        self._due_looks = 0
        self.collections += 1
        return True

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join()

    def _run(self) -> None:
        while not self._stop.wait(self._every_s):
            self.look()
