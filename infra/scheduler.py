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


class Scheduler(Construct):
    """duetime: tables, queues, functions, HTTP API, Fargate workers, history, monitoring."""

    def __init__(self, scope: Construct, construct_id: str, props: SchedulerProps) -> None:
        super().__init__(scope, construct_id)
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
        )

    @property
    def api_url(self) -> str:
        return self.api.url

    @property
    def console_url(self) -> str:
        """The web console, served by the API function: `api_url` + "console/"."""
        return self.api.console_url
