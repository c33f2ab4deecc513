"""A CloudWatch dashboard and the alarms an on-call engineer needs, optionally sent to SNS.

The run metrics are Powertools EMF metrics (duetime.observability.Metric) in the
POWERTOOLS_METRICS_NAMESPACE namespace with the `service` dimension Powertools adds
(POWERTOOLS_SERVICE_NAME): the Lambda and Fargate workers publish under the same ones.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from aws_cdk import Duration
from aws_cdk import aws_cloudwatch as cloudwatch
from aws_cdk import aws_cloudwatch_actions as actions
from aws_cdk import aws_sqs as sqs
from constructs import Construct

from duetime.history.archive import ArchiveMetric
from duetime.observability import Metric

if TYPE_CHECKING:
    from infra.constructs.api import Api
    from infra.constructs.engine import Engine
    from infra.constructs.history import History
    from infra.constructs.queues import Queues
    from infra.constructs.workers import FargateWorkers
    from infra.props import SchedulerProps

MINUTE = Duration.minutes(1)
FIVE_MINUTES = Duration.minutes(5)
HOUR = Duration.hours(1)
# A shard whose cursor is this many minutes behind the current minute for 3 minutes in a row
# keeps failing (a healthy shard finishes each minute within the next one).
SWEEP_LAG_THRESHOLD_MINUTES = 3
# Stream records live 24 hours: an archiver this far behind is close to losing history.
ARCHIVER_ITERATOR_AGE_THRESHOLD_MS = 6 * 3600 * 1000
RUN_METRICS = (
    Metric.RUNS_STARTED,
    Metric.RUNS_SUCCEEDED,
    Metric.RUNS_FAILED,
    Metric.RUNS_RETRIED,
    Metric.RUNS_DEAD,
    Metric.RUNS_DUPLICATE,
    Metric.RUNS_DROPPED,
)
_WIDE, _HALF, _THIRD, _QUARTER = 24, 12, 8, 6


class Monitoring(Construct):
    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        props: SchedulerProps,
        *,
        queues: Queues,
        engine: Engine,
        api: Api,
        history: History,
        workers: FargateWorkers,
    ) -> None:
        super().__init__(scope, construct_id)
        self._props = props
        self._queues = queues
        self._engine = engine
        self._api = api
        self._history = history
        self._workers = workers
        self.dashboard = cloudwatch.Dashboard(self, "Dashboard", default_interval=Duration.hours(3))
        self._add_widgets()
        self.alarms: list[cloudwatch.Alarm] = [
            *self._dlq_alarms(),
            *self._queue_age_alarms(),
            self._coordinator_errors_alarm(),
            self._sweeper_stopped_alarm(),
            self._sweeper_errors_alarm(),
            self._sweep_lag_alarm(),
            self._timers_quarantined_alarm(),
            self._reconciler_errors_alarm(),
            self._lateness_alarm(),
            self._archiver_behind_alarm(),
            self._compactor_errors_alarm(),
        ]
        if props.alarm_topic is not None:
            action = actions.SnsAction(props.alarm_topic)
            for alarm in self.alarms:
                alarm.add_alarm_action(action)
                alarm.add_ok_action(action)

    def app_metric(
        self, name: str, statistic: str = "Sum", period: Duration = MINUTE
    ) -> cloudwatch.Metric:
        return cloudwatch.Metric(
            namespace=self._props.metrics_namespace,
            metric_name=name,
            dimensions_map={"service": self._props.service_name},
            statistic=statistic,
            period=period,
        )

    # --- dashboard

    def _add_widgets(self) -> None:
        run_queues = self._queues.run_queues
        engine, api, history = self._engine, self._api, self._history
        functions = {
            "api": api.function,
            "coordinator": engine.coordinator,
            "sweeper": engine.sweeper,
            "reconciler": engine.reconciler,
            "worker": engine.worker,
            "archiver": history.archiver,
            "compactor": history.compactor,
        }
        self.dashboard.add_widgets(
            cloudwatch.GraphWidget(
                title="Runs per minute",
                width=_HALF,
                left=[self.app_metric(name) for name in RUN_METRICS],
            ),
            cloudwatch.GraphWidget(
                title="Start lateness (ms): p50, p99",
                width=_HALF,
                left=[
                    self.app_metric(Metric.START_LATENESS, "p50"),
                    self.app_metric(Metric.START_LATENESS, "p99"),
                ],
            ),
        )
        self.dashboard.add_widgets(
            cloudwatch.GraphWidget(
                title="Queue depth (visible)",
                width=_THIRD,
                left=[
                    q.visible(label=q.key, period=MINUTE, statistic="Maximum") for q in run_queues
                ],
            ),
            cloudwatch.GraphWidget(
                title="Oldest message age (s)",
                width=_THIRD,
                left=[
                    q.oldest_age(label=q.key, period=MINUTE, statistic="Maximum")
                    for q in run_queues
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
        self.dashboard.add_widgets(
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
                left=[self.app_metric(Metric.SWEEP_LAG_MINUTES, "Maximum")],
                right=[self.app_metric(Metric.SWEEP_LAUNCH_FAILURES)],
                left_annotations=[
                    cloudwatch.HorizontalAnnotation(
                        value=SWEEP_LAG_THRESHOLD_MINUTES, label="alarm"
                    )
                ],
            ),
            cloudwatch.GraphWidget(
                title="Timers parked; quarantined (duetime timers stuck)",
                width=_QUARTER,
                left=[self.app_metric(Metric.TIMERS_PARKED)],
                right=[self.app_metric(Metric.TIMERS_QUARANTINED)],
            ),
            cloudwatch.GraphWidget(
                title="Reconciler: jobs re-armed (daily)",
                width=_QUARTER,
                left=[self.app_metric(Metric.JOBS_REARMED, period=HOUR)],
                right=[engine.reconciler.metric_errors(label="errors", period=HOUR)],
            ),
        )
        self.dashboard.add_widgets(
            cloudwatch.GraphWidget(
                title="Sweeper duration (ms)",
                width=_THIRD,
                left=[
                    self.app_metric(Metric.SWEEP_DURATION, "p50"),
                    self.app_metric(Metric.SWEEP_DURATION, "Maximum"),
                    engine.sweeper.metric_duration(period=MINUTE, statistic="Maximum"),
                ],
            ),
            cloudwatch.GraphWidget(
                title="Sweeper: timers enqueued, backlog minutes",
                width=_THIRD,
                left=[self.app_metric(Metric.TIMERS_ENQUEUED)],
                right=[self.app_metric(Metric.SWEEP_BACKLOG_MINUTES, "Maximum")],
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
        self.dashboard.add_widgets(
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
                left=[self._workers.backlog],
                right=[
                    cloudwatch.Metric(
                        namespace="ECS/ContainerInsights",
                        metric_name="RunningTaskCount",
                        dimensions_map={
                            "ClusterName": self._workers.cluster.cluster_name,
                            "ServiceName": self._workers.service.service_name,
                        },
                        statistic="Maximum",
                        period=MINUTE,
                    )
                ],
            ),
        )
        self.dashboard.add_widgets(
            cloudwatch.GraphWidget(
                title="Archive: runs archived, objects written, records rejected",
                width=_HALF,
                left=[
                    self.app_metric(ArchiveMetric.RUNS_ARCHIVED, period=FIVE_MINUTES),
                    self.app_metric(ArchiveMetric.OBJECTS_WRITTEN, period=FIVE_MINUTES),
                ],
                right=[self.app_metric(ArchiveMetric.RECORDS_REJECTED, period=FIVE_MINUTES)],
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

    # --- alarms

    def _dlq_alarms(self) -> list[cloudwatch.Alarm]:
        dead_ends: list[tuple[str, sqs.Queue]] = [
            (f"{q.runtime.value}/{q.priority.value}", q.dlq) for q in self._queues.run_queues
        ]
        dead_ends.append(("archive failures", self._history.failure_queue))
        alarms = []
        for label, queue in dead_ends:
            construct_id = "DeadLetters" + "".join(
                part.capitalize() for part in label.replace("/", " ").split()
            )
            alarms.append(
                cloudwatch.Alarm(
                    self,
                    construct_id,
                    alarm_description=f"duetime: the {label} dead-letter queue is not empty "
                    "(runs out of attempts, poison messages or unarchived history)",
                    metric=queue.metric_approximate_number_of_messages_visible(
                        period=MINUTE, statistic="Maximum"
                    ),
                    threshold=1,
                    evaluation_periods=1,
                    comparison_operator=cloudwatch.ComparisonOperator.GREATER_THAN_OR_EQUAL_TO_THRESHOLD,
                    treat_missing_data=cloudwatch.TreatMissingData.NOT_BREACHING,
                )
            )
        return alarms

    def _queue_age_alarms(self) -> list[cloudwatch.Alarm]:
        threshold = self._props.oldest_message_age_threshold_seconds
        return [
            cloudwatch.Alarm(
                self,
                f"OldestMessage{q.runtime.value.capitalize()}{q.priority.value.capitalize()}",
                alarm_description=f"duetime: a message waits in {q.key} for over {threshold} s "
                "(workers not keeping up, or failing)",
                metric=q.oldest_age(period=MINUTE, statistic="Maximum"),  # over its lanes
                threshold=threshold,
                evaluation_periods=5,
                comparison_operator=cloudwatch.ComparisonOperator.GREATER_THAN_THRESHOLD,
                treat_missing_data=cloudwatch.TreatMissingData.NOT_BREACHING,
            )
            for q in self._queues.run_queues
        ]

    def _coordinator_errors_alarm(self) -> cloudwatch.Alarm:
        return cloudwatch.Alarm(
            self,
            "CoordinatorErrors",
            alarm_description="duetime: the sweep coordinator failed in 2 of the last 3 "
            "minutes (shard sweeps were not started; each tick starts them all again, so "
            "repeated failures delay runs)",
            metric=self._engine.coordinator.metric_errors(period=MINUTE),
            threshold=1,
            evaluation_periods=3,
            datapoints_to_alarm=2,
            comparison_operator=cloudwatch.ComparisonOperator.GREATER_THAN_OR_EQUAL_TO_THRESHOLD,
            treat_missing_data=cloudwatch.TreatMissingData.NOT_BREACHING,
        )

    def _sweeper_stopped_alarm(self) -> cloudwatch.Alarm:
        return cloudwatch.Alarm(
            self,
            "SweeperStopped",
            alarm_description="duetime: the sweep coordinator has not run for 10 minutes (the "
            "schedule rule is disabled or the function is throttled): no shard is swept, "
            "timers are not dispatched",
            metric=self._engine.coordinator.metric_invocations(period=FIVE_MINUTES),
            threshold=1,
            evaluation_periods=2,
            comparison_operator=cloudwatch.ComparisonOperator.LESS_THAN_THRESHOLD,
            treat_missing_data=cloudwatch.TreatMissingData.BREACHING,
        )

    def _sweeper_errors_alarm(self) -> cloudwatch.Alarm:
        return cloudwatch.Alarm(
            self,
            "SweeperErrors",
            alarm_description="duetime: a shard sweep failed in 3 of the last 5 minutes (the "
            "next tick resumes it; SweepLagMinutes shows whether a shard falls behind)",
            metric=self._engine.sweeper.metric_errors(period=MINUTE),
            threshold=1,
            evaluation_periods=5,
            datapoints_to_alarm=3,
            comparison_operator=cloudwatch.ComparisonOperator.GREATER_THAN_OR_EQUAL_TO_THRESHOLD,
            treat_missing_data=cloudwatch.TreatMissingData.NOT_BREACHING,
        )

    def _sweep_lag_alarm(self) -> cloudwatch.Alarm:
        return cloudwatch.Alarm(
            self,
            "SweepLag",
            alarm_description=f"duetime: a timer shard has been over "
            f"{SWEEP_LAG_THRESHOLD_MINUTES} minutes behind for 3 minutes (its sweep keeps "
            "failing or cannot keep up; the coordinator's log names the lagging shards): "
            "its timers start late",
            metric=self.app_metric(Metric.SWEEP_LAG_MINUTES, "Maximum"),
            threshold=SWEEP_LAG_THRESHOLD_MINUTES,
            evaluation_periods=3,
            datapoints_to_alarm=3,
            comparison_operator=cloudwatch.ComparisonOperator.GREATER_THAN_THRESHOLD,
            treat_missing_data=cloudwatch.TreatMissingData.NOT_BREACHING,
        )

    def _timers_quarantined_alarm(self) -> cloudwatch.Alarm:
        return cloudwatch.Alarm(
            self,
            "TimersQuarantined",
            alarm_description="duetime: a timer is out of hand-over attempts and quarantined: "
            "its job will not run until an operator acts (run `duetime timers stuck`)",
            metric=self.app_metric(Metric.TIMERS_QUARANTINED, period=FIVE_MINUTES),
            threshold=1,
            evaluation_periods=1,
            comparison_operator=cloudwatch.ComparisonOperator.GREATER_THAN_OR_EQUAL_TO_THRESHOLD,
            treat_missing_data=cloudwatch.TreatMissingData.NOT_BREACHING,
        )

    def _reconciler_errors_alarm(self) -> cloudwatch.Alarm:
        return cloudwatch.Alarm(
            self,
            "ReconcilerErrors",
            alarm_description="duetime: the daily reconciler failed (recurring jobs without "
            "a timer may not have been re-armed; the next run retries them)",
            metric=self._engine.reconciler.metric_errors(period=HOUR),
            threshold=1,
            evaluation_periods=1,
            comparison_operator=cloudwatch.ComparisonOperator.GREATER_THAN_OR_EQUAL_TO_THRESHOLD,
            treat_missing_data=cloudwatch.TreatMissingData.NOT_BREACHING,
        )

    def _lateness_alarm(self) -> cloudwatch.Alarm:
        threshold = self._props.lateness_p99_threshold_ms
        return cloudwatch.Alarm(
            self,
            "LatenessP99",
            alarm_description=f"duetime: p99 start lateness over {threshold} ms",
            metric=self.app_metric(Metric.START_LATENESS, "p99", FIVE_MINUTES),
            threshold=threshold,
            evaluation_periods=3,
            datapoints_to_alarm=2,
            comparison_operator=cloudwatch.ComparisonOperator.GREATER_THAN_THRESHOLD,
            treat_missing_data=cloudwatch.TreatMissingData.NOT_BREACHING,
        )

    def _archiver_behind_alarm(self) -> cloudwatch.Alarm:
        return cloudwatch.Alarm(
            self,
            "ArchiverBehind",
            alarm_description="duetime: the archiver is over 6 hours behind the runs stream "
            "(records expire from the stream after 24 hours)",
            metric=self._history.archiver.metric(
                "IteratorAge", period=FIVE_MINUTES, statistic="Maximum"
            ),
            threshold=ARCHIVER_ITERATOR_AGE_THRESHOLD_MS,
            evaluation_periods=1,
            comparison_operator=cloudwatch.ComparisonOperator.GREATER_THAN_THRESHOLD,
            treat_missing_data=cloudwatch.TreatMissingData.NOT_BREACHING,
        )

    def _compactor_errors_alarm(self) -> cloudwatch.Alarm:
        return cloudwatch.Alarm(
            self,
            "CompactorErrors",
            alarm_description="duetime: the daily history compaction failed",
            metric=self._history.compactor.metric_errors(period=HOUR),
            threshold=1,
            evaluation_periods=1,
            comparison_operator=cloudwatch.ComparisonOperator.GREATER_THAN_OR_EQUAL_TO_THRESHOLD,
            treat_missing_data=cloudwatch.TreatMissingData.NOT_BREACHING,
        )
