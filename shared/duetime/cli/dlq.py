"""`duetime dlq …`: the runs parked in the dead-letter queues, and sending them back.

A run reaches a DLQ in one of two ways (docs/reliability.md): a worker put it there after its
last attempt failed, with the reason as the `duetime-reason` message attribute; or the queue's
redrive policy moved it after `maxReceiveCount` receives that never finished (a worker died on
it every time, or its body could not be read), with no reason.

`list` reads the DLQs without consuming them: SQS cannot peek, so each message is received
with a short visibility timeout and made visible again at once.

`redrive` sends runs back to the queue they came from (the message's runtime and priority) as
**one more attempt**: attempt numbers continue (n + 1), they are not reset. The worker's claim
rule lets a run be claimed only by an attempt newer than the one recorded, so a reset attempt
would be dropped as a duplicate; continuing keeps the run record's attempt history truthful.
A run that failed is first reopened (its record goes from `failed` to `retrying`); if the
extra attempt fails too, the run returns to the DLQ with its new reason. A message is deleted
from the DLQ only after SQS accepted the new one: a crash in between leaves a copy in the DLQ
(which a later redrive skips or runs once more, the claim absorbing the rest), never neither.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from duetime.cli.types import positive_int
from duetime.config import Env, QueueUrls, Settings, queue_key, queue_name
from duetime.domain.ids import run_id
from duetime.domain.jobs import JobStatus, Priority, Runtime
from duetime.domain.messages import RunMessage, UnauthenticatedMessage
from duetime.domain.runs import CLOCK_SKEW_ALLOWANCE_MS, RunOutcome, RunStatus
from duetime.domain.timeutil import rfc3339_ms
from duetime.ports import QueueError, StoreError
from duetime.services.execute import ABANDONED_ERROR

if TYPE_CHECKING:
    import boto3

    from duetime.adapters.sqs import DeadLetter, SqsDeadLetters
    from duetime.wiring import Components

QUEUE_KEYS = [queue_key(r, p) for r in Runtime for p in Priority]
LOCAL_PREFIX = "duetime"  # the local stack's resource names (duetime.resources)
# How long a listed or redriven message stays hidden while the command works on it.
HOLD_SECONDS = 60
MAX_REASON_CHARS = 80


@dataclass(frozen=True)
class DeadRun:
    """One DLQ message, read for people."""

    queue: str  # queue key, e.g. lambda/high
    letter: DeadLetter
    message: RunMessage | None  # None: the body is not a run message
    # Signed by duetime (duetime.domain.messages.MessageAuth): may be sent back.
    signed: bool = False

    @property
    def run_id(self) -> str | None:
        return run_id(self.message.job_id, self.message.scheduled_ms) if self.message else None

    def as_json(self) -> dict[str, Any]:
        m = self.message
        return {
            "queue": self.queue,
            "job_id": m.job_id if m else None,
            "run_id": self.run_id,
            "tenant": m.tenant if m else None,
            "scheduled_for": rfc3339_ms(m.scheduled_ms) if m else None,
            "attempt": m.attempt if m else None,
            "reason": self.letter.reason,
            "dead_since": rfc3339_ms(self.letter.sent_ms) if self.letter.sent_ms else None,
            "message_id": self.letter.message_id,
            "body": None if m else self.letter.body,
        }


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
    listing.add_argument("--limit", type=positive_int, default=100, help="at most N (default 100)")
    listing.add_argument("--json", action="store_true", help="print a JSON array")
    listing.set_defaults(run=run_list)

    redrive = actions.add_parser(
        "redrive",
        help="send dead runs back to their queue as one more attempt",
        description="Send dead runs back to the queue they came from as one more attempt "
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
    redrive.add_argument("--limit", type=positive_int, default=None, help="at most N runs")
    redrive.set_defaults(run=run_redrive)


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
        default=".duetime",
        help="the local stack's state directory, used when DUETIME_QUEUES is not set",
    )


# --- the commands -------------------------------------------------------------------------------


def run_list(args: argparse.Namespace) -> int:
    from botocore.exceptions import BotoCoreError, ClientError

    parts = deployment(args)
    letters = _dead_letters(parts)
    try:
        dead, total = _read(parts, letters, args.queues or QUEUE_KEYS, args.limit)
    except (BotoCoreError, ClientError) as exc:
        return _failed(f"cannot read the DLQs: {exc}")
    if args.json:
        print(json.dumps([d.as_json() for d in dead], indent=2))
        return 0
    print(_table(dead), end="")
    if total > len(dead):
        print(f"\nshowing {len(dead)} of about {total} (--limit)")
    return 0


@dataclass
class RedriveReport:
    redriven: list[tuple[DeadRun, int]]  # and the new attempt number
    skipped: list[tuple[DeadRun, str]]


def run_redrive(args: argparse.Namespace) -> int:
    from botocore.exceptions import BotoCoreError, ClientError

    parts = deployment(args)
    try:
        report = redrive(
            parts,
            _dead_letters(parts),
            args.queues or QUEUE_KEYS,
            run_ids=set(args.run_ids) if args.run_ids else None,
            limit=args.limit,
            now_ms=_now_ms(),
        )
    except (BotoCoreError, ClientError, StoreError, QueueError) as exc:
        return _failed(f"redrive stopped: {exc} (messages not yet sent back are still in the DLQ)")
    for dead, attempt in report.redriven:
        print(f"redriven  {dead.run_id}  attempt {attempt}  to {dead.queue}")
    for dead, why in report.skipped:
        print(f"skipped   {dead.run_id or dead.letter.message_id}  {why}  (left in the DLQ)")
    print(f"{len(report.redriven)} redriven, {len(report.skipped)} skipped")
    if args.run_ids:
        found = {d.run_id for d, _ in report.redriven} | {d.run_id for d, _ in report.skipped}
        missing = sorted(set(args.run_ids) - found)
        if missing:
            return _failed(f"not in the DLQs: {', '.join(missing)}")
    return 0


def redrive(
    parts: Components,
    letters: SqsDeadLetters,
    queues: Sequence[str],
    *,
    run_ids: set[str] | None,
    limit: int | None,
    now_ms: int,
) -> RedriveReport:
    """Send the selected dead runs back; see the module docstring for the rules."""
    report = RedriveReport([], [])
    for key in queues:
        url = parts.settings.queues[key].dlq_url
        # What is there now: reading stops there (no trailing long poll on an emptied queue).
        budget = letters.approximate_count(url)
        held: list[DeadLetter] = []  # read and not redriven: made visible again at the end
        try:
            while budget > 0 and (limit is None or len(report.redriven) < limit):
                batch = letters.receive(url, 10, HOLD_SECONDS)
                if not batch:
                    break
                budget -= len(batch)
                for letter in batch:
                    dead = _dead_run(parts, key, letter)
                    unwanted = run_ids is not None and dead.run_id not in run_ids
                    if unwanted or (limit is not None and len(report.redriven) >= limit):
                        held.append(letter)
                    else:
                        try:
                            why = _redrive_one(parts, letters, dead, now_ms, report)
                        except BaseException:
                            held.append(letter)  # not sent back: visible in the DLQ again
                            raise
                        if why is not None:
                            report.skipped.append((dead, why))
                            held.append(letter)
        finally:
            letters.release(held)
    return report


def _redrive_one(
    parts: Components,
    letters: SqsDeadLetters,
    dead: DeadRun,
    now_ms: int,
    report: RedriveReport,
) -> str | None:
    """Redrive one message; the reason it was skipped, or None when it was sent back."""
    message = dead.message
    if message is None:
        return "the body is not a run message"
    if not dead.signed:
        # Not written by duetime (or signed with a retired key): sending it back would sign
        # it, and a worker would run whatever job and tenant it names.
        return "the message is not signed by duetime: never sent back"
    job = parts.jobs.get(message.tenant, message.job_id)
    if job is None or job.status in (JobStatus.CANCELLED, JobStatus.PAUSED):
        # The worker drops runs of cancelled or paused jobs: sending it would do nothing.
        return f"job is {job.status.value if job else 'gone'}"
    run = parts.runs.get(message.job_id, message.scheduled_ms)
    if run is not None and run.status == RunStatus.SUCCEEDED:
        return "the run already succeeded"
    if run is not None and run.status == RunStatus.RUNNING:
        # Moved by the redrive policy while its attempt is recorded as running: a worker
        # died on it (or, with a live lease, is running it now: leave it).
        if run.lease is not None and run.lease.until_ms + CLOCK_SKEW_ALLOWANCE_MS > now_ms:
            return "the run is running now"
        reopened = parts.runs.finish(run, RunOutcome(RunStatus.RETRYING, now_ms, ABANDONED_ERROR))
        if reopened is None:
            return "the run changed meanwhile; try again"
        run = reopened
    if run is not None and run.status == RunStatus.FAILED:
        # Reopen: a failed run is final for the claim rule; `retrying` admits attempt n + 1.
        reopened = parts.runs.finish(
            run, RunOutcome(RunStatus.RETRYING, run.finished_ms or now_ms, run.error)
        )
        if reopened is None:
            return "the run changed meanwhile; try again"
        run = reopened
    attempt = max(message.attempt, run.attempt if run is not None else 0) + 1
    # Sent back for the job as it is now: a redrive is asked for after any pause.
    again = replace(message, attempt=attempt, due_ms=now_ms, generation=job.generation)
    parts.queue.send([(again, 0)])
    letters.delete(dead.letter)  # only now: the copy is in the source queue
    report.redriven.append((dead, attempt))
    return None


# --- reading ------------------------------------------------------------------------------------


def _read(
    parts: Components, letters: SqsDeadLetters, queues: Sequence[str], limit: int
) -> tuple[list[DeadRun], int]:
    dead: list[DeadRun] = []
    total = 0
    for key in queues:
        url = parts.settings.queues[key].dlq_url
        count = letters.approximate_count(url)
        total += count
        held: list[DeadLetter] = []
        try:
            while len(held) < count and len(dead) < limit:
                batch = letters.receive(url, limit - len(dead), HOLD_SECONDS)
                if not batch:
                    break
                held += batch
                dead += [_dead_run(parts, key, letter) for letter in batch]
        finally:
            letters.release(held)
    dead.sort(key=lambda d: d.letter.sent_ms)
    return dead, total


def _dead_run(parts: Components, key: str, letter: DeadLetter) -> DeadRun:
    try:
        return DeadRun(key, letter, parts.auth.open(letter.body), signed=True)
    except UnauthenticatedMessage as exc:
        return DeadRun(key, letter, exc.message)
    except (ValueError, KeyError, TypeError):
        return DeadRun(key, letter, None)


def _table(dead: Sequence[DeadRun]) -> str:
    header = ("QUEUE", "JOB ID", "RUN ID", "ATTEMPT", "DEAD SINCE", "REASON")
    rows = [
        (
            d.queue,
            d.message.job_id if d.message else "-",
            d.run_id or "-",
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


def _reason(dead: DeadRun) -> str:
    if dead.message is None:
        return "unreadable body (moved after repeated receives)"
    if dead.letter.reason is None:
        return "no reason: moved after repeated receives (a worker died on it)"
    text = dead.letter.reason.encode("unicode_escape").decode("ascii")  # no terminal control
    return text if len(text) <= MAX_REASON_CHARS else text[: MAX_REASON_CHARS - 1] + "…"


# --- configuration ------------------------------------------------------------------------------


def deployment(args: argparse.Namespace) -> Components:
    """The deployment: the DUETIME_* environment (as the worker reads it), else the local
    stack started with --state-dir. RuntimeError (a CLI message) when there is neither."""
    from pathlib import Path

    from duetime.wiring import build

    if os.environ.get(Env.QUEUES):
        return build(Settings.from_env())
    from duetime.local.keys import message_key
    from duetime.local.stack import read_local_endpoint

    local = read_local_endpoint(Path(args.state_dir))
    if local is None:
        raise RuntimeError(
            "no queues to read: set the DUETIME_* environment (DUETIME_QUEUES, the tables) as "
            "for the worker, or start `duetime local` (from this directory, or pass its "
            "--state-dir)"
        )
    # The clients `build` makes reach the local moto server (boto3 reads AWS_ENDPOINT_URL).
    os.environ["AWS_ENDPOINT_URL"] = local.endpoint_url
    session = _local_session(local.region)
    settings = _local_settings(session, local.endpoint_url)
    # Runs sent back must be signed with the key the local stack's workers verify.
    settings = replace(settings, run_signing_key=message_key(Path(args.state_dir)))
    return build(settings, session)


def _local_session(region: str) -> boto3.Session:
    import boto3

    return boto3.Session(
        aws_access_key_id="duetime-local",
        aws_secret_access_key="duetime-local",  # noqa: S106 - moto takes any
        region_name=region,
    )


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
        raise RuntimeError(f"cannot reach the local stack at {endpoint_url}: {exc}") from None
    return Settings(
        jobs_table=f"{LOCAL_PREFIX}-jobs",
        timers_table=f"{LOCAL_PREFIX}-timers",
        runs_table=f"{LOCAL_PREFIX}-runs",
        queues=queues,
    )


def _dead_letters(parts: Components) -> SqsDeadLetters:
    from duetime.adapters.sqs import SqsDeadLetters

    return SqsDeadLetters(parts.queue._client)


def _now_ms() -> int:
    from duetime.wiring import wall_ms

    return wall_ms()


def _failed(message: str) -> int:
    print(f"duetime: {message}", file=sys.stderr)
    return 1
