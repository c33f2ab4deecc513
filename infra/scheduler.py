"""The public `Scheduler` construct: everything duetime needs, with typed props.

    from infra.scheduler import Scheduler, SchedulerProps

    scheduler = Scheduler(self, "Scheduler", SchedulerProps(
        jwt_issuer="https://auth.example.com/", jwt_audience=("duetime",)))
    scheduler.api_url, scheduler.data.jobs.table_name, ...

It is composed of one construct per concern (infra/constructs/): data (tables), queues,
engine (coordinator, shard sweeps, reconciler, Lambda worker), api, history (archive, Glue,
Athena), workers (Fargate) and monitoring. The deployable app (infra/app.py) puts one in a
`DuetimeStack`.

Named sizes (infra/profiles.py) set the props a load needs in one go:

    SchedulerProps.profile("large", jwt_issuer=..., jwt_audience=(...), alarm_topic=topic)
"""

from __future__ import annotations

from constructs import Construct

from infra.constructs.api import Api
from infra.constructs.data import Data
from infra.constructs.engine import Engine
from infra.constructs.functions import FunctionFactory
from infra.constructs.history import History
from infra.constructs.monitoring import Monitoring
from infra.constructs.queues import Queues
from infra.constructs.workers import FargateWorkers
from infra.props import PriorityConcurrency, SchedulerProps, TenantQuotas

# The construct's public face: its props are defined in infra/props.py (the constructs read
# them without importing this module).
__all__ = ["PriorityConcurrency", "Scheduler", "SchedulerProps", "TenantQuotas"]

# The CDK feature flags the construct's resources are built and tested with (this repository's
# cdk.json sets them for the whole app), set on its own node: it builds the same resources in
# a host app that lacks them (a plain `App()`), whatever the app's own values. Found by an
# outside audit: without the first, the synth failed. cdk.json's other flags change nothing
# of substance here (docs/deploy.md, "Embedding the `Scheduler` construct").
FEATURE_FLAGS = {
    # The history bucket's server access logs: a bucket policy for logging.s3.amazonaws.com,
    # not the LogDeliveryWrite ACL (which CDK refuses on the bucket-owner-enforced log bucket).
    "@aws-cdk/aws-s3:serverAccessLogsUseBucketPolicy": True,
    # The access-log bucket's policy lets the VPC flow logs' delivery write there.
    "@aws-cdk/aws-s3:createDefaultLoggingPolicy": True,
    # A function's layers in one order (AWS SDK for pandas, then Powertools).
    "@aws-cdk/aws-lambda:recognizeLayerVersion": True,
    # The new VPC's default security group keeps no rules.
    "@aws-cdk/aws-ec2:restrictDefaultSecurityGroup": True,
}


class Scheduler(Construct):
    """duetime: tables, queues, functions, HTTP API, Fargate workers, history, monitoring."""

    def __init__(self, scope: Construct, construct_id: str, props: SchedulerProps) -> None:
        super().__init__(scope, construct_id)
        for flag, value in FEATURE_FLAGS.items():  # only possible before any child is added
            self.node.set_context(flag, value)
        self.props = props
        self.data = Data(self, "Data", props)
        self.queues = Queues(self, "Queues", props)
        factory = FunctionFactory(self, "Functions", props, self.data, self.queues)
        self.engine = Engine(self, "Engine", props, factory, self.data, self.queues)
        self.api = Api(self, "Api", props, factory, self.data, self.queues)
        self.history = History(self, "History", props, factory, self.data)
        self.workers = FargateWorkers(
            self, "Workers", props, factory, self.data, self.queues, self.history
        )
        self.monitoring = Monitoring(
            self,
            "Monitoring",
            props,
            queues=self.queues,
            engine=self.engine,
            api=self.api,
            history=self.history,
            workers=self.workers,
            tables=self.data.tables,
        )

    @property
    def api_url(self) -> str:
        return self.api.url

    @property
    def console_url(self) -> str:
        """The web console, served by the API function: `api_url` + "console/"."""
        return self.api.console_url
