"""Lanes: a runtime × priority's queue spread over several SQS queues (QueueUrls.lanes). Each
run goes to one lane by a stable hash of the run, so its copies and retries meet there; the
settings written before lanes still load; the operators' figures add the lanes up."""

from __future__ import annotations

import json
import subprocess
import sys
from collections import Counter
from typing import Any

import pytest

from duetime.adapters.figures import AwsFigures
from duetime.adapters.sqs import SqsJobQueue
from duetime.domain.jobs import Priority, Runtime
from duetime.domain.messages import MessageAuth, RunMessage
from duetime.settings import Env, QueueUrls, Settings, lane_index, queue_key
from tests.unit.test_operator_figures import NOW_MS, FakeCloudWatch, FakeSqs

BASE = "https://sqs.eu-west-1.amazonaws.com/111122223333"
KEYS = [queue_key(r, p) for r in Runtime for p in Priority]
# DUETIME_QUEUES as the construct wrote it before lanes.
OLD_QUEUES = {
    k: {"url": f"{BASE}/q-{k.replace('/', '-')}", "dlq_url": f"{BASE}/d-{k.replace('/', '-')}"}
    for k in KEYS
}
AUTH = MessageAuth([b"k" * 32])
ENV = {Env.JOBS_TABLE: "j", Env.TIMERS_TABLE: "t", Env.RUNS_TABLE: "r"}


def lanes(n: int, name: str = "lambda-normal") -> QueueUrls:
    """A queue of `n` lanes named <name>-1 ... <name>-n."""
    more = tuple(f"{BASE}/{name}-{i}" for i in range(2, n + 1))
    return QueueUrls(f"{BASE}/{name}-1", f"{BASE}/{name}-dlq", more)


def test_a_run_s_lane_is_stable_across_processes() -> None:
    """Not Python's hash(), which differs in every process (PYTHONHASHSEED)."""
    runs = [(f"job-{i}", 1_795_255_200_000 + i * 60_000) for i in range(20)]
    here = [lane_index(job, at, 6) for job, at in runs]
    code = (
        "import json, sys; from duetime.settings import lane_index; "
        "print(json.dumps([lane_index(j, a, 6) for j, a in json.loads(sys.argv[1])]))"
    )
    elsewhere = subprocess.run(
        [sys.executable, "-c", code, json.dumps(runs)], capture_output=True, text=True, check=True
    )

    assert json.loads(elsewhere.stdout) == here
    assert [lane_index(job, at, 6) for job, at in runs] == here


