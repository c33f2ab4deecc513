"""The pure and near-pure parts of GET /admin/stats: the operator-scope check on the claim as
API Gateway passes it, a shard's lag, the AWS figures read from SQS and one GetMetricData
call (over fake clients that answer as the services do), and the local stack's last hour."""

from __future__ import annotations

from typing import Any

import pytest

from duetime.adapters.figures import AwsFigures
from duetime.api.admin import Forbidden, claim_words, require_scope
from duetime.domain.jobs import Priority, Runtime
from duetime.domain.runs import Attempt, Run, RunStatus
from duetime.local.figures import RunFigures
from duetime.services.operator_stats import lag_seconds
from duetime.services.results import Disposition, Result
from duetime.settings import ApiSettings, Env, QueueUrls, queue_key

NOW_MS = 1_795_255_205_000  # 2026-11-21T10:00:05Z


def event(**claims: object) -> dict[str, Any]:
    return {"requestContext": {"authorizer": {"jwt": {"claims": claims}}}}


@pytest.mark.parametrize(
    ("value", "words"),
    [
        ("duetime/operator", ["duetime/operator"]),
        ("jobs/read duetime/operator", ["jobs/read", "duetime/operator"]),
        ("[admins duetime/operator]", ["admins", "duetime/operator"]),
        ("[]", []),
        (["a", "b"], ["a", "b"]),
        (None, []),
        (7, []),
    ],
)
def test_claim_words_read_both_renderings(value: object, words: list[str]) -> None:
    assert claim_words(event(scope=value), "scope") == words


def test_the_scope_must_be_a_whole_word_of_the_configured_claim() -> None:
    require_scope(event(scope="a duetime/operator"), "scope", "duetime/operator")
    require_scope(event(groups="[ops]"), "groups", "ops")
    # Words are split on spaces only: a value with another whitespace after the word is one
    # other word (an outside audit got the operator view with "duetime/operator\u00a0x").
    whitespace = ("\u00a0x", "\u2003openid", "\tx", "\nx", "\u3000x", "\u2028x")
    others = [event(scope=f"duetime/operator{tail}") for tail in whitespace]
    for bad in (event(scope="duetime/operators"), event(scp="duetime/operator"), {}, *others):
        with pytest.raises(Forbidden):
            require_scope(bad, "scope", "duetime/operator")


@pytest.mark.parametrize(
    ("cursor", "lag"),
    [(None, None), (NOW_MS // 60_000, 5), (NOW_MS // 60_000 - 3, 185), (NOW_MS // 60_000 + 2, 0)],
)
def test_a_shard_s_lag_is_how_long_ago_its_oldest_unswept_minute_began(
    cursor: int | None, lag: int | None
) -> None:
    assert lag_seconds(cursor, NOW_MS) == lag


class FakeSqs:
    def __init__(self, counts: dict[str, tuple[int, int, int]]) -> None:
        self.counts = counts

    def get_queue_attributes(self, QueueUrl: str, AttributeNames: list[str]) -> Any:
        visible, hidden, delayed = self.counts.get(QueueUrl, (0, 0, 0))
        return {
            "Attributes": {
                "ApproximateNumberOfMessages": str(visible),
                "ApproximateNumberOfMessagesNotVisible": str(hidden),
                "ApproximateNumberOfMessagesDelayed": str(delayed),
            }
        }


class FakeCloudWatch:
    def __init__(self, values: dict[str, list[float]]) -> None:
        self.values = values
        self.requests: list[dict[str, Any]] = []

    def get_metric_data(self, **request: Any) -> Any:
        self.requests.append(request)
        return {
            "MetricDataResults": [
                {"Id": q["Id"], "Values": self.values.get(q["Id"], [])}
                for q in request["MetricDataQueries"]
            ]
        }


def test_aws_figures_from_the_queues_and_one_metrics_query() -> None:
    queues = {
        queue_key(r, p): QueueUrls(
            f"https://sqs/1/d-{r.value}-{p.value}", f"https://sqs/1/d-{r.value}-{p.value}-dlq"
        )
        for r in Runtime
        for p in Priority
    }
    sqs = FakeSqs(
        {"https://sqs/1/d-lambda-high": (4, 2, 1), "https://sqs/1/d-lambda-high-dlq": (3, 0, 0)}
    )
    cloudwatch = FakeCloudWatch(
        {
            "age0": [42.4, 10.0],
            "started": [120.0, 3.0],
            "failed": [2.0],
            "p50": [15.2],
            "p99": [480.0],
        }
    )
    source = AwsFigures(sqs, lambda: cloudwatch, queues, namespace="ns", service="svc")  # type: ignore[arg-type]

    figures = source.read(NOW_MS)

    high = figures.queues[0]
    assert (high.runtime, high.priority) == (Runtime.LAMBDA, Priority.HIGH)
    assert (high.depth, high.in_flight, high.delayed, high.dlq_depth) == (4, 2, 1, 3)
    assert high.oldest_age_seconds == 42  # the newest minute's value
    assert all(q.oldest_age_seconds is None for q in figures.queues[1:])  # no datapoint
    assert len(figures.queues) == 6
    runs = figures.runs
    assert (runs.started, runs.failed, runs.lateness_p50_ms, runs.lateness_p99_ms) == (
        123,
        2,
        15,
        480,
    )
    # One call for every series: the queues' ages by name, the runs in the service's namespace
    [request] = cloudwatch.requests
    stats = {q["Id"]: q["MetricStat"] for q in request["MetricDataQueries"]}
    assert stats["age0"]["Metric"]["Dimensions"] == [
        {"Name": "QueueName", "Value": "d-lambda-high"}
    ]
    assert stats["p99"]["Metric"]["Namespace"] == "ns"
    assert stats["p99"]["Metric"]["Dimensions"] == [{"Name": "service", "Value": "svc"}]
    assert (request["EndTime"] - request["StartTime"]).total_seconds() == 3600


def _result(started_ms: int, lateness_ms: int, status: RunStatus) -> Result:
    attempt = Attempt(1, started_ms, lateness_ms, finished_ms=started_ms + 5)
    run = Run("t", "j", started_ms - lateness_ms, status, 1, attempts=(attempt,))
    return Result(Disposition.DONE, "", run)


def test_the_local_stack_counts_the_runs_started_in_the_last_hour() -> None:
    figures = RunFigures()
    figures.record(_result(NOW_MS - 2 * 3_600_000, 999, RunStatus.FAILED), 0)  # too old
    for i, lateness in enumerate((10, 20, 30, 40)):
        figures.record(_result(NOW_MS - 60_000 * (i + 1), lateness, RunStatus.SUCCEEDED), 0)
    figures.record(_result(NOW_MS - 1000, 50, RunStatus.FAILED), 0)

    hour = figures.last_hour(NOW_MS)

    assert (hour.started, hour.failed) == (5, 1)
    assert (hour.lateness_p50_ms, hour.lateness_p99_ms) == (30, 50)
    empty = RunFigures().last_hour(NOW_MS)
    assert (empty.started, empty.lateness_p50_ms, empty.lateness_p99_ms) == (0, None, None)


def test_the_operator_claim_and_scope_come_from_the_environment() -> None:
    default = ApiSettings.from_env({})
    assert (default.operator_claim, default.operator_scope) == ("scope", "duetime/operator")
    env = {Env.OPERATOR_CLAIM: " cognito:groups ", Env.OPERATOR_SCOPE: "operators"}
    configured = ApiSettings.from_env(env)
    assert (configured.operator_claim, configured.operator_scope) == ("cognito:groups", "operators")
