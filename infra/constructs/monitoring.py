"""A CloudWatch dashboard and the alarms an on-call engineer needs, optionally sent to SNS.

The run metrics are Powertools EMF metrics (duetime.observability.Metric) in the
POWERTOOLS_METRICS_NAMESPACE namespace with the `service` dimension Powertools adds
(POWERTOOLS_SERVICE_NAME): the Lambda and Fargate workers publish under the same ones.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from aws_cdk import Duration, Stack
from aws_cdk import aws_cloudwatch as cloudwatch
from aws_cdk import aws_cloudwatch_actions as actions
from constructs import Construct

from duetime.domain.jobs import Runtime
from duetime.observability import Metric
from infra.constructs.dashboard import DAY, FIVE_MINUTES, MINUTE, add_widgets

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
# A timer parked passing (duetime.services.stuck) failing this long: its job is that late.
PARKED_AGE_THRESHOLD_MINUTES = 15
# Stream records live 24 hours: an archiver this far behind is close to losing history.
ARCHIVER_ITERATOR_AGE_THRESHOLD_MS = 6 * 3600 * 1000
AT_LEAST = cloudwatch.ComparisonOperator.GREATER_THAN_OR_EQUAL_TO_THRESHOLD
ABOVE = cloudwatch.ComparisonOperator.GREATER_THAN_THRESHOLD
# DynamoDB throttle events a minute, over the tables, that the alarm counts as lasting (the
# SDK retries each throttled call: a few at the top of a busy minute only delay).
TABLE_THROTTLES_THRESHOLD = 100
# Deliveries a minute whose handling raised (RunDeliveriesFailed) that the alarm counts as a
# failing worker: a few in a busy minute are a throttled call each, tried again in seconds.
WORKER_FAILED_DELIVERIES = 10


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
        self._workers = workers
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
            *self._fargate_alarms(),
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
        section: str | None = None,
    ) -> cloudwatch.Alarm:
        """An alarm named `<stack>-<construct_id>` (a page read `<stack>-SchedulerMonitoring…`
        and a hash), whose description ends with its section of docs/runbook.md (its id, or
        `section` where alarms share one)."""
        runbook = f"Runbook: docs/runbook.md, section {section or construct_id}."
        return cloudwatch.Alarm(
            self,
            construct_id,
            alarm_name=f"{Stack.of(self).stack_name}-{construct_id}",
            alarm_description=f"duetime: {description}. {runbook}",
            metric=metric,
            threshold=threshold,
            evaluation_periods=periods,
            datapoints_to_alarm=datapoints,
            comparison_operator=comparison,
            treat_missing_data=missing,
        )

    def _dlq_alarms(self) -> list[cloudwatch.Alarm]:
        alarms = [
            self._alarm(
                f"DeadLetters{q.runtime.value.capitalize()}{q.priority.value.capitalize()}",
                f"the {q.key} dead-letter queue is not empty (runs out of attempts, or messages "
                "no worker could finish or that duetime did not sign; one tenant's failing job "
                "keeps it on: `duetime dlq list` gives each run's reason and tenant)",
                q.dlq.metric_approximate_number_of_messages_visible(
                    period=MINUTE, statistic="Maximum"
                ),
                1,
                AT_LEAST,
                section="DeadLetters",
            )
            for q in self._queues.run_queues
        ]
        alarms.append(
            self._alarm(
                "DeadLettersArchiveFailures",
                "the archive-failure queue is not empty: run history the archiver could not "
                "write to S3 (a stream batch given up on, or records it cannot convert)",
                self._history.failure_queue.metric_approximate_number_of_messages_visible(
                    period=MINUTE, statistic="Maximum"
                ),
                1,
                AT_LEAST,
            )
        )
        return alarms

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
                section="OldestMessage",
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
                # A coordinator that cannot read the shards' progress reports no lag: its own
                # alarm says so, and this one keeps its state (it sent OK).
                missing=cloudwatch.TreatMissingData.IGNORE,
            ),
            self._alarm(
                "TimersQuarantined",
                "a timer is out of hand-over attempts and quarantined: its job will not run "
                "until an operator acts (run `duetime timers stuck`); on while any is left",
                self.app_metric(Metric.TIMERS_IN_QUARANTINE, "Maximum", FIVE_MINUTES),
                1,
                AT_LEAST,
                # A sweep that fails before counting them reports nothing: the alarm keeps its
                # state (it sent OK, then ALARM again, the timers still quarantined).
                missing=cloudwatch.TreatMissingData.IGNORE,
            ),
            self._alarm(
                "TimersParkedLong",
                f"a timer parked for a store's passing failure (throttling, a 5xx, no answer) "
                f"has failed for {PARKED_AGE_THRESHOLD_MINUTES} minutes or more: its job's "
                "runs start late, and it is never quarantined (run `duetime timers stuck`)",
                self.app_metric(Metric.TIMERS_PARKED_AGE, "Maximum", FIVE_MINUTES),
                PARKED_AGE_THRESHOLD_MINUTES,
                AT_LEAST,
                missing=cloudwatch.TreatMissingData.IGNORE,  # (sweeps failing: their alarms)
            ),
            self._alarm(
                "ReconcilerErrors",
                "the daily reconciler failed (recurring jobs without a timer may not have "
                "been re-armed; the next run, a day later, retries them)",
                # Over the day: over an hour it went back to OK with nothing retried.
                engine.reconciler.metric_errors(period=DAY),
                1,
                AT_LEAST,
            ),
            self._alarm(
                "JobsRearmed",
                "the daily reconciler found jobs that had no timer or whose run was never sent, "
                "and armed them again: their occurrences since were missed",
                self.app_metric(Metric.JOBS_REARMED, period=DAY),
                1,
                AT_LEAST,
            ),
            self._alarm(
                "WorkerErrors",
                "in 2 of the last 3 minutes, a worker function invocation failed as a whole "
                "(a setting missing from its environment, an import error after a deployment, "
                f"a timeout) or {WORKER_FAILED_DELIVERIES} or more deliveries a minute failed "
                "on either worker (a store or queue call raised; each comes back in seconds): "
                "runs wait",
                cloudwatch.MathExpression(
                    expression=f"IF(FILL(errors, 0) >= 1 OR FILL(failed, 0) >= "
                    f"{WORKER_FAILED_DELIVERIES}, 1, 0)",
                    using_metrics={
                        "errors": engine.worker.metric_errors(period=MINUTE),
                        "failed": self.app_metric(Metric.DELIVERIES_FAILED),
                    },
                    label="worker invocations failed, or deliveries failed",
                    period=MINUTE,
                ),
                1,
                AT_LEAST,
                periods=3,
                datapoints=2,
            ),
            self._alarm(
                "RunMessagesRefused",
                "a worker refused a run message duetime did not sign (a forged message, or a "
                "signing key that differs between senders and workers)",
                self.app_metric(Metric.MESSAGES_REFUSED, period=FIVE_MINUTES),
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
                "the daily history compaction failed (the next run is a day later)",
                history.compactor.metric_errors(period=DAY),
                1,
                AT_LEAST,
            ),
        ]

    def _fargate_alarms(self) -> list[cloudwatch.Alarm]:
        """No Fargate task running while its queues hold runs, for 20 minutes (scaling from
        zero takes up to ~15 after a quiet period: deploy.md). On Container Insights' task
        count: none without it."""
        if not self._props.container_insights:
            return []
        lanes = [lane for q in self._queues.of_runtime(Runtime.FARGATE) for lane in q.lanes]
        visible: dict[str, cloudwatch.IMetric] = {
            f"v{i}": lane.metric_approximate_number_of_messages_visible(
                period=MINUTE, statistic="Maximum"
            )
            for i, lane in enumerate(lanes)
        }
        running = cloudwatch.Metric(
            namespace="ECS/ContainerInsights",
            metric_name="RunningTaskCount",
            dimensions_map={
                "ClusterName": self._workers.cluster.cluster_name,
                "ServiceName": self._workers.service.service_name,
            },
            statistic="Maximum",
            period=MINUTE,
        )
        waiting = " + ".join(f"FILL({name}, 0)" for name in visible)
        return [
            self._alarm(
                "FargateWorkersDown",
                "no Fargate worker task has run for 20 minutes while the fargate queues held "
                "runs (the service cannot start tasks: its image, its role, capacity, the "
                "account's Fargate quota): fargate runs wait",
                cloudwatch.MathExpression(
                    expression=f"IF(({waiting}) >= 1 AND FILL(running, 0) < 1, 1, 0)",
                    using_metrics={**visible, "running": running},
                    label="fargate runs waiting with no task running",
                    period=MINUTE,
                ),
                1,
                AT_LEAST,
                periods=20,
                datapoints=20,
            )
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
