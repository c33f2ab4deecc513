"""The HTTP API: API Gateway v2 with a JWT authorizer in front of the api function, which
also serves the web console (same origin: its public routes GET /console, /console/{file}
and deeper)."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

import jsii
from aws_cdk import aws_apigateway as apigw
from aws_cdk import aws_apigatewayv2 as apigwv2
from aws_cdk import aws_apigatewayv2_authorizers as authorizers
from aws_cdk import aws_apigatewayv2_integrations as integrations
from aws_cdk import aws_iam as iam
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_logs as logs
from constructs import Construct

from duetime.api.app import PUBLIC_ROUTES, ROUTES
from duetime.settings import Env
from infra import packaging
from infra.constructs.nag import acknowledge

if TYPE_CHECKING:
    from infra.constructs.data import Data
    from infra.constructs.functions import FunctionFactory
    from infra.constructs.queues import Queues
    from infra.props import SchedulerProps

# DynamoDB actions per table, from what the API's code calls (duetime.services.jobs and
# ...dispatch over duetime.adapters.dynamodb): jobs are created, read, listed and replaced
# conditionally (idempotency keys are conditional puts too, and a key a refused request had
# recorded is deleted, conditionally; a PATCH to a new `after`, in a
# transaction with condition checks of the chain above it), a batch's fresh jobs written by
# batch writes; the tenant's recurring-job counter and an upstream's dependents' item are
# updated (the counter in a one-item transaction); the jobs below a job run now or backfilled
# are batch read (its `after` tree, charged to the submission rate); a timer is written and
# the sweep state read (and the cursor moved back) when a
# submission is due later; runs are read and listed, and batch read by a backfill (which of
# its occurrences have a record). Webhook secrets are items of the jobs table (get,
# conditional puts) encrypted with the data's secrets key. GET /admin/stats batch reads every
# shard's sweep state. tests/integration/test_grants_cover_calls.py checks these against the
# calls.
API_JOBS_ACTIONS = (
    "dynamodb:GetItem",
    "dynamodb:Query",
    "dynamodb:PutItem",
    "dynamodb:BatchWriteItem",
    "dynamodb:UpdateItem",
    "dynamodb:ConditionCheckItem",
    "dynamodb:DeleteItem",
    "dynamodb:BatchGetItem",
)
API_TIMERS_ACTIONS = (
    "dynamodb:GetItem",
    "dynamodb:PutItem",
    "dynamodb:BatchWriteItem",
    "dynamodb:UpdateItem",
    "dynamodb:BatchGetItem",
)
API_RUNS_ACTIONS = ("dynamodb:GetItem", "dynamodb:Query", "dynamodb:BatchGetItem")
# GET /admin/stats (duetime.adapters.figures): each run queue's and DLQ's counts, and one
# GetMetricData call (the queues' oldest-message age, the workers' run metrics).
API_STATS_QUEUE_ACTIONS = ("sqs:GetQueueAttributes",)
API_STATS_METRICS_ACTIONS = ("cloudwatch:GetMetricData",)

# One JSON line per request; the principal is the JWT's subject.
ACCESS_LOG_FORMAT = json.dumps(
    {
        "requestId": "$context.requestId",
        "ip": "$context.identity.sourceIp",
        "requestTime": "$context.requestTime",
        "method": "$context.httpMethod",
        "routeKey": "$context.routeKey",
        "path": "$context.path",
        "status": "$context.status",
        "protocol": "$context.protocol",
        "responseLength": "$context.responseLength",
        "responseLatency": "$context.responseLatency",
        "integrationLatency": "$context.integrationLatency",
        "integrationError": "$context.integrationErrorMessage",
        "authorizerError": "$context.authorizer.error",
        "principal": "$context.authorizer.claims.sub",
    }
)
_METHODS = {method.value: method for method in apigwv2.HttpMethod}
# The web console's static files (duetime.api.console), public like /health: the page must load
# before anyone signs in; its API calls carry the token. API Gateway routes /console/ (the
# trailing slash) to GET /console, whose handler tells the two apart by the raw path. A deeper
# path (/console/a/b) is no file: its own public route gets it the console's 404 (with the
# console's headers), not the authorizer's 401 of the $default route.
CONSOLE_ROUTES = (
    ("GET", "/console"),
    ("GET", "/console/{file}"),
    ("GET", "/console/{file}/{deeper+}"),
)
CONSOLE_PATH = "console/"  # the console's URL: the API's URL (ending in "/") + this


def _with_head(method: str) -> list[apigwv2.HttpMethod]:
    """A public GET route answers HEAD too (RFC 9110; duetime.api.routing), without the token:
    an authorized one's HEAD reaches the function through the authorized $default route."""
    return [_METHODS[method], *([apigwv2.HttpMethod.HEAD] if method == "GET" else [])]


