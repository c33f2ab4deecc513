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

from duetime.observability import Metric
from infra.constructs.dashboard import FIVE_MINUTES, HOUR, MINUTE, add_widgets

if TYPE_CHECKING:
    from aws_cdk import aws_dynamodb as dynamodb

    from infra.constructs.api import Api
    from infra.constructs.engine import Engine
    from infra.constructs.history import History
    from infra.constructs.queues import Queues
    from infra.constructs.workers import FargateWorkers
    from infra.props import SchedulerProps

# A shard whose cursor is this many minutes behind the current minute for 3 minutes in a row
# keeps failing (a healthy shard finishes each minute within the next one).
SWEEP_LAG_THRESHOLD_MINUTES = 3
# Stream records live 24 hours: an archiver this far behind is close to losing history.
ARCHIVER_ITERATOR_AGE_THRESHOLD_MS = 6 * 3600 * 1000
AT_LEAST = cloudwatch.ComparisonOperator.GREATER_THAN_OR_EQUAL_TO_THRESHOLD
ABOVE = cloudwatch.ComparisonOperator.GREATER_THAN_THRESHOLD
# DynamoDB throttle events a minute, over the tables, that the alarm counts as lasting (the
# SDK retries each throttled call: a few at the top of a busy minute only delay).
TABLE_THROTTLES_THRESHOLD = 100


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
        tables: tuple[dynamodb.Table, ...],
    ) -> None:
        super().__init__(scope, construct_id)
        self._props = props
        self._queues = queues
        self._engine = engine
        self._api = api
        self._history = history
        self._tables = tables
        self.dashboard = cloudwatch.Dashboard(self, "Dashboard", default_interval=Duration.hours(3))
        add_widgets(
            self.dashboard,
            self.app_metric,
            sweep_lag_threshold=SWEEP_LAG_THRESHOLD_MINUTES,
            queues=queues,
            engine=engine,
            api=api,
            history=history,
            workers=workers,
            tables=tables,
        )
        self.alarms: list[cloudwatch.Alarm] = [
            *self._dlq_alarms(),
            *self._queue_age_alarms(),
            *self._engine_alarms(),
            *self._history_alarms(),
            *self._throttle_alarms(),
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

    # --- alarms

    def _alarm(
        self,
        construct_id: str,
        description: str,
        metric: cloudwatch.IMetric,
        threshold: float,
        comparison: cloudwatch.ComparisonOperator,
        *,
        periods: int = 1,
        datapoints: int | None = None,
        missing: cloudwatch.TreatMissingData = cloudwatch.TreatMissingData.NOT_BREACHING,
    ) -> cloudwatch.Alarm:
        return cloudwatch.Alarm(
            self,
            construct_id,
            alarm_description=f"duetime: {description}",
            metric=metric,
            threshold=threshold,
            evaluation_periods=periods,
            datapoints_to_alarm=datapoints,
            comparison_operator=comparison,
            treat_missing_data=missing,
        )

    def _dlq_alarms(self) -> list[cloudwatch.Alarm]:
        dead_ends: list[tuple[str, sqs.Queue]] = [
            (f"{q.runtime.value}/{q.priority.value}", q.dlq) for q in self._queues.run_queues
        ]
        dead_ends.append(("archive failures", self._history.failure_queue))
        return [
            self._alarm(
                "DeadLetters"
                + "".join(part.capitalize() for part in label.replace("/", " ").split()),
                f"the {label} dead-letter queue is not empty "
                "(runs out of attempts, poison messages or unarchived history)",
                queue.metric_approximate_number_of_messages_visible(
                    period=MINUTE, statistic="Maximum"
                ),
                1,
                AT_LEAST,
            )
            for label, queue in dead_ends
        ]

    def _queue_age_alarms(self) -> list[cloudwatch.Alarm]:
        threshold = self._props.oldest_message_age_threshold_seconds
        return [
            self._alarm(
                f"OldestMessage{q.runtime.value.capitalize()}{q.priority.value.capitalize()}",
                f"a message waits in {q.key} for over {threshold} s "
                "(workers not keeping up, or failing)",
                q.oldest_age(period=MINUTE, statistic="Maximum"),  # over its lanes
                threshold,
                ABOVE,
                periods=5,
            )
            for q in self._queues.run_queues
        ]

    def _engine_alarms(self) -> list[cloudwatch.Alarm]:
        engine = self._engine
        return [
            self._alarm(
                "CoordinatorErrors",
                "the sweep coordinator failed in 2 of the last 3 minutes (shard sweeps were "
                "not started; each tick starts them all again, so repeated failures delay runs)",
                engine.coordinator.metric_errors(period=MINUTE),
                1,
                AT_LEAST,
                periods=3,
                datapoints=2,
            ),
            self._alarm(
                "SweeperStopped",
                "the sweep coordinator has not run for 10 minutes (the schedule rule is "
                "disabled or the function is throttled): no shard is swept, timers are not "
                "dispatched",
                engine.coordinator.metric_invocations(period=FIVE_MINUTES),
                1,
                cloudwatch.ComparisonOperator.LESS_THAN_THRESHOLD,
                periods=2,
                missing=cloudwatch.TreatMissingData.BREACHING,
            ),
            self._alarm(
                "SweeperErrors",
                "a shard sweep failed in 3 of the last 5 minutes (the next tick resumes it; "
                "SweepLagMinutes shows whether a shard falls behind)",
                engine.sweeper.metric_errors(period=MINUTE),
                1,
                AT_LEAST,
                periods=5,
                datapoints=3,
            ),
            self._alarm(
                "SweepLag",
                f"a timer shard has been over {SWEEP_LAG_THRESHOLD_MINUTES} minutes behind for "
                "3 minutes (its sweep keeps failing or cannot keep up; the coordinator's log "
                "names the lagging shards): its timers start late",
                self.app_metric(Metric.SWEEP_LAG_MINUTES, "Maximum"),
                SWEEP_LAG_THRESHOLD_MINUTES,
                ABOVE,
                periods=3,
                datapoints=3,
            ),
            self._alarm(
                "TimersQuarantined",
                "a timer is out of hand-over attempts and quarantined: its job will not run "
                "until an operator acts (run `duetime timers stuck`); on while any is left",
                self.app_metric(Metric.TIMERS_IN_QUARANTINE, "Maximum", FIVE_MINUTES),
                1,
                AT_LEAST,
            ),
            self._alarm(
                "ReconcilerErrors",
                "the daily reconciler failed (recurring jobs without a timer may not have "
                "been re-armed; the next run retries them)",
                engine.reconciler.metric_errors(period=HOUR),
                1,
                AT_LEAST,
            ),
            self._alarm(
                "ApiServerErrors",
                "the HTTP API answered 10 or more 5xx a minute, or a fifth of its answers or "
                "more, in 3 of the last 5 minutes (the API function's log has each error; a "
                "4xx is the client's, not counted)",
                # The share too: with the count alone a quiet API could fail every request and
                # never alarm (until 2026-11-30; found by an outside audit).
                cloudwatch.MathExpression(
                    expression="IF(errors >= 10 OR (errors >= 1 AND errors >= 0.2 * answers), "
                    "1, 0)",
                    using_metrics={
                        "errors": self._api.http_api.metric_server_error(period=MINUTE),
                        "answers": self._api.http_api.metric_count(period=MINUTE),
                    },
                    label="API 5xx: 10 or more a minute, or a fifth of the answers",
                    period=MINUTE,
                ),
                1,
                AT_LEAST,
                periods=5,
                datapoints=3,
            ),
            self._alarm(
                "LatenessP99",
                f"p99 start lateness over {self._props.lateness_p99_threshold_ms} ms",
                self.app_metric(Metric.START_LATENESS, "p99", FIVE_MINUTES),
                self._props.lateness_p99_threshold_ms,
                ABOVE,
                periods=3,
                datapoints=2,
            ),
        ]

    def _history_alarms(self) -> list[cloudwatch.Alarm]:
        history = self._history
        return [
            self._alarm(
                "ArchiverBehind",
                "the archiver is over 6 hours behind the runs stream (records expire from "
                "the stream after 24 hours)",
                history.archiver.metric("IteratorAge", period=FIVE_MINUTES, statistic="Maximum"),
                ARCHIVER_ITERATOR_AGE_THRESHOLD_MS,
                ABOVE,
            ),
            self._alarm(
                "CompactorErrors",
                "the daily history compaction failed",
                history.compactor.metric_errors(period=HOUR),
                1,
                AT_LEAST,
            ),
        ]

    def _throttle_alarms(self) -> list[cloudwatch.Alarm]:
        """Throttling that lasts: each throttled call is retried (by the SDK, or by Lambda for
        an asynchronous invoke or an SQS batch), so a short burst only delays, but minutes of
        it mean runs start late and sweeps fall behind before any other alarm says why."""
        engine = self._engine
        reads = {
            f"r{i}": table.metric("ReadThrottleEvents", period=MINUTE, statistic="Sum")
            for i, table in enumerate(self._tables)
        }
        writes = {
            f"w{i}": table.metric("WriteThrottleEvents", period=MINUTE, statistic="Sum")
            for i, table in enumerate(self._tables)
        }
        run_path = {"api": self._api.function, "coordinator": engine.coordinator}
        run_path |= {"sweeper": engine.sweeper, "worker": engine.worker}
        return [
            self._alarm(
                "TablesThrottled",
                f"DynamoDB throttled {TABLE_THROTTLES_THRESHOLD} or more requests a minute in 3 "
                "of the last 5 minutes (a hot partition, or the table's capacity or account "
                "limits): claims, timers and outcomes slow down and runs start late",
                cloudwatch.MathExpression(
                    # FILL: DynamoDB sends a throttle metric only when it is not 0, and a
                    # sum with a term missing has no value (found by review).
                    expression=" + ".join(f"FILL({m}, 0)" for m in [*reads, *writes]),
                    using_metrics={**reads, **writes},
                    label="DynamoDB throttle events, all tables",
                    period=MINUTE,
                ),
                TABLE_THROTTLES_THRESHOLD,
                AT_LEAST,
                periods=5,
                datapoints=3,
            ),
            self._alarm(
                "FunctionsThrottled",
                "a function of the run path (API, coordinator, sweeper, worker) was throttled "
                "in 3 of the last 5 minutes (account or reserved concurrency): API requests "
                "fail, sweeps start late, runs wait in their queues",
                cloudwatch.MathExpression(
                    expression=" + ".join(f"FILL({m}, 0)" for m in run_path),  # idle: no data
                    using_metrics={
                        name: fn.metric_throttles(period=MINUTE) for name, fn in run_path.items()
                    },
                    label="Lambda throttles, run path",
                    period=MINUTE,
                ),
                1,
                AT_LEAST,
                periods=5,
                datapoints=3,
            ),
        ]
