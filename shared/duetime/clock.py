"""The wall clock: the one reading of the current time, in epoch milliseconds.

The core never reads it: services and adapters take a `clock` argument, which duetime.wiring
sets to this function and the tests to clocks of their own. `wait_until` waits by such a clock.
"""

from __future__ import annotations

import time
from collections.abc import Callable


def wall_ms() -> int:
    return time.time_ns() // 1_000_000


def wait_until(
    instant_ms: int,
    stopping: Callable[[], bool] | None,
    *,
    clock: Callable[[], int],
    sleep: Callable[[float], None],
) -> bool:
    """Wait for `instant_ms` by `clock` (in 0.1 s slices, asking `stopping` before each, if
    it may stop): whether it stopped. A due instant returns False at once."""
    ahead = instant_ms - clock()
    if ahead <= 0:
        return False
    if stopping is None:
        sleep(ahead / 1000)
        return False
    for _ in range(-(-ahead // 100)):
        if stopping():
            return True
        sleep(min(0.1, max(0, instant_ms - clock()) / 1000))
    return stopping()
