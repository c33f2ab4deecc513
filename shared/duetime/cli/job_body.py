"""The body of `POST /jobs` and `PATCH /jobs/{id}` built from `duetime jobs create|update`'s
flags (duetime.cli.jobs defines the flags)."""

from __future__ import annotations

import argparse
from typing import Any

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
    ("--jitter", "jitter_seconds"),
    ("--stage", "stage_seconds"),
    ("--overlap", "overlap"),
]
# `--payload`'s default: the flag was not given (`--payload null` is JSON null, which resets the
# payload in an update).
NO_PAYLOAD: Any = object()


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
    if args.after is not None or args.on is not None:
        # `--on` alone goes in as given: the API names the missing job_id.
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
        target["headers"] = dict(args.headers)
    if args.event_bus is not None:
        target["event_bus"] = args.event_bus

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
    if args.tags is not None:
        body["tags"] = dict(args.tags)
    retry = {
        key: getattr(args, key)
        for key in ("max_attempts", "backoff_seconds", "max_backoff_seconds")
        if getattr(args, key) is not None
    }
    if retry:
        body["retry"] = retry
    return body
