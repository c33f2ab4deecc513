"""Issue 15: GET /admin/stats through the API handler on moto. Only a token carrying the
operator scope (claim and value configurable) reads it; the figures are SQS's counts, each
shard's sweep lag and the last hour's runs from CloudWatch (moto's). Every reply is validated
against the OpenAPI document."""

from __future__ import annotations

import os
from datetime import timedelta
from typing import Any

import pytest

from duetime.clock import wall_ms
from duetime.domain.timeutil import from_ms
from duetime.settings import Env
from tests.integration import test_api
from tests.integration.test_api import Api

OPERATOR = "duetime/operator"


api_base = test_api.api  # the fixture: the API handler over the moto engine


@pytest.fixture
def api(api_base: Api, monkeypatch: pytest.MonkeyPatch) -> Api:
    for name in (Env.OPERATOR_CLAIM, Env.OPERATOR_SCOPE):
        monkeypatch.delenv(name, raising=False)
    return api_base


def claims(**extra: str) -> dict[str, str]:
    return {"sub": "ops", "iss": "https://issuer.example.com", "aud": "duetime", **extra}


def stats(api: Api, **extra: str) -> test_api.Reply:
    return api.call("GET", "/admin/stats", claims=claims(**extra))


@pytest.mark.parametrize(
    "extra",
    [{}, {"scope": "jobs/read jobs/write"}, {"scope": "duetime/operator-x"}, {"scp": OPERATOR}],
)
def test_without_the_operator_scope_it_is_forbidden(api: Api, extra: dict[str, str]) -> None:
    reply = stats(api, **extra)
    assert reply.status == 403
    assert reply.error["code"] == "forbidden"


def test_without_a_token_naming_someone_it_is_unauthorized(api: Api) -> None:
    assert api.call("GET", "/admin/stats", claims={"scope": OPERATOR}).status == 401


def test_with_the_scope_the_queues_shards_and_runs(api: Api) -> None:
    # Given a job due in 10 seconds (sent at once to lambda-normal, delayed) and one swept shard
    job = api.create({"schedule": {"delay_seconds": 10}})
    assert job["status"] == "scheduled"
    api.engine.tick()

    # When an operator reads the figures
    reply = stats(api, scope=f"jobs/read {OPERATOR}")

    # Then every queue is there with its counts, each shard with its lag, and the runs
    assert reply.status == 200
    body = reply.json
    queues = {queue["name"]: queue for queue in body["queues"]}
    assert set(queues) == {
        f"{runtime}-{priority}"
        for runtime in ("lambda", "fargate")
        for priority in ("high", "normal", "low")
    }
    assert queues["lambda-normal"]["delayed"] == 1
    assert queues["lambda-normal"]["depth"] == 0
    assert queues["lambda-normal"]["dlq_depth"] == 0
    shards = body["shards"]
    assert [s["shard"] for s in shards] == list(range(api.engine.parts.timers.shard_count()))
    swept = [s["lag_seconds"] for s in shards if s["lag_seconds"] is not None]
    assert swept
    assert all(0 <= lag < 120 for lag in swept)
    assert body["runs_last_hour"] == {
        "started": 0,
        "failed": 0,
        "lateness_ms": {"p50": None, "p99": None},
    }
    assert reply.headers["Cache-Control"] == "no-store"


def test_the_runs_of_the_last_hour_come_from_the_workers_metrics(api: Api) -> None:
    # Given the workers' metrics in CloudWatch, as Powertools publishes them
    cloudwatch = api.engine.aws.session.client("cloudwatch")
    now = from_ms(wall_ms())
    # (the namespace and service the functions publish under: here the tests' own)
    service = [{"Name": "service", "Value": os.environ["POWERTOOLS_SERVICE_NAME"]}]
    data: list[Any] = [
        {
            "MetricName": "RunsStarted",
            "Dimensions": service,
            "Value": 1.0,
            "Timestamp": now - timedelta(minutes=m),
        }
        for m in range(2, 7)
    ]
    data.append(
        {
            "MetricName": "RunsFailed",
            "Dimensions": service,
            "Value": 2.0,
            "Timestamp": now - timedelta(minutes=3),
        }
    )
    data.append(
        {
            "MetricName": "RunsStarted",
            "Dimensions": service,
            "Value": 9.0,
            "Timestamp": now - timedelta(hours=2),
        }
    )
    namespace = os.environ["POWERTOOLS_METRICS_NAMESPACE"]
    cloudwatch.put_metric_data(Namespace=namespace, MetricData=data)

    body = stats(api, scope=OPERATOR).json

    runs = body["runs_last_hour"]
    assert (runs["started"], runs["failed"]) == (5, 2)
    # (moto computes no percentiles: tests/unit/test_operator_figures.py reads them)


@pytest.mark.parametrize(
    ("env", "extra", "status"),
    [
        ({}, {"scope": f"[{OPERATOR} other]"}, 200),  # an array claim, as API Gateway renders it
        ({Env.OPERATOR_CLAIM: "cognito:groups"}, {"cognito:groups": f"[admins {OPERATOR}]"}, 200),
        ({Env.OPERATOR_CLAIM: "cognito:groups"}, {"scope": OPERATOR}, 403),
        ({Env.OPERATOR_SCOPE: "admins"}, {"scope": "admins"}, 200),
        ({Env.OPERATOR_SCOPE: "admins"}, {"scope": OPERATOR}, 403),
        (
            {Env.OPERATOR_CLAIM: "roles", Env.OPERATOR_SCOPE: "ops"},
            {"roles": "[dev ops]"},
            200,
        ),
    ],
)
def test_the_claim_and_the_value_are_configurable(
    api: Api, env: dict[str, str], extra: dict[str, str], status: int
) -> None:
    api.configure(**env)
    assert stats(api, **extra).status == status
