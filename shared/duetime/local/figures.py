"""The local stack's live figures: runs executed, lateness percentiles, queue depths; and
`LocalFigures`, what GET /admin/stats reads locally (the FiguresSource port).

The runs are counted where both workers (the Lambda handler through its event source pollers,
and the Fargate loop) execute them, `RunExecutor.handle`: the local stack's components are
built with `ObservedExecutor`, which counts every run it executes. Reading the runs table
instead would cost a scan that grows with history.
"""

from __future__ import annotations

import math
import threading
from collections import deque
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from botocore.exceptions import ClientError

from duetime.adapters.figures import queue_figures
from duetime.clock import wall_ms
from duetime.domain.runs import RunStatus
from duetime.local.moto_sqs import AGE_OF_OLDEST
from duetime.ports import FiguresSource, HourOfRuns, SystemFigures
from duetime.services.execute import RunExecutor
from duetime.settings import QueueUrls

if TYPE_CHECKING:
    from mypy_boto3_sqs import SQSClient

    from duetime.ports import Delivery
    from duetime.services.results import Result

LATENESS_WINDOW = 1000  # lateness percentiles are over the latest this many runs
HOUR_MS = 3_600_000
RECENT_RUNS = 100_000  # GET /admin/stats counts the last hour's runs, at most this many


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
        # (started ms, lateness ms, failed for good) of the latest runs, oldest first
        self._recent: deque[tuple[int, int, bool]] = deque(maxlen=RECENT_RUNS)
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
            failed = run.status == RunStatus.FAILED
            self._recent.append((attempt.started_ms, attempt.lateness_ms, failed))
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

    def last_hour(self, now_ms: int) -> HourOfRuns:
        """The runs started in the hour before `now_ms` (by their attempt's start)."""
        with self._lock:
            recent = [run for run in self._recent if now_ms - HOUR_MS < run[0] <= now_ms]
        lateness = sorted(lateness for _, lateness, _ in recent)
        return HourOfRuns(
            started=len(recent),
            failed=sum(1 for *_, failed in recent if failed),
            lateness_p50_ms=_percentile(lateness, 0.50),
            lateness_p99_ms=_percentile(lateness, 0.99),
        )


class LocalFigures(FiguresSource):
    """GET /admin/stats on the local stack: the queues' counts from its SQS (moto), the runs
    of the last hour from what this process executed (`RunFigures`). The oldest message's age
    is the attribute the local stack's moto answers (duetime.local.moto_sqs: how long the
    oldest message ready for a worker has waited); null from a moto without it."""

    def __init__(self, sqs: SQSClient, queues: Mapping[str, QueueUrls], runs: RunFigures) -> None:
        self._sqs = sqs
        self._queues = queues
        self._runs = runs

    def read(self, now_ms: int) -> SystemFigures:
        ages = {key: _largest(map(self._age, urls.lanes)) for key, urls in self._queues.items()}
        return SystemFigures(
            queue_figures(self._sqs, self._queues, ages), self._runs.last_hour(now_ms)
        )

    def _age(self, url: str) -> int | None:
        names: Any = [AGE_OF_OLDEST]
        try:
            found = self._sqs.get_queue_attributes(QueueUrl=url, AttributeNames=names)
        except ClientError:  # a moto without the stand-in attribute
            return None
        attributes: Mapping[Any, str] = found["Attributes"]  # the name is not in the stubs
        value = attributes.get(AGE_OF_OLDEST)
        return int(value) if value is not None else None


class ObservedExecutor(RunExecutor):
    """The execution core, counting into `figures` each run it executes (built by
    duetime.wiring with RunExecutor's arguments and `figures`)."""

    def __init__(self, *args: Any, figures: RunFigures, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._figures = figures

    def handle(
        self,
        delivery: Delivery,
        *,
        remaining_ms: Callable[[], int] | None = None,
        stopping: Callable[[], bool] | None = None,
    ) -> Result:
        since_ms = wall_ms()
        result = super().handle(delivery, remaining_ms=remaining_ms, stopping=stopping)
        self._figures.record(result, since_ms)
        return result


def _largest(ages: Iterable[int | None]) -> int | None:
    """The oldest age over a queue's lanes (None: no lane answered one)."""
    known = [age for age in ages if age is not None]
    return max(known) if known else None


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
