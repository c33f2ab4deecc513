"""The in-memory TargetRunner (duetime.ports): runs no target, keeps what each one received.

A target told to fail (`fail`) raises TargetError, retryable or not, as a refused or broken
delivery does; every other run is a delivery, and `received(target)` is what reached it (for a
queue target, the messages on the queue). `executions` records every call, failed or not.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass

from duetime.domain.invocation import Invocation, TargetError
from duetime.domain.targets import Target


@dataclass
class _Failure:
    target: Target
    message: str
    retryable: bool
    times: int | None  # how many more runs fail; None: every one


class MemoryTargetRunner:
    def __init__(self) -> None:
        self.executions: list[tuple[Target, Invocation]] = []  # every call, in order
        self._delivered: list[tuple[Target, Invocation]] = []
        self._failures: list[_Failure] = []  # a list: a target with headers is not hashable
        self._lock = threading.Lock()

    def fail(
        self,
        target: Target,
        *,
        retryable: bool,
        times: int | None = None,
        message: str = "the target failed (MemoryTargetRunner)",
    ) -> None:
        """Make the next `times` runs of `target` (every run: None) raise
        TargetError(message, retryable=retryable). Replaces what `target` was told before."""
        with self._lock:
            self._failures = [f for f in self._failures if f.target != target]
            if times is None or times > 0:
                self._failures.append(_Failure(target, message, retryable, times))

    def recover(self, target: Target) -> None:
        """Let `target`'s runs succeed again."""
        self.fail(target, retryable=True, times=0)

    def received(self, target: Target) -> list[Invocation]:
        """The invocations delivered to `target` (the runs that did not fail), in order."""
        with self._lock:
            return [invocation for t, invocation in self._delivered if t == target]

    def execute(self, target: Target, invocation: Invocation) -> None:
        with self._lock:
            self.executions.append((target, invocation))
            failure = next((f for f in self._failures if f.target == target), None)
            if failure is None:
                self._delivered.append((target, invocation))
                return
            if failure.times is not None:
                failure.times -= 1
                if failure.times == 0:
                    self._failures.remove(failure)
        raise TargetError(failure.message, retryable=failure.retryable)
