"""`duetime dlq …`: the runs parked in the dead-letter queues, and sending them back.

The commands, their output and where the deployment is found. What reading and redriving do
(how a run reaches a DLQ, why a redrive is one more attempt, when a message leaves the DLQ) is
duetime.services.dead_letters.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from duetime.cli.client import Unreachable
from duetime.cli.format import write_out
from duetime.cli.options import aws_setup, state_dir
from duetime.cli.types import positive_int
from duetime.clock import wall_ms
from duetime.domain.jobs import Priority, Runtime
from duetime.domain.messages import KeysUnavailable
from duetime.domain.text import clean
from duetime.domain.timeutil import rfc3339_ms
from duetime.ports import QueueError, StoreError
from duetime.services.dead_letters import QUEUE_KEYS, DeadRun, RedriveReport
from duetime.settings import Env, QueueUrls, Settings, queue_key, queue_name

if TYPE_CHECKING:
    import boto3

    from duetime.wiring import Components

LOCAL_PREFIX = "duetime"  # the local stack's resource names (duetime.resources)
MAX_REASON_CHARS = 80


# --- the parser ---------------------------------------------------------------------------------


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add `dlq` and its actions to the main CLI's subcommands."""
    dlq = subparsers.add_parser(
        "dlq",
        help="list the runs in the dead-letter queues and send them back",
        description="The runs parked in the dead-letter queues: list them, or redrive them "
        "to their queue as one more attempt. Talks to SQS and DynamoDB directly: configured "
        "by the DUETIME_* environment (as the worker), else the local stack's.",
    )
    actions = dlq.add_subparsers(dest="dlq_command", required=True, metavar="ACTION")

    listing = actions.add_parser(
        "list",
        help="list dead runs: job, run, attempt, reason, dead since",
        description="List the messages on the DLQs without consuming them (each is hidden "
        "for a moment while it is read).",
    )
    _common(listing)
    listing.add_argument(
        "--limit", type=positive_int, default=100, metavar="N", help="at most N (default 100)"
    )
    listing.add_argument("--json", action="store_true", help="print a JSON array")
    listing.set_defaults(run=run_list)

    redrive = actions.add_parser(
        "redrive",
        help="send dead runs back to their queue as one more attempt",
        description="Send dead runs back to their job's queue (its runtime and priority now) "
        "as one more attempt "
        "(attempt n + 1; a failed run is reopened). Each message leaves the DLQ only after "
        "its copy was accepted. Without --run-id, every dead run (up to --limit).",
    )
    _common(redrive)
    redrive.add_argument(
        "--run-id",
        action="append",
        dest="run_ids",
        metavar="RUN_ID",
        help="redrive only this run (repeatable)",
    )
    redrive.add_argument(
        "--limit", type=positive_int, default=None, metavar="N", help="at most N runs"
    )
    redrive.set_defaults(run=run_redrive)

    delete = actions.add_parser(
        "delete",
        help="delete dead runs from the DLQs for good",
        description="Delete the named messages from the DLQs (a dead run you have looked at "
        "and will not send back: its job is gone, its body is no run message). The run's "
        "record stays as it ended.",
    )
    _common(delete)
    delete.add_argument(
        "ids",
        nargs="+",
        metavar="ID",
        help="a run id, or the SQS message id `dlq list --json` shows (a body that is no run)",
    )
    delete.set_defaults(run=run_delete)


def _common(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--queue",
        action="append",
        dest="queues",
        choices=QUEUE_KEYS,
        metavar="RUNTIME/PRIORITY",
        help=f"only this queue's DLQ (repeatable; one of {', '.join(QUEUE_KEYS)}; default all)",
    )
    parser.add_argument(
        "--state-dir",
        type=state_dir,
        default=".duetime",
        help="the local stack's state directory, used when DUETIME_QUEUES is not set",
    )


# --- the commands -------------------------------------------------------------------------------


