"""The `duetime` command line."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from duetime.cli import dlq, history, jobs, local, schedule, timers, worker


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
    except (RuntimeError, OSError) as exc:  # configuration problems: a message, not a traceback
        print(f"duetime: {exc}", file=sys.stderr)
        return 2
    return code