def test_runs_spread_roughly_evenly_over_the_lanes() -> None:
    queue = lanes(6)
    counts = Counter(
        queue.lane_for(f"job-{i % 2500}", 1_795_255_200_000 + (i // 2500) * 60_000)
        for i in range(10_000)
    )

    assert set(counts) == set(queue.lanes)
    assert all(abs(n - 10_000 / 6) < 10_000 / 6 * 0.1 for n in counts.values()), counts


def test_the_same_job_s_occurrences_use_every_lane() -> None:
    queue = lanes(3)
    used = {queue.lane_for("one-job", 1_795_255_200_000 + m * 60_000) for m in range(60)}

    assert used == set(queue.lanes)


def test_one_lane_is_the_queue() -> None:
    queue = QueueUrls(f"{BASE}/q", f"{BASE}/d")

    assert queue.lanes == (f"{BASE}/q",)
    assert {queue.lane_for(f"job-{i}", i) for i in range(100)} == {f"{BASE}/q"}
    assert queue.to_json() == {"url": f"{BASE}/q", "dlq_url": f"{BASE}/d"}


def test_settings_written_before_lanes_still_load() -> None:
    settings = Settings.from_env({**ENV, Env.QUEUES: json.dumps(OLD_QUEUES)})

    assert all(len(settings.queues[k].lanes) == 1 for k in KEYS)
    assert json.loads(settings.to_env()[Env.QUEUES]) == OLD_QUEUES


def test_lanes_are_named_in_the_settings_and_round_trip() -> None:
    written = {
        **OLD_QUEUES,
        "lambda/normal": {**OLD_QUEUES["lambda/normal"], "more_lanes": ["n2", "n3"]},
    }
    settings = Settings.from_env({**ENV, Env.QUEUES: json.dumps(written)})

    assert settings.queue(Runtime.LAMBDA, Priority.NORMAL).lanes == (
        f"{BASE}/q-lambda-normal",
        f"{BASE}/n2",
        f"{BASE}/n3",
    )
    assert json.loads(settings.to_env()[Env.QUEUES]) == written
    # Jobs may not target any lane of the deployment's own queues.
    assert {"n2", "n3"} <= settings.own_resources().queue_names


@pytest.mark.parametrize("more", ["n2", [2], [""]])
def test_malformed_lanes_are_refused_at_cold_start(more: Any) -> None:
    written = {**OLD_QUEUES, "lambda/high": {**OLD_QUEUES["lambda/high"], "more_lanes": more}}
    with pytest.raises(RuntimeError, match=Env.QUEUES):
        Settings.from_env({**ENV, Env.QUEUES: json.dumps(written)})


class RecordingSqs:
    def __init__(self) -> None:
        self.batches: list[tuple[str, int]] = []

    def send_message_batch(self, QueueUrl: str, Entries: list[Any]) -> Any:
        self.batches.append((QueueUrl, len(Entries)))
        return {"Successful": [{"Id": e["Id"]} for e in Entries]}


def message(job: str, scheduled_ms: int, attempt: int = 1) -> RunMessage:
    return RunMessage("tenant", job, scheduled_ms, attempt, scheduled_ms)


def test_the_sender_batches_per_lane_and_a_retry_goes_to_the_run_s_lane() -> None:
    queue = lanes(4)
    sqs = RecordingSqs()
    sender = SqsJobQueue(sqs, {"lambda/normal": queue}, AUTH)  # type: ignore[arg-type]
    runs = [message(f"job-{i}", 1_795_255_200_000) for i in range(100)]

    sender.send([(m, 0) for m in runs])
    sender.send([(message("job-7", 1_795_255_200_000, attempt=2), 30)])

    per_lane = Counter(queue.lane_for(m.job_id, m.scheduled_ms) for m in runs)
    sent = Counter[str]()
    for url, size in sqs.batches[:-1]:
        assert size <= 10
        sent[url] += size
    assert sent == per_lane
    assert sqs.batches[-1] == (queue.lane_for("job-7", 1_795_255_200_000), 1)


def test_url_for_arn_knows_every_lane() -> None:
    queue = lanes(3)
    sender = SqsJobQueue(RecordingSqs(), {"lambda/normal": queue}, AUTH)  # type: ignore[arg-type]

    for url in queue.lanes:
        name = url.rsplit("/", 1)[-1]
        assert sender.url_for_arn(f"arn:aws:sqs:eu-west-1:111122223333:{name}") == url


def test_operator_figures_add_up_a_queue_s_lanes() -> None:
    queues = {k: QueueUrls.from_json(v) for k, v in OLD_QUEUES.items()}
    queues["lambda/high"] = lanes(3, "lambda-high")
    sqs = FakeSqs({f"{BASE}/lambda-high-1": (4, 2, 1), f"{BASE}/lambda-high-3": (1, 1, 5)})
    # The ages of lambda/high's three lanes are age0..age2 (the first has no datapoint).
    cloudwatch = FakeCloudWatch({"age1": [30.0], "age2": [75.0], "age3": [5.0]})
    source = AwsFigures(sqs, lambda: cloudwatch, queues, namespace="ns", service="svc")  # type: ignore[arg-type]

    high, normal, *_ = source.read(NOW_MS).queues

    assert (high.depth, high.in_flight, high.delayed) == (5, 3, 6)
    assert high.oldest_age_seconds == 75  # the oldest over the lanes
    assert normal.oldest_age_seconds == 5
    [request] = cloudwatch.requests
    names = [
        q["MetricStat"]["Metric"]["Dimensions"][0]["Value"]
        for q in request["MetricDataQueries"][:3]
    ]
    assert names == ["lambda-high-1", "lambda-high-2", "lambda-high-3"]


def test_the_scale_model_reads_a_profile_s_lanes_and_names_the_prop() -> None:
    from dataclasses import replace

    from infra.profiles import DEFAULT
    from scripts import scale_model as sm

    laned = replace(DEFAULT, queue_lanes={"lambda/normal": 2})
    assert sm.inputs_from_profile(laned, 10_000, 600_000).worker_queues == 2
    assert sm.inputs_from_profile(DEFAULT, 10_000, 600_000).worker_queues == 1

    one = sm.plan(sm.inputs_from_profile(DEFAULT, 10_000, 600_000), scan=False)
    mapping = next(c for c in one.checks if c.name.startswith("worker concurrency per"))
    assert "queue_lanes['lambda/normal'] = 2" in mapping.fix


def test_a_dlq_given_by_name_is_beside_the_first_lane() -> None:
    # The CDK app names the DLQ (its URL would cost ~55 bytes of the 4 KB environment).
    entry = {"url": f"{BASE}/q-normal", "dlq": "q-normal-dlq", "more_lanes": ["q-normal-2"]}
    queue = QueueUrls.from_json(entry)
    assert queue.dlq_url == f"{BASE}/q-normal-dlq"
    assert queue.lanes == (f"{BASE}/q-normal", f"{BASE}/q-normal-2")
    assert QueueUrls.from_json({"url": queue.url, "dlq_url": queue.dlq_url}).dlq_url == (
        queue.dlq_url
    )


@pytest.mark.parametrize("dlq", ["", 7, "a/b"])
def test_a_dlq_name_that_is_not_one_is_refused(dlq: object) -> None:
    with pytest.raises(ValueError, match="dlq must be a queue name"):
        QueueUrls.from_json({"url": f"{BASE}/q", "dlq": dlq})
