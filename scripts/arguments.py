"""argparse types for the scripts' numeric options: a value out of its range is a usage error
naming the option, not a traceback or a result computed from nonsense."""

from __future__ import annotations

import argparse
import math
from collections.abc import Callable
from typing import Any


def bounded(
    kind: Callable[[str], float],
    *,
    minimum: float | None = None,
    above: float | None = None,
    maximum: float | None = None,
) -> Callable[[str], Any]:
    """A finite `kind` (int or float) within the bounds."""
    what = "an integer" if kind is int else "a number"

    def parse(text: str) -> Any:
        try:
            value = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected {what}, got {text!r}") from None
        if not math.isfinite(value):
            raise argparse.ArgumentTypeError(f"expected a finite number, got {text!r}")
        if above is not None and value <= above:
            raise argparse.ArgumentTypeError(f"must be above {above:g}, got {text}")
        if minimum is not None and value < minimum:
            raise argparse.ArgumentTypeError(f"must be at least {minimum:g}, got {text}")
        if maximum is not None and value > maximum:
            raise argparse.ArgumentTypeError(f"must be at most {maximum:g}, got {text}")
        return value

    return parse


COUNT = bounded(int, minimum=1)  # shards, queues, tasks, slots, quotas: one or more
WHOLE = bounded(int, minimum=0)  # how many, none included
POSITIVE = bounded(float, above=0)
NON_NEGATIVE = bounded(float, minimum=0)
SHARE = bounded(float, minimum=0, maximum=1)
