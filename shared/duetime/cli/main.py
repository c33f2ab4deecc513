"""The `duetime` command line."""

from __future__ import annotations

import argparse
import contextlib
import difflib
import logging
import os
import sys
from collections.abc import Iterator, Sequence
from typing import Any

from duetime.cli import dlq, history, jobs, local, schedule, timers, worker
from duetime.cli.client import Unreachable
from duetime.cli.format import OutputError


class _Parser(argparse.ArgumentParser):
    """Every command's parser: a flag is spelt out (argparse took `--lim` for `--limit`, and a
    script using a prefix broke the day another flag shared it; until 2026-11-30)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **{**kwargs, "allow_abbrev": False})

    def parse_known_args(  # type: ignore[override]
        self, args: Sequence[str] | None = None, namespace: argparse.Namespace | None = None
    ) -> tuple[argparse.Namespace, list[str]]:
        """An action's unknown arguments are its own error, with its usage and the closest
        flag (they went up to the top command, whose usage, `duetime [-h] COMMAND ...`, does
        not show the flag meant; found by a new user's walk, 2026-11-30)."""
        parsed, unknown = super().parse_known_args(args, namespace)
        if unknown and self._subparsers is not None:
            self._before_the_action(parsed, unknown)
        if unknown and self._subparsers is None:
            flags = [flag for action in self._actions for flag in action.option_strings]
            close = [
                match
                for arg in unknown
                if arg.startswith("--")
                for match in difflib.get_close_matches(arg.split("=")[0], flags, n=1)
            ]
            hint = f" (did you mean {close[0]}?)" if close else ""
            self.error(f"unrecognized arguments: {' '.join(unknown)}{hint}")
        return parsed, unknown

    def _before_the_action(self, parsed: argparse.Namespace, unknown: list[str]) -> None:
        """An action's flag given before the action (`duetime jobs --json list`): said so, with
        where it goes (it was the top command's usage and "unrecognized arguments")."""
        actions = [a for a in self._actions if isinstance(a, argparse._SubParsersAction)]
        for sub in actions:
            chosen = sub.choices.get(getattr(parsed, sub.dest, None) or "")
            if chosen is None:
                continue
            flags = {flag for action in chosen._actions for flag in action.option_strings}
            mine = [arg for arg in unknown if arg.split("=")[0] in flags]
            if mine:
                where = f"{chosen.prog} {' '.join(mine)}"
                self.error(
                    f"unrecognized arguments: {' '.join(unknown)} (flags go after the "
                    f"action: {where})"
                )


def main(argv: Sequence[str] | None = None) -> int:
    parser: argparse.ArgumentParser = _Parser(prog="duetime", description=__doc__)
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    worker.register(commands)
    local.register(commands)
    jobs.register(commands)
    schedule.register(commands)
    history.register(commands)
    dlq.register(commands)
    timers.register(commands)

    from botocore.exceptions import BotoCoreError

    try:
        # Parsing reads files and stdin (`--payload @-`): Ctrl-C there is a 130 too.
        args = parser.parse_args(argv)
        with _logs(args.command):
            code: int = args.run(args)
    except KeyboardInterrupt:
        return 130
    except (BrokenPipeError, OutputError) as exc:
        # `duetime jobs list | head`: stop quietly; a full disk says so. Point stdout at
        # /dev/null so the interpreter's final flush does not fail again.
        if isinstance(exc, OutputError):
            print(f"duetime: {exc}", file=sys.stderr)
        with contextlib.suppress(OSError, ValueError, AttributeError):  # (None: closed)
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 1
    except BotoCoreError as exc:  # AWS not set up (exit 2), or no answer from it (exit 1)
        # (Before OSError: botocore's timeouts are OSErrors too; found by review.)
        print(f"duetime: AWS: {exc}", file=sys.stderr)
        return 2 if isinstance(exc, _aws_setup_errors()) else 1
    except Unreachable as exc:  # no answer: exit 1 (the stack stopped, its local.json left)
        print(f"duetime: {exc}", file=sys.stderr)
        return 1
    except (RuntimeError, OSError) as exc:  # configuration problems: a message, not a traceback
        print(f"duetime: {exc}", file=sys.stderr)
        return 2
    return code


def _aws_setup_errors() -> tuple[type[Exception], ...]:
    """botocore's errors of a configuration it refuses (exit 2), not of AWS not answering
    (exit 1): AWS_RETRY_MODE=bogus or AWS_DEFAULTS_MODE=x exited 1, the status of "AWS did not
    answer", until 2026-12-01 (an outside CLI audit)."""
    from botocore import exceptions as aws

    return (
        aws.NoRegionError,
        aws.NoCredentialsError,
        aws.PartialCredentialsError,
        aws.ProfileNotFound,
        aws.ConfigNotFound,
        aws.ConfigParseError,
        aws.InvalidConfigError,
        aws.InvalidRetryConfigurationError,  # (InvalidRetryModeError, InvalidMaxRetryAttempts…)
        aws.InvalidDefaultsMode,
        aws.InvalidRegionError,
        aws.InvalidEndpointConfigurationError,
        aws.InvalidEndpointDiscoveryConfigurationError,
        aws.InvalidIMDSEndpointError,
        aws.InvalidIMDSEndpointModeError,
        aws.InvalidProxiesConfigError,
        aws.InvalidS3AddressingStyleError,
        aws.InvalidS3UsEast1RegionalEndpointConfigError,
        aws.InvalidSTSRegionalEndpointsConfigError,
        aws.InvalidChecksumConfigError,
    )


# Commands whose logs are their output (a worker's, the local stack's own file); the others'
# output is stdout's alone (`timers stuck --json` is one JSON document, even when a stuck
# timer's handover logs a warning; until 2026-11-30 the log lines went to stdout too).
_LOGGING_TO_STDOUT = ("worker", "local")


@contextlib.contextmanager
def _logs(command: str) -> Iterator[None]:
    """The log lines of `command`: on stderr, but for a worker's and the local stack's."""
    from duetime.observability import logger

    handler = logger.registered_handler
    if command in _LOGGING_TO_STDOUT or not isinstance(handler, logging.StreamHandler):
        yield
        return
    before = handler.stream
    handler.setStream(sys.stderr)
    handler.addFilter(_one_line)
    try:
        yield
    finally:
        handler.removeFilter(_one_line)
        handler.setStream(before)


def _one_line(record: logging.LogRecord) -> bool:
    """A command's log line names its error, not its traceback: `timers stuck --retry` printed
    ~3 KB a timer beside the reason its table shows (until 2026-11-30)."""
    if record.exc_info and record.exc_info[1] is not None:
        error = record.exc_info[1]
        record.exc_info = record.exc_text = None
        record.exception_name = type(error).__name__
        record.exception = str(error)
    return True
