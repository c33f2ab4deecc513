"""Powertools Logger, Metrics (CloudWatch EMF) and Tracer shared by every function.

Created lazily-configurable singletons: importing this module touches no AWS service. The
service name and metrics namespace come from POWERTOOLS_SERVICE_NAME and
POWERTOOLS_METRICS_NAMESPACE (set by the CDK app; `duetime` where they are not set).
"""

from __future__ import annotations

import contextlib
import functools
import os
import threading
from collections.abc import Callable, Iterator
from typing import Any

from aws_lambda_powertools import Logger, Metrics, Tracer
from aws_lambda_powertools.metrics import MetricUnit

os.environ.setdefault("POWERTOOLS_SERVICE_NAME", "duetime")
os.environ.setdefault("POWERTOOLS_METRICS_NAMESPACE", "duetime")

try:
    logger = Logger()
except ValueError:  # LOG_LEVEL or POWERTOOLS_LOG_LEVEL names no level: said once, below
    logger = Logger(level="INFO")
    logger.warning("the log level in the environment is no level: INFO is used")
metrics = Metrics()


@functools.cache
def _tracer() -> Tracer:
    return Tracer()


def __getattr__(name: str) -> Tracer:
    """`tracer`, made when first imported: the X-Ray SDK makes an AWS client as it loads, so
    a bad AWS setting (a profile that does not exist) stopped every `duetime` command, its
    `--help` too, with a traceback (an outside CLI audit). Only the functions' handlers
    (duetime.entrypoints) take it."""
    if name != "tracer":
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return _tracer()


class Metric:
    """Metric names: the CDK dashboard and alarms use these."""

    RUNS_STARTED = "RunsStarted"
    RUNS_SUCCEEDED = "RunsSucceeded"
    RUNS_FAILED = "RunsFailed"
    RUNS_RETRIED = "RunsRetried"
    RUNS_DEAD = "RunsDead"
    RUNS_DUPLICATE = "RunsDuplicate"
    RUNS_DROPPED = "RunsDropped"
    RUNS_SKIPPED = "RunsSkipped"  # overlap policy: an occurrence recorded `skipped`
    RUNS_BUFFERED = "RunsBuffered"  # overlap policy buffer_one: an occurrence set waiting
    START_LATENESS = "StartLatenessMs"
    EARLY_WAIT = "EarlyWaitMs"  # how long a run's delivery waited for its due instant
    SWEEP_DURATION = "SweepDurationMs"
    TIMERS_ENQUEUED = "TimersEnqueued"
    SWEEP_BACKLOG_MINUTES = "SweepBacklogMinutes"
    TIMERS_PARKED = "TimersParked"  # a timer's hand-over failed on its own: retried later
    TIMERS_QUARANTINED = "TimersQuarantined"  # out of attempts: `duetime timers stuck`
    TIMERS_IN_QUARANTINE = "TimersInQuarantine"  # a shard's quarantined timers, at each sweep
    TIMERS_PARKED_AGE = "TimersParkedAgeMinutes"  # the oldest parked passing, at each sweep
    SWEEP_LAG_MINUTES = "SweepLagMinutes"  # the most any shard's cursor is behind its horizon
    SWEEP_LAUNCH_FAILURES = "SweepLaunchFailures"  # shard sweeps the coordinator could not start
    JOBS_REARMED = "JobsRearmed"  # recurring jobs the reconciler found without a timer
    MESSAGES_REFUSED = "RunMessagesRefused"  # run messages duetime did not sign
    DELIVERIES_FAILED = "RunDeliveriesFailed"  # handling raised (a store call): back soon


@contextlib.contextmanager
def serialized_metrics() -> Iterator[None]:
    """For hosts that run handlers on several threads (the Fargate worker, the local stack).

    Powertools keeps one metric set per process and serializes it while iterating it: in
    Lambda one invocation at a time touches it. With threads, a flush racing an add of a new
    metric name raises "dictionary changed size during iteration". One lock restores the
    one-at-a-time access; the provider's methods are wrapped while any user is inside."""
    global _metrics_users  # noqa: PLW0603 - one process-wide guard
    with _metrics_guard:
        _metrics_users += 1
        if _metrics_users == 1:
            provider: Any = metrics.provider
            for name in _METRIC_METHODS:
                setattr(provider, name, _locked(getattr(provider, name)))
    try:
        yield
    finally:
        with _metrics_guard:
            _metrics_users -= 1
            if _metrics_users == 0:
                for name in _METRIC_METHODS:
                    with contextlib.suppress(AttributeError):
                        delattr(metrics.provider, name)


_METRIC_METHODS = ("add_metric", "flush_metrics", "clear_metrics", "serialize_metric_set")
_metrics_guard = threading.Lock()
_metrics_lock = threading.RLock()
_metrics_users = 0


def _locked(method: Callable[..., Any]) -> Callable[..., Any]:
    def locked(*args: Any, **kwargs: Any) -> Any:
        with _metrics_lock:
            return method(*args, **kwargs)

    return locked


def count(name: str, value: float = 1) -> None:
    metrics.add_metric(name=name, unit=MetricUnit.Count, value=value)


def milliseconds(name: str, value: float) -> None:
    metrics.add_metric(name=name, unit=MetricUnit.Milliseconds, value=value)