def run_list(args: argparse.Namespace) -> int:
    from botocore.exceptions import BotoCoreError, ClientError

    from duetime import wiring

    dead_runs = wiring.dead_runs(deployment(args))
    try:
        dead, total = dead_runs.read(_queues(args), args.limit)
    except (BotoCoreError, ClientError, KeysUnavailable) as exc:  # (the key: exit 2 until a
        return _failed(f"cannot read the DLQs: {exc}")  # review, 2026-12-01)
    if args.json:
        write_out(json.dumps([_as_json(d) for d in dead], indent=2))
        return 0
    write_out(_table(dead), end="")
    if total > len(dead):
        write_out(f"\nshowing {len(dead)} of about {total} (--limit)")
    return 0


def run_redrive(args: argparse.Namespace) -> int:
    from botocore.exceptions import BotoCoreError, ClientError

    from duetime import wiring

    dead_runs = wiring.dead_runs(deployment(args))
    report = RedriveReport([], [])
    try:
        dead_runs.redrive(
            _queues(args),
            run_ids=set(args.run_ids) if args.run_ids else None,
            limit=args.limit,
            now_ms=wall_ms(),
            report=report,
        )
    except (
        BotoCoreError,
        ClientError,
        StoreError,
        QueueError,
        KeysUnavailable,
        KeyboardInterrupt,
    ) as exc:
        # What was sent back before the stop is said first: those runs left the DLQ and run
        # again (until 2026-11-30 only the error was printed; found by an outside audit).
        _redriven(report)
        if isinstance(exc, KeyboardInterrupt):
            raise
        return _failed(f"redrive stopped: {exc} (messages not yet sent back are still in the DLQ)")
    _redriven(report)
    for dead, why in report.skipped:
        shown = clean(dead.run_id or dead.letter.message_id)  # an unsigned body's are anyone's
        write_out(f"skipped   {shown}  {clean(why)}  (left in the DLQ)")
    missing: list[str] = []
    if args.run_ids:
        found = {d.run_id for d, *_ in report.redriven} | {d.run_id for d, _ in report.skipped}
        missing = sorted(set(args.run_ids) - found - {d.run_id for d in report.deferred})
    left = [d.run_id or "" for d in report.deferred]
    if args.limit is not None and len(report.redriven) >= args.limit:
        left, missing = left + missing, []  # the limit stopped the reading: not looked for
    for run in left:
        write_out(f"left      {clean(run)}  (--limit: for a later redrive)")
    write_out(f"{len(report.redriven)} redriven, {len(report.skipped)} skipped")
    if missing:
        return _failed(f"not in the DLQs: {', '.join(clean(m) for m in missing)}")
    return 0


def run_delete(args: argparse.Namespace) -> int:
    from botocore.exceptions import BotoCoreError, ClientError

    from duetime import wiring

    dead_runs = wiring.dead_runs(deployment(args))
    try:
        deleted = dead_runs.delete(_queues(args), set(args.ids))
    except (BotoCoreError, ClientError, KeysUnavailable) as exc:
        return _failed(f"delete stopped: {exc}")
    for dead in deleted:
        shown = clean(dead.run_id or dead.letter.message_id)
        write_out(f"deleted   {shown}  from {dead.queue}  (a run record it has stays)")
    write_out(f"{len(deleted)} deleted")
    found = {d.run_id for d in deleted} | {d.letter.message_id for d in deleted}
    missing = sorted(set(args.ids) - found)
    if missing:
        return _failed(f"not in the DLQs: {', '.join(clean(m) for m in missing)}")
    return 0


def _redriven(report: RedriveReport) -> None:
    for dead, attempt, queue in report.redriven:
        write_out(f"redriven  {clean(dead.run_id or '')}  attempt {attempt}  to {queue}")


# --- output -------------------------------------------------------------------------------------


def _table(dead: Sequence[DeadRun]) -> str:
    header = ("QUEUE", "TENANT", "JOB ID", "RUN ID", "ATTEMPT", "DEAD SINCE", "REASON")
    rows = [
        (
            d.queue,
            clean(d.message.tenant) if d.message else "-",  # an unsigned body's are anyone's
            clean(d.message.job_id) if d.message else "-",
            clean(d.run_id or "-"),
            str(d.message.attempt) if d.message else "-",
            rfc3339_ms(d.letter.sent_ms) if d.letter.sent_ms else "-",
            _reason(d),
        )
        for d in dead
    ]
    if not rows:
        return "no dead runs\n"
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header))]
    return "".join(
        "  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip() + "\n"
        for row in [header, *rows]
    )