class Api(Construct):
    """Every route of duetime.api.app.ROUTES, authorized by the JWT authorizer except the
    public ones (GET and HEAD /health, /openapi.json), and the console's public routes
    (CONSOLE_ROUTES, GET and HEAD). Anything else reaches the function through the
    (authorized) $default route, which answers 404/405 in the API's error shape."""

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        props: SchedulerProps,
        factory: FunctionFactory,
        data: Data,
        queues: Queues,
    ) -> None:
        super().__init__(scope, construct_id)
        self._props = props
        self.function = self._function(factory, data, queues)
        integration = integrations.HttpLambdaIntegration("Integration", self.function)
        self.authorizer = authorizers.HttpJwtAuthorizer(
            "JwtAuthorizer",
            props.jwt_issuer,
            jwt_audience=list(props.jwt_audience),
            identity_source=["$request.header.Authorization"],
        )
        self.http_api = apigwv2.HttpApi(
            self,
            "HttpApi",
            description="duetime API",
            create_default_stage=False,
            default_integration=integration,
            default_authorizer=self.authorizer,
        )
        self.routes = self._routes(integration)
        self.console_routes = self._console_routes(integration)
        self.access_logs = logs.LogGroup(
            self,
            "AccessLogs",
            retention=props.log_retention,
            removal_policy=props.removal_policy,
        )
        self.stage = apigwv2.HttpStage(
            self,
            "DefaultStage",
            http_api=self.http_api,
            stage_name="$default",
            auto_deploy=True,
            throttle=apigwv2.ThrottleSettings(
                rate_limit=props.api_throttle_rate, burst_limit=props.api_throttle_burst
            ),
            access_log_settings=_AccessLogSettings(
                apigwv2.LogGroupLogDestination(self.access_logs),
                apigw.AccessLogFormat.custom(ACCESS_LOG_FORMAT),
            ),
        )

    @property
    def url(self) -> str:
        return self.stage.url

    @property
    def console_url(self) -> str:
        """The web console: the stage's URL (it ends in "/") + "console/"."""
        return self.stage.url + CONSOLE_PATH

    def _function(self, factory: FunctionFactory, data: Data, queues: Queues) -> lambda_.Function:
        props = self._props
        function = factory.create(
            self,
            "Function",
            name="api",
            description="duetime API: jobs and runs over HTTP",
            timeout_seconds=props.api_timeout_seconds,
            environment={
                **factory.engine_env,
                Env.TENANT_CLAIM: props.tenant_claim,
                Env.OPERATOR_CLAIM: props.operator_claim,
                Env.OPERATOR_SCOPE: props.operator_scope,
                **props.tenant_quotas.to_env(),
                # The console's files are in the code asset (infra.packaging).
                Env.CONSOLE_DIR: packaging.CONSOLE_DIR_IN_LAMBDA,
                **props.console_env(),
            },
            reserved_concurrency=props.api_reserved_concurrency,
        )
        data.jobs.grant(function, *API_JOBS_ACTIONS)
        data.timers.grant(function, *API_TIMERS_ACTIONS)
        data.runs.grant(function, *API_RUNS_ACTIONS)
        data.grant_secrets(function)  # GET /webhook-secret, POST /webhook-secret/rotate
        for run_queue in queues.run_queues:  # the fast path: due soon, straight to SQS
            run_queue.grant(function, "sqs:SendMessage", *API_STATS_QUEUE_ACTIONS)
            run_queue.dlq.grant(function, *API_STATS_QUEUE_ACTIONS)
        self._grant_metrics(function)
        return function

    def _grant_metrics(self, function: lambda_.Function) -> None:
        """GetMetricData, in a policy of its own so its acknowledgement covers it alone."""
        policy = iam.Policy(
            self,
            "StatsMetricsPolicy",
            statements=[
                iam.PolicyStatement(actions=list(API_STATS_METRICS_ACTIONS), resources=["*"])
            ],
        )
        if function.role is None:
            raise RuntimeError("the api function has no role")
        function.role.attach_inline_policy(policy)
        acknowledge(
            policy,
            "AwsSolutions-IAM5[Resource::*]",
            "cloudwatch:GetMetricData has no resource-level permissions (it reads metrics, "
            "never writes): GET /admin/stats reads the queues' oldest-message age and the "
            "workers' run metrics with one call, for operators only.",
        )

    def _routes(self, integration: apigwv2.HttpRouteIntegration) -> list[apigwv2.HttpRoute]:
        routes: list[apigwv2.HttpRoute] = []
        for method, path in ROUTES:
            public = (method, path) in PUBLIC_ROUTES
            added = self.http_api.add_routes(
                path=path,
                methods=_with_head(method) if public else [_METHODS[method]],
                integration=integration,
                authorizer=apigwv2.HttpNoneAuthorizer() if public else None,
            )
            if public:
                for route in added:
                    acknowledge(
                        route,
                        "AwsSolutions-APIG4",
                        f"{method} (and HEAD) {path} is public by design: a health check and "
                        "the API's OpenAPI document, no tenant data.",
                    )
            routes += added
        return routes

    def _console_routes(self, integration: apigwv2.HttpRouteIntegration) -> list[apigwv2.HttpRoute]:
        routes: list[apigwv2.HttpRoute] = []
        for method, path in CONSOLE_ROUTES:
            added = self.http_api.add_routes(
                path=path,
                methods=_with_head(method),
                integration=integration,
                authorizer=apigwv2.HttpNoneAuthorizer(),
            )
            for route in added:
                acknowledge(
                    route,
                    "AwsSolutions-APIG4",
                    f"{method} (and HEAD) {path} is public by design: the web console's static "
                    "files (no tenant data); every API call the page makes carries the JWT.",
                )
            routes += added
        return routes


@jsii.implements(apigwv2.IAccessLogSettings)
class _AccessLogSettings:
    """apigwv2.IAccessLogSettings is an interface, not a struct: this is its implementation."""

    def __init__(
        self, destination: apigwv2.IAccessLogDestination, log_format: apigw.AccessLogFormat
    ) -> None:
        self._destination = destination
        self._format = log_format

    @property
    def destination(self) -> apigwv2.IAccessLogDestination:
        return self._destination

    @property
    def format(self) -> apigw.AccessLogFormat:
        return self._format
