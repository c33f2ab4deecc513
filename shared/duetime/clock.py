"""The wall clock: the one reading of the current time, in epoch milliseconds.

The core never reads it: services and adapters take a `clock` argument, which duetime.wiring
sets to this function and the tests to clocks of their own.
"""

from __future__ import annotations

import time


def wall_ms() -> int:
    return time.time_ns() // 1_000_000
