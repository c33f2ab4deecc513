"""The dashboard: what an on-call engineer looks at first (runs, lateness, queues, sweeps,
functions, the API, the Fargate workers, the archive). The alarms are duetime's monitoring
module's."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from aws_cdk import Duration
from aws_cdk import aws_cloudwatch as cloudwatch

from duetime.history.archive import ArchiveMetric
from duetime.observability import Metric

if TYPE_CHECKING:
    from aws_cdk import aws_dynamodb as dynamodb

    from infra.constructs.api import Api
    from infra.constructs.engine import Engine
    from infra.constructs.history import History
    from infra.constructs.queues import Queues
    from infra.constructs.workers import FargateWorkers

MINUTE = Duration.minutes(1)
FIVE_MINUTES = Duration.minutes(5)
HOUR = Duration.hours(1)
DAY = Duration.days(1)
RUN_METRICS = (
    Metric.RUNS_STARTED,
    Metric.RUNS_SUCCEEDED,
    Metric.RUNS_FAILED,
    Metric.RUNS_RETRIED,
    Metric.RUNS_DEAD,
    Metric.RUNS_DUPLICATE,
    Metric.RUNS_DROPPED,
    Metric.MESSAGES_REFUSED,  # run messages duetime did not sign (an alarm of its own)
    Metric.DELIVERIES_FAILED,  # handling raised: back in seconds (the WorkerErrors alarm)
)
_WIDE, _HALF, _THIRD, _QUARTER = 24, 12, 8, 6
AppMetric = Callable[..., cloudwatch.Metric]


def add_widgets(
    dashboard: cloudwatch.Dashboard,
    metric: AppMetric,
    *,
    sweep_lag_threshold: float,
    queues: Queues,
    engine: Engine,
    api: Api,
    history: History,
    workers: FargateWorkers,
    tables: tuple[dynamodb.Table, ...],
) -> None:
    """The dashboard's rows; `metric(name, statistic, period)` is one of duetime's own."""
    run_queues = queues.run_queues
    functions = {
        "api": api.function,
        "coordinator": engine.coordinator,
        "sweeper": engine.sweeper,
        "reconciler": engine.reconciler,
        "worker": engine.worker,
        "archiver": history.archiver,
        "compactor": history.compactor,
    }
    dashboard.add_widgets(
        cloudwatch.GraphWidget(
            title="Runs per minute",
            width=_HALF,
            left=[metric(name) for name in RUN_METRICS],
        ),
        cloudwatch.GraphWidget(
            title="Start lateness (ms): p50, p99",
            width=_HALF,
            left=[
                metric(Metric.START_LATENESS, "p50"),
                metric(Metric.START_LATENESS, "p99"),
            ],
        ),
    )
    dashboard.add_widgets(
        cloudwatch.GraphWidget(
            title="Queue depth (visible)",
            width=_THIRD,
            left=[q.visible(label=q.key, period=MINUTE, statistic="Maximum") for q in run_queues],
        ),
        cloudwatch.GraphWidget(
            title="Oldest message age (s)",
            width=_THIRD,
            left=[
                q.oldest_age(label=q.key, period=MINUTE, statistic="Maximum") for q in run_queues
            ],
        ),
        cloudwatch.GraphWidget(
            title="Dead-letter queue depth",
            width=_THIRD,
            left=[
                *(
                    q.dlq.metric_approximate_number_of_messages_visible(
                        label=f"{q.key} DLQ", period=MINUTE, statistic="Maximum"
                    )
                    for q in run_queues
                ),
                history.failure_queue.metric_approximate_number_of_messages_visible(
                    label="archive failures", period=MINUTE, statistic="Maximum"
                ),
            ],
        ),
    )
    dashboard.add_widgets(
        cloudwatch.GraphWidget(
            title="Coordinator: invocations, errors; duration (ms)",
            width=_QUARTER,
            left=[
                engine.coordinator.metric_invocations(label="invocations", period=MINUTE),
                engine.coordinator.metric_errors(label="errors", period=MINUTE),
            ],
            right=[
                engine.coordinator.metric_duration(
                    label="duration", period=MINUTE, statistic="Maximum"
                )
            ],
        ),
        cloudwatch.GraphWidget(
            title="Sweep lag (minutes, slowest shard); sweeps not started",
            width=_QUARTER,
            left=[metric(Metric.SWEEP_LAG_MINUTES, "Maximum")],
            right=[metric(Metric.SWEEP_LAUNCH_FAILURES)],
            left_annotations=[
                cloudwatch.HorizontalAnnotation(value=sweep_lag_threshold, label="alarm")
            ],
        ),
        cloudwatch.GraphWidget(
            title="Timers parked, oldest parked passing (min); quarantined (timers stuck)",
            width=_QUARTER,
            left=[metric(Metric.TIMERS_PARKED), metric(Metric.TIMERS_PARKED_AGE, "Maximum")],
            right=[
                metric(Metric.TIMERS_QUARANTINED),
                metric(Metric.TIMERS_IN_QUARANTINE, "Maximum"),
            ],
        ),
        cloudwatch.GraphWidget(
            title="Reconciler: jobs re-armed (daily)",
            width=_QUARTER,
            left=[metric(Metric.JOBS_REARMED, period=HOUR)],
            right=[engine.reconciler.metric_errors(label="errors", period=HOUR)],
        ),
    )
    dashboard.add_widgets(
        cloudwatch.GraphWidget(
            title="Sweeper duration (ms)",
            width=_THIRD,
            left=[
                metric(Metric.SWEEP_DURATION, "p50"),
                metric(Metric.SWEEP_DURATION, "Maximum"),
                engine.sweeper.metric_duration(period=MINUTE, statistic="Maximum"),
            ],
        ),
        cloudwatch.GraphWidget(
            title="Sweeper: timers enqueued, backlog minutes",
            width=_THIRD,
            left=[metric(Metric.TIMERS_ENQUEUED)],
            right=[metric(Metric.SWEEP_BACKLOG_MINUTES, "Maximum")],
        ),
        cloudwatch.GraphWidget(
            title="Function errors and throttles",
            width=_THIRD,
            left=[
                fn.metric_errors(label=f"{name} errors", period=MINUTE)
                for name, fn in functions.items()
            ],
            right=[
                fn.metric_throttles(label=f"{name} throttles", period=MINUTE)
                for name, fn in functions.items()
            ],
        ),
    )
    dashboard.add_widgets(
        cloudwatch.GraphWidget(
            title="API requests and errors",
            width=_THIRD,
            left=[
                api.http_api.metric_count(period=MINUTE),
                api.http_api.metric_client_error(period=MINUTE),
                api.http_api.metric_server_error(period=MINUTE),
            ],
        ),
        cloudwatch.GraphWidget(
            title="API latency (ms): p99",
            width=_THIRD,
            left=[api.http_api.metric_latency(period=MINUTE, statistic="p99")],
        ),
        cloudwatch.GraphWidget(
            title="Fargate backlog (visible + in flight); running tasks",
            width=_THIRD,
            left=[workers.backlog],
            right=[
                cloudwatch.Metric(
                    namespace="ECS/ContainerInsights",
                    metric_name="RunningTaskCount",
                    dimensions_map={
                        "ClusterName": workers.cluster.cluster_name,
                        "ServiceName": workers.service.service_name,
                    },
                    statistic="Maximum",
                    period=MINUTE,
                )
            ],
        ),
    )
    dashboard.add_widgets(
        cloudwatch.GraphWidget(
            title="DynamoDB throttle events (read, write)",
            width=_WIDE,
            left=[
                table.metric(
                    f"{kind}ThrottleEvents",
                    label=f"{table.node.id} {kind.lower()}s",
                    period=MINUTE,
                    statistic="Sum",
                )
                for table in tables
                for kind in ("Read", "Write")
            ],
        ),
    )
    dashboard.add_widgets(
        cloudwatch.GraphWidget(
            title="Archive: runs archived, objects written, records rejected",
            width=_HALF,
            left=[
                metric(ArchiveMetric.RUNS_ARCHIVED, period=FIVE_MINUTES),
                metric(ArchiveMetric.OBJECTS_WRITTEN, period=FIVE_MINUTES),
            ],
            right=[metric(ArchiveMetric.RECORDS_REJECTED, period=FIVE_MINUTES)],
        ),
        cloudwatch.GraphWidget(
            title="Archiver iterator age (ms)",
            width=_HALF,
            left=[
                history.archiver.metric(
                    "IteratorAge", period=MINUTE, statistic="Maximum", label="iterator age"
                )
            ],
        ),
    )
