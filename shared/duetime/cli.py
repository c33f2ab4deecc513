"""The `duetime` command line."""

from __future__ import annotations

import argparse
import signal
import sys
from collections.abc import Sequence
from types import FrameType

from duetime.domain.jobs import Priority, Runtime


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="duetime", description=__doc__)
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    worker = commands.add_parser(
        "worker", help="run a long-lived worker over the queues (the Fargate worker)"
    )
    worker.add_argument("--runtime", choices=[r.value for r in Runtime], default="fargate")
    worker.add_argument(
        "--priority",
        action="append",
        choices=[p.value for p in Priority],
        help="queue priorities to serve (repeatable; default: all)",
    )
    worker.add_argument("--concurrency", type=_positive, default=8)
    worker.add_argument("--wait-seconds", type=_positive, default=10, help="long-poll wait")
    worker.add_argument("--visibility-seconds", type=_positive, default=60)
    worker.add_argument("--stop-timeout-seconds", type=_positive, default=90)
    worker.set_defaults(run=_run_worker)

    args = parser.parse_args(argv)
    try:
        code: int = args.run(args)
    except KeyboardInterrupt:
        return 130
    except RuntimeError as exc:  # configuration problems: a message, not a traceback
        print(f"duetime: {exc}", file=sys.stderr)
        return 2
    return code


def _positive(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if value <= 0:
        raise argparse.ArgumentTypeError("must be greater than 0")
    return value


def _run_worker(args: argparse.Namespace) -> int:
    from duetime.services.queue_worker import QueueWorker
    from duetime.wiring import components

    parts = components()
    worker = QueueWorker(
        parts.queue,
        parts.executor,
        Runtime(args.runtime),
        priorities=[Priority(p) for p in args.priority] if args.priority else list(Priority),
        concurrency=args.concurrency,
        wait_seconds=args.wait_seconds,
        visibility_seconds=args.visibility_seconds,
        heartbeat_seconds=max(1.0, args.visibility_seconds / 3),
        stop_timeout_seconds=args.stop_timeout_seconds,
    )

    def on_signal(signum: int, frame: FrameType | None) -> None:
        worker.stop()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    worker.run()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
