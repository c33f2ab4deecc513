"""What the commands around the local stack share: its state directory, the check that the
`local` extra is installed, and how a long-running command (`local`, `worker`) leaves."""

from __future__ import annotations

import argparse
import contextlib
import importlib.util
import os
import signal
import sys
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from types import FrameType
from typing import NoReturn

DEFAULT_STATE_DIR = ".duetime"  # duetime.local.keys.DEFAULT_STATE_DIR, without importing it
# What the `local` extra installs (pyproject.toml) that these commands import: the runtime (the
# Lambda asset, the Fargate image) goes without it.
LOCAL_STACK_MODULES = ("moto", "flask")  # moto[server]
LOCAL_QUERY_MODULES = ("duckdb",)


def state_dir(text: str) -> Path:
    """A directory's path; an empty one is refused (it was `.`: a signing key written into the
    working directory)."""
    if not text.strip():
        raise argparse.ArgumentTypeError("is empty: give a directory, or leave the flag out")
    return Path(text)


def state_dir_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--state-dir",
        type=state_dir,
        default=Path(DEFAULT_STATE_DIR),
        help="the local stack's state directory: its signing key, its logs and, while it "
        "runs, its local.json, which dlq, timers and history read (default .duetime)",
    )


def missing_local_extra(command: str, modules: Sequence[str]) -> bool:
    """Whether a module of the `local` extra is missing (then says how to install it)."""
    missing = [name for name in modules if importlib.util.find_spec(name) is None]
    if missing:
        print(
            f"{command} needs the local extra: pip install 'duetime[local]' "
            f"({', '.join(missing)} not installed)",
            file=sys.stderr,
        )
    return bool(missing)


def exit_now(status: int) -> NoReturn:
    """Exit at once, the output flushed: threads still running (runs in flight past a stop's
    wait, abandoned: each is retried once its lease is over) are not waited for, as the
    interpreter's exit would, up to a job's timeout (found by an outside audit)."""
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(status)


@contextlib.contextmanager
def stop_signals(handler: Callable[[int, FrameType | None], None]) -> Iterator[None]:
    """SIGTERM and Ctrl-C call `handler` while the command runs; the handlers found before are
    put back when it returns (they stayed: called in process, by a test or another program,
    a command left its own behind, until 2026-11-30)."""
    numbers = (signal.SIGTERM, signal.SIGINT)
    found = {number: signal.signal(number, handler) for number in numbers}
    try:
        yield
    finally:
        for number, previous in found.items():  # None: a handler not set from Python
            signal.signal(number, signal.SIG_DFL if previous is None else previous)


@contextlib.contextmanager
def aws_setup() -> Iterator[None]:
    """Building the AWS clients from the flags and the environment: a value they refuse (an
    endpoint that is no URL, in AWS_ENDPOINT_URL say, or a DUETIME_* setting) is a message,
    not a traceback (exit 2; a missing region too, in duetime.cli.main)."""
    try:
        yield
    except ValueError as exc:
        raise RuntimeError(f"cannot set up AWS: {exc}") from None
