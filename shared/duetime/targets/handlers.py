"""Python handlers: functions a job runs in the worker's process, looked up by name.

from duetime.targets import Invocation, handler

@handler("billing.close_day")
def close_day(invocation: Invocation) -> None:
    ...
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable, Mapping
from typing import Any

from duetime.domain.errors import ValidationError
from duetime.domain.invocation import Invocation, TargetError
from duetime.domain.targets import parse_target

Handler = Callable[[Invocation], None]


class HandlerRegistry:
    """Handlers by name. Registering is done at import time; lookups may come from any thread."""

    def __init__(self, handlers: Mapping[str, Handler] | None = None) -> None:
        self._handlers: dict[str, Handler] = {}
        self._lock = threading.Lock()
        for name, fn in (handlers or {}).items():
            self.register(name, fn)

    def register(self, name: str, fn: Handler) -> Handler:
        """Add `fn` under `name` and return it. A name taken by another function is a ValueError:
        two modules claiming one name would make jobs run whichever was imported last."""
        try:
            # The rule a job's target must satisfy: a name no job can reference is a mistake.
            parse_target({"type": "handler", "name": name})
        except ValidationError as exc:
            raise ValueError(f"invalid handler name {name!r}: {exc.message}") from exc
        with self._lock:
            existing = self._handlers.get(name)
            if existing is not None and existing is not fn:
                raise ValueError(f"handler {name!r} is already registered")
            self._handlers[name] = fn
        return fn

    def handler(self, name: str) -> Callable[[Handler], Handler]:
        """Decorator form of `register`."""

        def decorate(fn: Handler) -> Handler:
            return self.register(name, fn)

        return decorate

    def names(self) -> list[str]:
        with self._lock:
            return sorted(self._handlers)

    def __contains__(self, name: object) -> bool:
        return name in self._handlers

    def run(self, name: str, invocation: Invocation) -> None:
        """Run the handler: returns on success, raises TargetError on failure."""
        fn = self._handlers.get(name)
        if fn is None:
            raise TargetError(f"no handler named {name!r} is registered", retryable=False)
        try:
            fn(invocation)
        except TargetError:
            raise  # the handler chose whether a retry can help
        except Exception as exc:
            raise TargetError(str(exc) or type(exc).__name__) from exc


DEFAULT_HANDLERS = HandlerRegistry()


def handler(name: str) -> Callable[[Handler], Handler]:
    """Register the decorated function in DEFAULT_HANDLERS under `name`."""
    return DEFAULT_HANDLERS.handler(name)


def _field(invocation: Invocation, key: str) -> object:
    payload: Any = invocation.payload
    return payload.get(key) if isinstance(payload, dict) else None


@handler("duetime.noop")
def noop(invocation: Invocation) -> None:
    """Does nothing: for measuring the scheduler itself."""


@handler("duetime.sleep")
def sleep(invocation: Invocation) -> None:
    """Sleeps `payload.seconds`; a sleep longer than the invocation's timeout times out."""
    seconds = _field(invocation, "seconds")
    if (
        isinstance(seconds, bool)
        or not isinstance(seconds, int | float)
        or not 0 <= seconds < math.inf  # NaN fails both comparisons
    ):
        raise TargetError(
            'duetime.sleep: payload must be {"seconds": <non-negative number>}',
            retryable=False,
        )
    if seconds > invocation.timeout_seconds:
        time.sleep(max(invocation.timeout_seconds, 0.0))
        raise TargetError(
            f"duetime.sleep: timed out after {invocation.timeout_seconds:g} s "
            f"(asked to sleep {seconds:g} s)"
        )
    time.sleep(seconds)


@handler("duetime.fail")
def fail(invocation: Invocation) -> None:
    """Fails while `attempt < payload.until_attempt` (always, without it): for testing retries."""
    until = _field(invocation, "until_attempt")
    if until is not None and (not isinstance(until, int) or isinstance(until, bool) or until < 1):
        raise TargetError(
            "duetime.fail: payload.until_attempt must be a positive integer",
            retryable=False,
        )
    if until is None or invocation.attempt < until:
        raise TargetError(f"duetime.fail: attempt {invocation.attempt}")
