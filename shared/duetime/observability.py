"""Powertools Logger, Metrics (CloudWatch EMF) and Tracer shared by every function.

Created lazily-configurable singletons: importing this module touches no AWS service. The
service name and metrics namespace come from POWERTOOLS_SERVICE_NAME and
POWERTOOLS_METRICS_NAMESPACE (set by the CDK app and the local stack).
"""

from __future__ import annotations

import os

from aws_lambda_powertools import Logger, Metrics, Tracer
from aws_lambda_powertools.metrics import MetricUnit

os.environ.setdefault("POWERTOOLS_SERVICE_NAME", "duetime")
os.environ.setdefault("POWERTOOLS_METRICS_NAMESPACE", "duetime")

logger = Logger()
metrics = Metrics()
tracer = Tracer()


class Metric:
    """Metric names: the CDK dashboard and alarms use these."""

    RUNS_STARTED = "RunsStarted"
    RUNS_SUCCEEDED = "RunsSucceeded"
    RUNS_FAILED = "RunsFailed"
    RUNS_RETRIED = "RunsRetried"
    RUNS_DEAD = "RunsDead"
    RUNS_DUPLICATE = "RunsDuplicate"
    RUNS_DROPPED = "RunsDropped"
    START_LATENESS = "StartLatenessMs"
    SWEEP_DURATION = "SweepDurationMs"
    TIMERS_ENQUEUED = "TimersEnqueued"
    SWEEP_BACKLOG_MINUTES = "SweepBacklogMinutes"


def count(name: str, value: float = 1) -> None:
    metrics.add_metric(name=name, unit=MetricUnit.Count, value=value)


def milliseconds(name: str, value: float) -> None:
    metrics.add_metric(name=name, unit=MetricUnit.Milliseconds, value=value)
