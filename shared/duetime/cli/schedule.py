"""`duetime schedule preview`: the next occurrences of a schedule (POST /schedules/preview),
printed one per line in UTC and in the time zone given (docs/cli.md). The API validates the
schedule, so its errors name the same fields as for `duetime jobs create`."""

from __future__ import annotations

import argparse
import sys
from datetime import datetime
from typing import Any
from zoneinfo import ZoneInfo

from duetime.cli.client import ApiError, Unreachable, UsageError, client_for
from duetime.cli.format import json_text, write_out
from duetime.cli.jobs import _common_options
from duetime.cli.types import preview_count, utf8_text, whole
from duetime.domain.schedule import zone
from duetime.domain.text import clean


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add `schedule preview` to the main CLI's subcommands."""
    schedule = subparsers.add_parser(
        "schedule",
        help="try a schedule out through the HTTP API",
        description="Try a schedule out through the duetime HTTP API.",
    )
    actions = schedule.add_subparsers(dest="schedule_command", required=True, metavar="ACTION")
    preview = actions.add_parser(
        "preview",
        parents=[_common_options()],
        help="the next occurrences of a schedule (POST /schedules/preview)",
        description="Print the next occurrences of a schedule, as a job submitted now would "
        "run them, one per line: in UTC, then in --timezone. Give a cron expression, --rate, "
        "--at or --delay.",
    )
    preview.add_argument(
        "cron", nargs="?", type=utf8_text, metavar="CRON", help='e.g. "0 9 * * 1-5"'
    )
    kind = preview.add_mutually_exclusive_group()
    kind.add_argument("--rate", type=whole, metavar="SECONDS", help="every N seconds")
    kind.add_argument("--at", type=utf8_text, metavar="RFC3339", help="once, at an instant")
    kind.add_argument("--delay", type=whole, metavar="SECONDS", help="once, after a delay")
    preview.add_argument(
        "--timezone",
        type=utf8_text,
        metavar="IANA",
        help="the cron expression's time zone (default UTC); with --rate, --at or --delay, "
        "only the zone the instants are shown in",
    )
    preview.add_argument(
        "--start-at", type=utf8_text, metavar="RFC3339", help="first run (cron, --rate)"
    )
    preview.add_argument(
        "--end-at", type=utf8_text, metavar="RFC3339", help="last run (cron, --rate)"
    )
    preview.add_argument(
        "--count", type=preview_count, default=5, metavar="N", help="how many (1-20, default 5)"
    )
    preview.set_defaults(run=run_preview)


def run_preview(args: argparse.Namespace) -> int:
    """Exit 0 with the instants; 2 for a command that cannot be sent, 1 for the API's error."""
    try:
        body = preview_body(args)
        client = client_for(args)
        # A cron's zone is the API's to check (it names schedule.timezone); else it is only
        # the zone shown, checked here before any call.
        zone = None if args.cron is not None else _zone(args.timezone)
        answer = client.call("POST", "/schedules/preview", body=body)
        zone = zone or _zone(args.timezone)
        text = json_text(answer) if args.json_output else format_occurrences(answer, zone)
    except UsageError as exc:
        print(f"duetime: {clean(str(exc))}", file=sys.stderr)
        return 2
    except (ApiError, Unreachable) as exc:
        print(f"duetime: {clean(str(exc))}", file=sys.stderr)
        return 1
    if text:
        write_out(text)  # a closed or full stdout is main's to report
    return 0


def preview_body(args: argparse.Namespace) -> dict[str, Any]:
    """The request body; the API checks the values (and names the field of a bad one)."""
    kinds = (("CRON", args.cron), ("--rate", args.rate), ("--at", args.at), ("--delay", args.delay))
    given = [flag for flag, value in kinds if value is not None]
    if len(given) != 1:
        raise UsageError("give one of a cron expression, --rate, --at or --delay")
    schedule: dict[str, Any]
    if args.cron is not None:
        schedule = {"cron": args.cron}
        if args.timezone is not None:
            schedule["timezone"] = args.timezone
    elif args.rate is not None:
        schedule = {"rate_seconds": args.rate}
    elif args.delay is not None:
        schedule = {"delay_seconds": args.delay}
    else:
        schedule = {"at": args.at}
    for key in ("start_at", "end_at"):
        if getattr(args, key) is not None:
            schedule[key] = getattr(args, key)
    return {"schedule": schedule, "count": args.count}


def format_occurrences(answer: Any, zone: ZoneInfo | None) -> str:
    """One instant a line: UTC as the API gave it, then the wall time in `zone`."""
    occurrences = answer.get("occurrences") if isinstance(answer, dict) else None
    if not isinstance(occurrences, list):
        raise ApiError(200, "bad_response", "the answer has no occurrences", None)
    if not occurrences:
        return "(no occurrences: the schedule has ended)"
    lines = []
    for text in occurrences:
        try:
            instant = datetime.fromisoformat(str(text))
        except ValueError:
            raise ApiError(200, "bad_response", "an occurrence is not an instant", None) from None
        try:
            local = instant.astimezone(zone) if zone is not None else None
        except OverflowError:  # an instant near year 9999 has no local time past it
            local = None
        shown = f"  {local:%Y-%m-%d %H:%M:%S %Z} ({zone})" if local is not None else ""
        lines.append(clean(str(text)) + shown)
    return "\n".join(lines)


def _zone(name: str | None) -> ZoneInfo | None:
    if name is None:
        return None
    try:
        return zone(name)  # the zones the API accepts, with the same rules
    except ValueError:
        raise UsageError(f"--timezone must be an IANA time zone name, not {name!r}") from None
