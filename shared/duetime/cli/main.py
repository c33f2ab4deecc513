"""The `duetime` command line."""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
from collections.abc import Sequence

from duetime.cli import dlq, history, jobs, local, schedule, timers, worker
from duetime.cli.format import OutputError


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="duetime", description=__doc__)
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    worker.register(commands)
    local.register(commands)
    jobs.register(commands)
    schedule.register(commands)
    history.register(commands)
    dlq.register(commands)
    timers.register(commands)

    args = parser.parse_args(argv)
    try:
        code: int = args.run(args)
    except KeyboardInterrupt:
        return 130
    except (BrokenPipeError, OutputError) as exc:
        # `duetime jobs list | head`: stop quietly; a full disk says so. Point stdout at
        # /dev/null so the interpreter's final flush does not fail again.
        if isinstance(exc, OutputError):
            print(f"duetime: {exc}", file=sys.stderr)
        with contextlib.suppress(OSError, ValueError):
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 1
    except (RuntimeError, OSError) as exc:  # configuration problems: a message, not a traceback
        print(f"duetime: {exc}", file=sys.stderr)
        return 2
    return code
