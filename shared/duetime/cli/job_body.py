"""The flags of `duetime jobs create|update` and the body of `POST /jobs` and
`PATCH /jobs/{id}` they build."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from typing import Any

from duetime.cli.client import UsageError
from duetime.cli.types import (
    header_value,
    json_object,
    json_value,
    key_value,
    number,
    source_detail_type,
    utf8_text,
    version,
    whole,
)
from duetime.domain.jobs import CatchupMode, Priority, Runtime
from duetime.domain.overlap import Overlap

# Flags that build the body, as (flag, dest): none of them may be combined with --body.
BODY_FLAGS = [
    ("--at", "at"),
    ("--delay", "delay"),
    ("--rate", "rate"),
    ("--cron", "cron"),
    ("--timezone", "timezone"),
    ("--start-at", "start_at"),
    ("--end-at", "end_at"),
    ("--after", "after"),
    ("--on", "on"),
    ("--url", "url"),
    ("--sqs", "sqs"),
    ("--sns", "sns"),
    ("--eventbridge", "eventbridge"),
    ("--lambda", "lambda_arn"),
    ("--handler", "handler"),
    ("--method", "method"),
    ("--header", "headers"),
    ("--event-bus", "event_bus"),
    ("--payload", "payload"),
    ("--name", "name"),
    ("--description", "description"),
    ("--tag", "tags"),
    ("--priority", "priority"),
    ("--runtime", "runtime"),
    ("--max-attempts", "max_attempts"),
    ("--backoff-seconds", "backoff_seconds"),
    ("--max-backoff-seconds", "max_backoff_seconds"),
    ("--timeout-seconds", "timeout_seconds"),
    ("--catchup", "catchup"),
    ("--catchup-window", "catchup_window"),
    ("--jitter", "jitter_seconds"),
    ("--stage", "stage_seconds"),
    ("--overlap", "overlap"),
]
# `--payload`'s default: the flag was not given (`--payload null` is JSON null, which resets the
# payload in an update).
NO_PAYLOAD: Any = object()


def add_body_options(parser: argparse.ArgumentParser, *, updating: bool = False) -> None:
    """The flags of `create` and `update` that build the body (BODY_FLAGS), and --body."""
    schedule = parser.add_argument_group("schedule (one of --at, --delay, --rate, --cron, --after)")
    kind = schedule.add_mutually_exclusive_group()
    kind.add_argument("--at", type=utf8_text, metavar="RFC3339", help="once, at an instant")
    kind.add_argument("--delay", type=whole, metavar="SECONDS", help="once, after a delay")
    kind.add_argument("--rate", type=whole, metavar="SECONDS", help="every N seconds")
    kind.add_argument(
        "--cron", type=utf8_text, metavar="EXPR", help='a cron expression, e.g. "0 9 * * 1-5"'
    )
    kind.add_argument(
        "--after", type=utf8_text, metavar="JOB_ID", help="each time a run of another job ends"
    )
    schedule.add_argument(
        "--timezone", type=utf8_text, metavar="IANA", help="time zone of --cron (default UTC)"
    )
    schedule.add_argument(
        "--start-at", type=utf8_text, metavar="RFC3339", help="first run (--rate, --cron)"
    )
    schedule.add_argument(
        "--end-at", type=utf8_text, metavar="RFC3339", help="last run (--rate, --cron)"
    )
    schedule.add_argument(
        "--on",
        choices=("succeeded", "failed", "finished"),
        help="which end of the --after job's run triggers (default succeeded)",
    )

    target = parser.add_argument_group("target (one of these)")
    where = target.add_mutually_exclusive_group()
    where.add_argument("--url", type=utf8_text, help="an HTTP endpoint")
    where.add_argument("--sqs", type=utf8_text, metavar="QUEUE_URL", help="an SQS queue")
    where.add_argument("--sns", type=utf8_text, metavar="TOPIC_ARN", help="an SNS topic")
    where.add_argument(
        "--eventbridge",
        type=source_detail_type,
        metavar="SOURCE:DETAIL_TYPE",
        help="an EventBridge event",
    )
    where.add_argument(
        "--lambda",
        dest="lambda_arn",
        type=utf8_text,
        metavar="FUNCTION_ARN",
        help="a Lambda function",
    )
    where.add_argument(
        "--handler", type=utf8_text, metavar="NAME", help="a Python handler in the worker"
    )
    target.add_argument("--method", type=utf8_text, help="HTTP method of --url (default POST)")
    target.add_argument(
        "--header",
        dest="headers",
        action="append",
        type=key_value,
        metavar="K=V",
        help="HTTP header of --url (repeatable)",
    )
    target.add_argument(
        "--event-bus", type=utf8_text, metavar="NAME", help="bus name or ARN of --eventbridge"
    )

    job = parser.add_argument_group("job")
    job.add_argument(
        "--payload",
        type=json_value,
        default=NO_PAYLOAD,
        metavar="JSON|@FILE",
        help="what the target receives (in an update, null resets it)",
    )
    job.add_argument("--name", type=utf8_text, help="a label for people")
    job.add_argument(
        "--description", type=utf8_text, help="free text for people (up to 1,024 characters)"
    )
    job.add_argument(
        "--tag",
        dest="tags",
        action="append",
        type=key_value,
        metavar="K=V",
        help="a tag to find the job by (repeatable)"
        + ("; replaces all the job's tags" if updating else ""),
    )
    job.add_argument("--priority", choices=[p.value for p in Priority])
    job.add_argument("--runtime", choices=[r.value for r in Runtime])
    job.add_argument("--max-attempts", type=whole, metavar="N", help="retry.max_attempts")
    job.add_argument(
        "--backoff-seconds", type=number, metavar="SECONDS", help="retry.backoff_seconds"
    )
    job.add_argument(
        "--max-backoff-seconds", type=number, metavar="SECONDS", help="retry.max_backoff_seconds"
    )
    job.add_argument(
        "--timeout-seconds", type=whole, metavar="SECONDS", help="bound of one attempt"
    )
    job.add_argument(
        "--jitter",
        dest="jitter_seconds",
        type=whole,
        metavar="SECONDS",
        help="start each occurrence up to this long after its instant (jitter_seconds, 0-900)",
    )
    job.add_argument(
        "--stage",
        dest="stage_seconds",
        type=whole,
        metavar="SECONDS",
        help="hand each run to a worker this long before its instant, claimed and "
        "ready to start on it (stage_seconds, 0-10)",
    )
    modes = [c.value for c in CatchupMode]
    job.add_argument(
        "--catchup", choices=modes, metavar="MODE", help=f"after downtime: {'|'.join(modes)}"
    )
    job.add_argument(
        "--catchup-window",
        dest="catchup_window",
        type=whole,
        metavar="SECONDS",
        help="how far back --catchup looks (catchup.window_seconds, 0-604800; default 3600; "
        "with --catchup's mode, else latest)",
    )
    policies = [o.value for o in Overlap]
    job.add_argument(
        "--overlap",
        choices=policies,
        metavar="POLICY",
        help=f"while a run is active (--rate, --cron): {'|'.join(policies)}",
    )
    if updating:
        job.add_argument(
            "--if-match",
            type=version,
            metavar="VERSION",
            help='update only if the job is still at this version (3, or its ETag "3"); else 412',
        )
    else:
        job.add_argument(
            "--idempotency-key",
            type=header_value,
            metavar="KEY",
            help="a replay with the same key returns the same job",
        )
    job.add_argument(
        "--body",
        type=json_object,
        metavar="JSON|@FILE",
        help="send this body as is (instead of the flags above)",
    )


def given_flags(args: argparse.Namespace) -> list[str]:
    """The body flags given on the command line."""
    absent = {dest: NO_PAYLOAD if dest == "payload" else None for _, dest in BODY_FLAGS}
    return [flag for flag, dest in BODY_FLAGS if getattr(args, dest) is not absent[dest]]


def job_body(args: argparse.Namespace) -> dict[str, Any]:
    """The POST /jobs (or PATCH) body for the flags given, and only those. Flags go in as
    given, even in combinations the API refuses (`--timezone` with `--rate`): its answer names
    the field."""
    schedule: dict[str, Any] = {}
    for key, value in [
        ("at", args.at),
        ("delay_seconds", args.delay),
        ("rate_seconds", args.rate),
        ("cron", args.cron),
        ("timezone", args.timezone),
        ("start_at", args.start_at),
        ("end_at", args.end_at),
    ]:
        if value is not None:
            schedule[key] = value
    if args.on is not None and args.after is None:  # (the API named a field not touched)
        raise UsageError("--on goes with --after (the job whose runs this one follows)")
    if args.after is not None:
        after = {"job_id": args.after, "on": args.on}
        schedule["after"] = {key: value for key, value in after.items() if value is not None}

    target: dict[str, Any] = {}
    if args.url is not None:
        target = {"type": "http", "url": args.url}
    elif args.sqs is not None:
        target = {"type": "sqs", "queue_url": args.sqs}
    elif args.sns is not None:
        target = {"type": "sns", "topic_arn": args.sns}
    elif args.eventbridge is not None:
        source, detail_type = args.eventbridge
        target = {"type": "eventbridge", "source": source, "detail_type": detail_type}
    elif args.lambda_arn is not None:
        target = {"type": "lambda", "function_arn": args.lambda_arn}
    elif args.handler is not None:
        target = {"type": "handler", "name": args.handler}
    if args.method is not None:
        target["method"] = args.method
    if args.headers:
        target["headers"] = _once_each("--header", args.headers, fold=str.lower)
    if args.event_bus is not None:
        target["event_bus"] = args.event_bus

    _with_its_kind(schedule, "schedule", SCHEDULE_DETAILS)
    _with_its_kind(target, "target", TARGET_DETAILS)
    # A schedule or target none of whose flags was given is left out (the API names it as
    # required; an update keeps the job's).
    body: dict[str, Any] = {
        key: value for key, value in (("schedule", schedule), ("target", target)) if value
    }
    if args.payload is not NO_PAYLOAD:
        body["payload"] = args.payload
    for key in (
        "name",
        "description",
        "priority",
        "runtime",
        "timeout_seconds",
        "catchup",
        "jitter_seconds",
        "stage_seconds",
        "overlap",
    ):
        if getattr(args, key) is not None:
            body[key] = getattr(args, key)
    if args.catchup_window is not None:  # the field whole: its mode too
        body["catchup"] = {"mode": args.catchup or "latest", "window_seconds": args.catchup_window}
    if args.tags is not None:
        body["tags"] = _once_each("--tag", args.tags)
    retry = {
        key: getattr(args, key)
        for key in ("max_attempts", "backoff_seconds", "max_backoff_seconds")
        if getattr(args, key) is not None
    }
    if retry:
        body["retry"] = retry
    return body


# The fields an update replaces whole, and the flags that make each: all of them, or none.
WHOLE_IN_AN_UPDATE = {
    "retry": [
        ("--max-attempts", "max_attempts"),
        ("--backoff-seconds", "backoff_seconds"),
        ("--max-backoff-seconds", "max_backoff_seconds"),
    ],
    "catchup": [("--catchup", "catchup"), ("--catchup-window", "catchup_window")],
}


def whole_in_an_update(args: argparse.Namespace) -> None:
    """An update's `retry` and `catchup` are given with all their flags or none: the API
    replaces the field whole, so `--max-attempts 7` alone reset the backoffs to their
    defaults, and `--catchup none` the window (until 2026-12-01; an outside CLI audit). The
    CLI does not read the job to merge them, as it reads nothing before a PATCH: a usage
    error naming the flags missing, as for a schedule's or a target's details."""
    for field, flags in WHOLE_IN_AN_UPDATE.items():
        given = [flag for flag, dest in flags if getattr(args, dest) is not None]
        missing = [flag for flag, dest in flags if getattr(args, dest) is None]
        if given and missing:
            raise UsageError(
                f"{' and '.join(given)} without {' and '.join(missing)}: an update replaces the "
                f"job's whole {field}, and what is left out goes back to its default; give "
                f"{' '.join(flag for flag, _ in flags)} together (`duetime jobs get` shows "
                f"the job's {field})"
            )


# Flags that only add to a schedule's or a target's kind, and the kind flags they go with.
SCHEDULE_DETAILS = {
    "timezone": ("--timezone", "--cron"),
    "start_at": ("--start-at", "--rate or --cron"),
    "end_at": ("--end-at", "--rate or --cron"),
}
TARGET_DETAILS = {
    "method": ("--method", "--url"),
    "headers": ("--header", "--url"),
    "event_bus": ("--event-bus", "--eventbridge"),
}
KINDS = {"at", "delay_seconds", "rate_seconds", "cron", "after", "type"}


def _with_its_kind(part: dict[str, Any], name: str, details: dict[str, tuple[str, str]]) -> None:
    """A detail flag without its kind's flag is a usage error naming both: sent alone, the
    API named a field the user had not touched (the schedule's kinds, `target.type`; found by
    a new user's walk, 2026-11-30)."""
    if not part or KINDS & part.keys():
        return
    flag, kinds = next(details[key] for key in part if key in details)
    raise UsageError(
        f"{flag} goes with a {name} flag ({kinds}): a {name} is given whole, with its kind"
        f" (an update's {name} is replaced whole)"
    )


def _once_each(
    flag: str, pairs: list[tuple[str, str]], fold: Callable[[str], str] = str
) -> dict[str, str]:
    """K=V flags as an object; a key given twice (as `fold` reads it: header names in any
    case are one) is a usage error, as in --body (until 2026-11-30 the last value was sent
    without a word)."""
    found: dict[str, str] = {}
    seen: set[str] = set()
    for key, value in pairs:
        if fold(key) in seen:
            raise UsageError(f"{flag} {key} is given twice: give each key once")
        seen.add(fold(key))
        found[key] = value
    return found
