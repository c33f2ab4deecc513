"""The operators' figures on AWS (the FiguresSource port): SQS and CloudWatch.

Cost per read, whatever the load: one `GetQueueAttributes` per run queue and one per its
dead-letter queue (2 × runtimes × priorities: 12 calls; one more per extra lane), and one
`GetMetricData` call for every series at once: each queue's (each lane's)
`AWS/SQS ApproximateAgeOfOldestMessage` (its latest minute), and
the workers' `RunsStarted` and `RunsFailed` (Sum) and `StartLatenessMs` (p50, p99) over the
last hour, in the namespace and `service` dimension Powertools publishes them under
(duetime.observability). 10 series + one per lane (6 without extra lanes): well under the
call's 500, at $0.01 per 1,000 metrics requested. A queue spread over lanes shows as one: its
lanes' counts summed, the oldest age their maximum.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from datetime import timedelta
from typing import TYPE_CHECKING, Any

from duetime.domain.jobs import Priority, Runtime
from duetime.domain.timeutil import MINUTE_MS, from_ms
from duetime.observability import Metric
from duetime.ports import FiguresSource, HourOfRuns, QueueFigures, SystemFigures
from duetime.settings import QueueUrls, queue_key

if TYPE_CHECKING:
    from mypy_boto3_cloudwatch import CloudWatchClient
    from mypy_boto3_sqs import SQSClient

_COUNTS: Any = [
    "ApproximateNumberOfMessages",
    "ApproximateNumberOfMessagesNotVisible",
    "ApproximateNumberOfMessagesDelayed",
]
_HOUR_MS = 3_600_000


def queue_figures(
    sqs: SQSClient, queues: Mapping[str, QueueUrls], ages: Mapping[str, int | None]
) -> tuple[QueueFigures, ...]:
    """Each run queue's counts (every runtime × priority; over its lanes, summed), with the
    ages given by queue key."""
    found = []
    for runtime in Runtime:
        for priority in Priority:
            key = queue_key(runtime, priority)
            urls = queues[key]
            lanes = [_attributes(sqs, url) for url in urls.lanes]
            counts = [sum(lane[i] for lane in lanes) for i in range(len(_COUNTS))]
            found.append(
                QueueFigures(
                    runtime=runtime,
                    priority=priority,
                    depth=counts[0],
                    in_flight=counts[1],
                    delayed=counts[2],
                    oldest_age_seconds=ages.get(key),
                    dlq_depth=sum(_attributes(sqs, urls.dlq_url)),
                )
            )
    return tuple(found)


def _attributes(sqs: SQSClient, url: str) -> list[int]:
    found = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=_COUNTS)["Attributes"]
    return [int(found.get(name, "0")) for name in _COUNTS]


class AwsFigures(FiguresSource):
    """`cloudwatch` is called on the first read: only the API function needs the client."""

    def __init__(
        self,
        sqs: SQSClient,
        cloudwatch: Callable[[], CloudWatchClient],
        queues: Mapping[str, QueueUrls],
        *,
        namespace: str,
        service: str,
    ) -> None:
        self._sqs = sqs
        self._cloudwatch = cloudwatch
        self._queues = queues
        self._namespace = namespace
        self._service = service

    def read(self, now_ms: int) -> SystemFigures:
        keys = [queue_key(r, p) for r in Runtime for p in Priority]
        lanes = [(key, url) for key in keys for url in self._queues[key].lanes]
        values = self._metrics(now_ms, [url for _, url in lanes])
        ages = {key: _oldest(values, lanes, key) for key in keys}
        runs = HourOfRuns(
            started=_int(values.get("started")) or 0,
            failed=_int(values.get("failed")) or 0,
            lateness_p50_ms=_int(values.get("p50")),
            lateness_p99_ms=_int(values.get("p99")),
        )
        return SystemFigures(queue_figures(self._sqs, self._queues, ages), runs)

    def _metrics(self, now_ms: int, urls: list[str]) -> dict[str, float]:
        """One GetMetricData call; by query id, the newest value of each series that has one
        (a sum over the hour is added up, should it come back in two periods)."""
        end = from_ms(now_ms - now_ms % MINUTE_MS)  # whole minutes: CloudWatch's resolution
        queries: list[Any] = [
            _query(f"age{i}", "AWS/SQS", "ApproximateAgeOfOldestMessage", "Maximum", 60,
                   {"QueueName": url.rstrip("/").rsplit("/", 1)[-1]})
            for i, url in enumerate(urls)
        ]  # fmt: skip
        service = {"service": self._service}
        for query_id, name, stat in (
            ("started", Metric.RUNS_STARTED, "Sum"),
            ("failed", Metric.RUNS_FAILED, "Sum"),
            ("p50", Metric.START_LATENESS, "p50"),
            ("p99", Metric.START_LATENESS, "p99"),
        ):
            queries.append(_query(query_id, self._namespace, name, stat, 3600, service))
        answer = self._cloudwatch().get_metric_data(
            MetricDataQueries=queries,
            StartTime=end - timedelta(milliseconds=_HOUR_MS),
            EndTime=end,
            ScanBy="TimestampDescending",
        )
        values: dict[str, float] = {}
        for result in answer.get("MetricDataResults", []):
            found = result.get("Values") or []
            query_id = result.get("Id", "")
            if found:
                summed = query_id in ("started", "failed")
                values[query_id] = sum(found) if summed else found[0]
        return values


def _query(
    query_id: str, namespace: str, name: str, stat: str, period: int, dimensions: dict[str, str]
) -> dict[str, Any]:
    return {
        "Id": query_id,
        "MetricStat": {
            "Metric": {
                "Namespace": namespace,
                "MetricName": name,
                "Dimensions": [{"Name": k, "Value": v} for k, v in dimensions.items()],
            },
            "Period": period,
            "Stat": stat,
        },
        "ReturnData": True,
    }


def _oldest(values: Mapping[str, float], lanes: list[tuple[str, str]], key: str) -> int | None:
    """A queue's oldest message age: the largest over its lanes (None: no lane has one)."""
    ages = [values[f"age{i}"] for i, (k, _) in enumerate(lanes) if k == key and f"age{i}" in values]
    return _int(max(ages)) if ages else None


def _int(value: float | None) -> int | None:
    return None if value is None else round(value)
