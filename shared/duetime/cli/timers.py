"""`duetime timers stuck [--retry]`: the timers whose hand-over to SQS keeps failing.

A timer whose hand-over fails on its own (not with the rest of its page) is parked: moved out
of its partition's way so the shard's sweep goes on, and retried by later sweeps with backoff
(1, 2, 4 … 30 minutes). After 8 attempts it is quarantined: kept, counted in the
`TimersQuarantined` metric (an alarm on AWS), and retried only by `--retry`
(docs/reliability.md, "Stuck timers").

`stuck` lists both kinds with their last reason; `--retry` hands the selected ones over now: each
that goes through is forgotten (its run is on its way), each that fails again stays, with the
new reason.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from typing import Any

from duetime.cli.dlq import deployment
from duetime.cli.format import write_out
from duetime.cli.options import state_dir
from duetime.domain.text import clean
from duetime.domain.timers import StuckTimer
from duetime.domain.timeutil import rfc3339_ms

MAX_REASON_CHARS = 80


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add `timers` and its actions to the main CLI's subcommands."""
    timers = subparsers.add_parser(
        "timers",
        help="timers the sweeper could not hand over (stuck, quarantined)",
        description="Timers whose hand-over to SQS failed on their own. Talks to DynamoDB "
        "and SQS directly: configured by the DUETIME_* environment (as the worker), else the "
        "local stack's.",
    )
    actions = timers.add_subparsers(dest="timers_command", required=True, metavar="ACTION")
    stuck = actions.add_parser(
        "stuck",
        help="list stuck timers; --retry hands them over now",
        description="List the timers parked after a failed hand-over (retried by the sweeps "
        "with backoff) and those quarantined after 8 attempts. --retry hands them over now.",
    )
    stuck.add_argument(
        "--retry", action="store_true", help="hand the listed timers over now (all, or --job-id)"
    )
    stuck.add_argument(
        "--job-id",
        action="append",
        dest="job_ids",
        metavar="JOB_ID",
        help="only this job's timers (repeatable)",
    )
    stuck.add_argument("--json", action="store_true", help="print a JSON array")
    stuck.add_argument(
        "--state-dir",
        type=state_dir,
        default=".duetime",
        help="the local stack's state directory, used when DUETIME_QUEUES is not set",
    )
    stuck.set_defaults(run=run_stuck)


def run_stuck(args: argparse.Namespace) -> int:
    from botocore.exceptions import BotoCoreError, ClientError

    from duetime.ports import QueueUnavailable, StoreError

    parts = deployment(args)
    try:
        entries = [
            s for s in parts.sweeper.stuck() if not args.job_ids or s.timer.job_id in args.job_ids
        ]
        if not args.retry:
            if args.json:
                write_out(json.dumps([_as_json(s) for s in entries], indent=2))
            else:
                write_out(_table(entries), end="")
            return 0
        results = parts.sweeper.retry(entries)
    except QueueUnavailable as exc:
        print(
            f"duetime: SQS is unavailable; the timers not handed over stay stuck: {exc}",
            file=sys.stderr,
        )
        return 1
    except (BotoCoreError, ClientError, StoreError) as exc:
        print(f"duetime: cannot reach the timers: {exc}", file=sys.stderr)
        return 1
    failed = sum(reason is not None for _, reason in results)
    left = len(entries) - len(results)
    if args.json:  # each timer tried, as listed, with what came of it (it printed lines)
        untried = [(e, "not tried (out of time)") for e in entries[len(results) :]]
        tried = [_as_json(e) | {"handed_over": r is None, "error": r} for e, r in results]
        tried += [_as_json(e) | {"handed_over": False, "error": r} for e, r in untried]
        write_out(json.dumps(tried, indent=2))
    else:
        for entry, reason in results:
            due = rfc3339_ms(entry.timer.due_ms)
            if reason is None:
                write_out(f"handed over  {entry.timer.job_id}  due {due}")
            else:
                write_out(f"failed       {entry.timer.job_id}  {_short(reason)}  (kept)")
        write_out(
            f"{len(results) - failed} handed over, {failed} failed"
            + (f", {left} not tried (out of time)" if left else "")
        )
    # A --job-id with no stuck timer: as `dlq redrive --run-id` says of a run not in the DLQs
    # (until 2026-11-30 it exited 0, "0 handed over").
    missing = sorted(set(args.job_ids or ()) - {s.timer.job_id for s in entries})
    if missing:
        print(f"duetime: no stuck timer of: {', '.join(map(clean, missing))}", file=sys.stderr)
    return 1 if failed or left or missing else 0


def _as_json(stuck: StuckTimer) -> dict[str, Any]:
    timer = stuck.timer
    return {
        "shard": stuck.shard,
        "tenant": timer.tenant,
        "job_id": timer.job_id,
        "due": rfc3339_ms(timer.due_ms),
        "generation": timer.generation,
        "attempts": stuck.attempts,
        "quarantined": stuck.quarantined,
        "next_attempt": None
        if stuck.next_attempt_ms is None
        else rfc3339_ms(stuck.next_attempt_ms),
        "first_failed": rfc3339_ms(stuck.first_failed_ms),
        "last_failed": rfc3339_ms(stuck.last_failed_ms),
        "reason": stuck.reason,
    }


def _table(entries: Sequence[StuckTimer]) -> str:
    if not entries:
        return "no stuck timers\n"
    header = ("SHARD", "JOB ID", "DUE", "ATTEMPTS", "STATE", "REASON")
    rows = [
        (
            str(s.shard),
            s.timer.job_id,
            rfc3339_ms(s.timer.due_ms),
            str(s.attempts),
            "quarantined"
            if s.next_attempt_ms is None
            else f"retry at {rfc3339_ms(s.next_attempt_ms)}",
            _short(s.reason),
        )
        for s in entries
    ]
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header))]
    return "".join(
        "  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip() + "\n"
        for row in [header, *rows]
    )


def _short(reason: str) -> str:
    text = clean(reason)  # no terminal control characters: `\u001b`, as elsewhere
    return text if len(text) <= MAX_REASON_CHARS else text[: MAX_REASON_CHARS - 1] + "…"
