"""`duetime worker`: a long-lived worker over the queues (the Fargate worker's command)."""

from __future__ import annotations

import argparse
from types import FrameType

from duetime.cli.options import aws_setup, exit_now, stop_signals
from duetime.cli.types import poll_wait_seconds, positive_int, visibility_seconds
from duetime.domain.jobs import Priority, Runtime


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add `worker` to the main CLI's subcommands."""
    what = "run a long-lived worker over the queues (the Fargate worker)"
    worker = subparsers.add_parser("worker", help=what, description=what)
    worker.add_argument(
        "--runtime",
        choices=[r.value for r in Runtime],
        default="fargate",
        help="whose queues it serves (default fargate)",
    )
    worker.add_argument(
        "--priority",
        action="append",
        choices=[p.value for p in Priority],
        help="queue priorities to serve (repeatable; default: all)",
    )
    worker.add_argument(
        "--concurrency", type=positive_int, default=32, help="runs at once (default 32)"
    )
    worker.add_argument(
        "--wait-seconds", type=poll_wait_seconds, default=10, help="long-poll wait (1-20 s)"
    )
    worker.add_argument(
        "--visibility-seconds",
        type=visibility_seconds,
        default=60,
        help="how long a received message stays hidden (1-43200 s, SQS's limit)",
    )
    worker.add_argument(
        "--stop-timeout-seconds",
        type=positive_int,
        default=90,
        help="how long a stop (SIGTERM) waits for the runs in flight (default 90)",
    )
    worker.set_defaults(run=_run_worker)


def _run_worker(args: argparse.Namespace) -> int:
    from duetime.services.queue_worker import QueueWorker
    from duetime.settings import Env, Settings
    from duetime.wiring import build

    settings = Settings.from_env()
    if not (settings.run_signing_key or settings.run_signing_secret_arn):
        # Else it takes every message and fails it, until the DLQ has them all.
        needed = f"{Env.RUN_SIGNING_SECRET_ARN} or {Env.RUN_SIGNING_KEY}"
        raise RuntimeError(f"no key for run messages: set {needed}")
    with aws_setup():
        parts = build(settings, sqs_poll_seconds=args.wait_seconds)
    runtime = Runtime(args.runtime)
    worker = QueueWorker(
        parts.queue,
        parts.executor,
        runtime,
        # each once: a priority given twice started two pollers on one queue
        priorities=[
            Priority(p) for p in dict.fromkeys(args.priority or [p.value for p in Priority])
        ],
        concurrency=args.concurrency,
        wait_seconds=args.wait_seconds,
        visibility_seconds=args.visibility_seconds,
        heartbeat_seconds=max(1.0, args.visibility_seconds / 3),
        stop_timeout_seconds=args.stop_timeout_seconds,
        # every lane of each queue (DUETIME_QUEUES; the construct's `queue_lanes`)
        lanes={p: len(parts.settings.queue(runtime, p).lanes) for p in Priority},
    )

    signalled: list[int] = []

    def on_signal(signum: int, frame: FrameType | None) -> None:
        if signalled:  # a second signal: leave now (the runs in flight are abandoned)
            exit_now(128 + signum)
        signalled.append(signum)
        worker.stop()

    with stop_signals(on_signal):
        worker.run()
    # Past the stop timeout, the runs still in flight are abandoned (their messages are
    # released): the process exits now, not when their targets return. Logs and metrics are out.
    exit_now(0)
