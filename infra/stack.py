"""DuetimeStack: the deployable stack, one `Scheduler` plus its outputs."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from aws_cdk import CfnOutput, Duration, Stack
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_sns as sns
from aws_cdk import aws_sns_subscriptions as subscriptions
from constructs import Construct

from infra.scheduler import Scheduler, SchedulerProps


class DuetimeStack(Stack):
    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        props: SchedulerProps,
        *,
        alarm_email: str | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(scope, construct_id, **kwargs)
        if props.alarm_topic is None and alarm_email:
            props = _with_topic(props, self._alarm_topic(alarm_email, props))
        self.scheduler = Scheduler(self, "Scheduler", props)
        self._outputs()

    def _alarm_topic(self, email: str, props: SchedulerProps) -> sns.Topic:
        """An encrypted topic CloudWatch can publish to (it cannot use the AWS-managed SNS
        key, so the topic has its own key granting CloudWatch just what publishing needs)."""
        key = kms.Key(
            self,
            "AlarmTopicKey",
            description="duetime alarm notifications",
            enable_key_rotation=True,
            rotation_period=Duration.days(365),
            # It encrypts only the topic's messages, which do not outlive the topic: it goes
            # with the stack when the data does (retain_data=False; before 2026-11-30 it was
            # always kept, found by an outside audit).
            removal_policy=props.removal_policy,
        )
        key.add_to_resource_policy(
            iam.PolicyStatement(
                principals=[iam.ServicePrincipal("cloudwatch.amazonaws.com")],
                actions=["kms:Decrypt", "kms:GenerateDataKey"],
                resources=["*"],  # in a key policy, "*" is this key
                conditions={"StringEquals": {"aws:SourceAccount": self.account}},
            )
        )
        topic = sns.Topic(
            self, "AlarmTopic", display_name="duetime alarms", master_key=key, enforce_ssl=True
        )
        # A topic policy (enforce_ssl writes one) replaces SNS's default, which let the
        # account's alarms publish: without this, every alarm's action fails ("not authorized
        # to perform: SNS:Publish").
        topic.add_to_resource_policy(
            iam.PolicyStatement(
                principals=[iam.ServicePrincipal("cloudwatch.amazonaws.com")],
                actions=["sns:Publish"],
                resources=[topic.topic_arn],
                conditions={"StringEquals": {"aws:SourceAccount": self.account}},
            )
        )
        topic.add_subscription(subscriptions.EmailSubscription(email))
        return topic

    def _outputs(self) -> None:
        scheduler = self.scheduler
        data, history = scheduler.data, scheduler.history
        outputs: dict[str, tuple[str, str]] = {
            "ApiUrl": (scheduler.api_url, "HTTP API base URL (DUETIME_API_URL for the CLI)"),
            "ConsoleUrl": (scheduler.console_url, "web console (served by the HTTP API)"),
            "JobsTable": (data.jobs.table_name, "DynamoDB jobs table"),
            "TimersTable": (data.timers.table_name, "DynamoDB timers table"),
            "RunsTable": (data.runs.table_name, "DynamoDB runs table"),
            "SecretsKeyArn": (data.secrets_key.key_arn, "KMS key of the webhook secrets"),
            "HistoryBucket": (history.bucket.bucket_name, "S3 bucket of the run history"),
            "GlueDatabase": (history.database_name, "Glue database of the history table"),
            "GlueTable": (history.table_name, "Glue table of the run history"),
            "AthenaWorkGroup": (history.workgroup.name, "Athena workgroup for history SQL"),
            "ArchiveFailureQueueUrl": (
                history.failure_queue.queue_url,
                "records that did not reach the archive",
            ),
            "Dashboard": (scheduler.monitoring.dashboard.dashboard_name, "CloudWatch dashboard"),
            "FargateCluster": (scheduler.workers.cluster.cluster_name, "ECS cluster"),
        }
        for run_queue in scheduler.queues.run_queues:
            name = f"{run_queue.runtime.value.capitalize()}{run_queue.priority.value.capitalize()}"
            outputs[f"Queue{name}Url"] = (run_queue.queue.queue_url, f"{run_queue.key} queue")
            outputs[f"Queue{name}DlqUrl"] = (run_queue.dlq.queue_url, f"{run_queue.key} DLQ")
            for n, lane in enumerate(run_queue.lanes[1:], start=2):  # `queue_lanes`
                outputs[f"Queue{name}Lane{n}Url"] = (lane.queue_url, f"{run_queue.key} lane {n}")
        for output_id, (value, description) in outputs.items():
            CfnOutput(self, output_id, value=value, description=description)


def _with_topic(props: SchedulerProps, topic: sns.ITopic) -> SchedulerProps:
    return replace(props, alarm_topic=topic)
