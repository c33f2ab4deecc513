"""Argument types for the `duetime` command line: bad values become argparse messages."""

from __future__ import annotations

import argparse


def positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if value <= 0:
        raise argparse.ArgumentTypeError("must be greater than 0")
    return value


def positive_float(text: str, *, at_most: float | None = None) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
    if not value > 0 or (at_most is not None and value > at_most):
        bound = f" and at most {at_most:g}" if at_most is not None else ""
        raise argparse.ArgumentTypeError(f"must be greater than 0{bound}")
    return value


def positive_seconds(text: str) -> float:
    """A duration of up to a day."""
    return positive_float(text, at_most=86_400)


def port(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a port number") from None
    if not 0 <= value <= 65_535:
        raise argparse.ArgumentTypeError("must be from 0 to 65535 (0: any free port)")
    return value
