"""The local stack's live figures: runs executed, lateness percentiles, queue depths.

The runs are counted where both workers (the Lambda handler through its event source pollers,
and the Fargate loop) execute them, `RunExecutor.handle`: the local stack's components are
built with `ObservedExecutor`, which counts every run it executes. Reading the runs table
instead would cost a scan that grows with history.
"""

from __future__ import annotations

import math
import threading
from collections import deque
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from duetime.clock import wall_ms
from duetime.domain.runs import RunStatus
from duetime.services.execute import RunExecutor

if TYPE_CHECKING:
    from mypy_boto3_sqs import SQSClient

    from duetime.ports import Delivery
    from duetime.services.execute import Result

LATENESS_WINDOW = 1000  # lateness percentiles are over the latest this many runs


@dataclass(frozen=True)
class Figures:
    started: int
    succeeded: int
    failed: int
    retried: int
    lateness_p50_ms: int | None
    lateness_p99_ms: int | None
    queued: Mapping[str, int] = field(default_factory=dict)  # by queue key, e.g. lambda/high
    dead: int = 0  # messages in the dead-letter queues

    def line(self) -> str:
        def ms(value: int | None) -> str:
            return "-" if value is None else f"{value} ms"

        busy = [f"{key} {n}" for key, n in self.queued.items() if n]
        queued = f"queued {sum(self.queued.values())}" + (f" ({', '.join(busy)})" if busy else "")
        return (
            f"runs {self.started} started, {self.succeeded} succeeded, {self.failed} failed, "
            f"{self.retried} retrying | lateness p50 {ms(self.lateness_p50_ms)}, "
            f"p99 {ms(self.lateness_p99_ms)} | {queued}, dead {self.dead}"
        )


class RunFigures:
    """Counts the runs this process executes, from the results of the execution core."""

    def __init__(self, window: int = LATENESS_WINDOW) -> None:
        self._lock = threading.Lock()
        self._lateness: deque[int] = deque(maxlen=window)
        self.started = self.succeeded = self.failed = self.retried = 0

    def record(self, result: Result, since_ms: int) -> None:
        """Count `result` if this delivery executed the target: the run's latest attempt
        started during the call and has finished (a duplicate delivery returns the run as
        another delivery left it, started earlier)."""
        run = result.run
        if run is None or not run.attempts:
            return
        attempt = run.attempts[-1]
        if attempt.started_ms < since_ms or attempt.finished_ms is None:
            return
        with self._lock:
            self.started += 1
            self._lateness.append(attempt.lateness_ms)
            if run.status == RunStatus.SUCCEEDED:
                self.succeeded += 1
            elif run.status == RunStatus.FAILED:
                self.failed += 1
            elif run.status == RunStatus.RETRYING:
                self.retried += 1

    def snapshot(self, queued: Mapping[str, int] | None = None, dead: int = 0) -> Figures:
        with self._lock:
            lateness = sorted(self._lateness)
            counts = (self.started, self.succeeded, self.failed, self.retried)
        return Figures(
            *counts,
            lateness_p50_ms=_percentile(lateness, 0.50),
            lateness_p99_ms=_percentile(lateness, 0.99),
            queued=dict(queued or {}),
            dead=dead,
        )


class ObservedExecutor(RunExecutor):
    """The execution core, counting into `figures` each run it executes (built by
    duetime.wiring with RunExecutor's arguments and `figures`)."""

    def __init__(self, *args: Any, figures: RunFigures, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._figures = figures

    def handle(
        self, delivery: Delivery, *, remaining_ms: Callable[[], int] | None = None
    ) -> Result:
        since_ms = wall_ms()
        result = super().handle(delivery, remaining_ms=remaining_ms)
        self._figures.record(result, since_ms)
        return result


def _percentile(ordered: list[int], q: float) -> int | None:
    """Nearest-rank percentile of an ordered list."""
    if not ordered:
        return None
    return ordered[max(0, math.ceil(q * len(ordered)) - 1)]


def queue_depth(sqs: SQSClient, url: str) -> int:
    """Messages in the queue: visible, delayed or in flight."""
    names: Any = [
        "ApproximateNumberOfMessages",
        "ApproximateNumberOfMessagesDelayed",
        "ApproximateNumberOfMessagesNotVisible",
    ]
    attributes = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=names)["Attributes"]
    return sum(int(attributes.get(name, "0")) for name in names)