def _as_json(dead: DeadRun) -> dict[str, Any]:
    m = dead.message
    return {
        "queue": dead.queue,
        "job_id": m.job_id if m else None,
        "run_id": dead.run_id,
        "tenant": m.tenant if m else None,
        "scheduled_for": rfc3339_ms(m.scheduled_ms) if m else None,
        "attempt": m.attempt if m else None,
        "reason": dead.letter.reason,
        "dead_since": rfc3339_ms(dead.letter.sent_ms) if dead.letter.sent_ms else None,
        "message_id": dead.letter.message_id,
        "body": None if m else dead.letter.body,
    }


def _reason(dead: DeadRun) -> str:
    if dead.message is None:
        return "unreadable body (moved after repeated receives)"
    if dead.letter.reason is None:
        return "no reason: moved after repeated receives (a worker died on it)"
    text = clean(dead.letter.reason)  # no terminal control: `\u001b`, as elsewhere
    return text if len(text) <= MAX_REASON_CHARS else text[: MAX_REASON_CHARS - 1] + "…"


def _queues(args: argparse.Namespace) -> list[str]:
    """The --queue keys, each once (a repeated one was read twice: every run listed twice)."""
    return list(dict.fromkeys(args.queues or QUEUE_KEYS))


# --- configuration ------------------------------------------------------------------------------


def deployment(args: argparse.Namespace) -> Components:
    """The deployment: the DUETIME_* environment (as the worker reads it), else the local
    stack started with --state-dir. RuntimeError (a CLI message) when there is neither."""
    from pathlib import Path

    from duetime.wiring import build

    if os.environ.get(Env.QUEUES):
        with aws_setup():
            return build(Settings.from_env())
    from duetime.local.endpoint import moto_session, read_local_endpoint
    from duetime.local.keys import message_key

    local = read_local_endpoint(Path(args.state_dir))
    if local is None:
        raise RuntimeError(
            "no queues to read: set the DUETIME_* environment (DUETIME_QUEUES, the tables) as "
            "for the worker, or start `duetime local` (from this directory, or pass its "
            "--state-dir)"
        )
    # The clients made for the local stack too (AWS_MAX_ATTEMPTS=abc, a local.json whose
    # endpoint is no URL: a traceback until 2026-12-01; an outside CLI audit).
    with aws_setup():
        session = moto_session(local.region)
        settings = _local_settings(session, local.endpoint_url)
    # Runs sent back must be signed with the key the local stack's workers verify.
    settings = replace(settings, run_signing_key=message_key(Path(args.state_dir)))
    with aws_setup():
        return build(settings, session, endpoint_url=local.endpoint_url)


def _local_settings(session: boto3.Session, endpoint_url: str) -> Settings:
    from botocore.exceptions import BotoCoreError, ClientError

    sqs = session.client("sqs", endpoint_url=endpoint_url)
    queues: dict[str, QueueUrls] = {}
    try:
        for runtime in Runtime:
            for priority in Priority:
                urls = [
                    sqs.get_queue_url(QueueName=queue_name(LOCAL_PREFIX, runtime, priority, d))[
                        "QueueUrl"
                    ]
                    for d in (False, True)
                ]
                queues[queue_key(runtime, priority)] = QueueUrls(urls[0], urls[1])
    except (BotoCoreError, ClientError) as exc:
        raise Unreachable(f"cannot reach the local stack at {endpoint_url}: {exc}") from None
    return Settings(
        jobs_table=f"{LOCAL_PREFIX}-jobs",
        timers_table=f"{LOCAL_PREFIX}-timers",
        runs_table=f"{LOCAL_PREFIX}-runs",
        queues=queues,
    )


def _failed(message: str) -> int:
    print(f"duetime: {message}", file=sys.stderr)
    return 1
