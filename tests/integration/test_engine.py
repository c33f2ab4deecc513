"""The scheduling engine end to end on moto: submit → timer → sweep → SQS → worker → run."""

from __future__ import annotations

import json
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from typing import Any

import pytest
from botocore.awsrequest import AWSResponse

from duetime.adapters.dynamodb.jobs import DynamoJobStore
from duetime.clock import wall_ms
from duetime.domain.jobs import Job, JobStatus, Priority, Runtime
from duetime.domain.messages import RunMessage
from duetime.domain.runs import CLOCK_SKEW_ALLOWANCE_MS, ClaimOutcome, Lease, RunClaim, RunStatus
from duetime.domain.timers import minute_of
from duetime.domain.timeutil import parse_rfc3339, to_ms
from duetime.observability import serialized_metrics
from duetime.ports import ConditionFailed
from duetime.services.dropped import ABANDONED_ERROR
from tests.integration.conftest import START, Engine
from tests.integration.test_contracts import make_job
from tests.reliability.harness import _Body

START_MS = to_ms(START)


def at(seconds: int) -> str:
    """An RFC 3339 instant `seconds` after the test's start."""
    from duetime.domain.timeutil import rfc3339_ms

    return rfc3339_ms(START_MS + seconds * 1000)


def created(engine: Engine, job_id: str) -> int:
    job = engine.parts.jobs.get("tenant-a", job_id)
    assert job is not None
    return job.created_ms


def timer_items(engine: Engine) -> list[dict[str, object]]:
    table = engine.aws.settings.timers_table
    items = engine.aws.dynamodb.scan(TableName=table)["Items"]
    return [i for i in items if i["sk"]["S"][0].isdigit()]


def test_given_a_one_off_job_when_swept_and_worked_then_it_runs_once_on_time(
    engine: Engine,
) -> None:
    # Given a job due in five minutes: beyond the sweep horizon, so it waits as a timer
    job_id = engine.submit({"schedule": {"at": at(300)}})
    timers = timer_items(engine)
    assert [t["sk"]["S"] for t in timers] == [f"{START_MS + 300_000:013d}#{job_id}#0"]
    assert timers[0]["pk"]["S"].startswith("202611211005#")
    assert "expires_at" in timers[0]
    assert engine.queue_messages(Runtime.LAMBDA, Priority.NORMAL) == 0

    # When the sweeper ticks a minute before and the message is released on time (the clock
    # standing at each step: a loaded machine's own time would make the run look late)
    engine.stand_at(START_MS + 235_000)  # 10:04:00 → horizon covers the 10:05 bucket
    report = engine.tick()
    assert report["messages_sent"] == 1
    assert engine.drain() == 0  # delayed by SQS until due
    engine.stand_at(START_MS + 300_000)
    engine.drain()

    # Then the target ran exactly once, for the scheduled instant, and the run is recorded
    assert engine.recorder.runs_of(job_id) == [START_MS + 300_000]
    run = engine.parts.runs.get(job_id, START_MS + 300_000)
    assert run is not None
    assert run.status == RunStatus.SUCCEEDED
    assert len(run.attempts) == 1
    assert run.lateness_ms is not None
    assert 0 <= run.lateness_ms < 1000
    view = engine.parts.service.get("tenant-a", job_id)
    assert view.status == JobStatus.SUCCEEDED
    assert engine.queue_messages(Runtime.LAMBDA, Priority.NORMAL) == 0


def test_given_a_job_due_in_seconds_when_submitted_then_it_takes_the_fast_path(
    engine: Engine,
) -> None:
    job_id = engine.submit({"schedule": {"delay_seconds": 3}})
    assert timer_items(engine) == []
    assert engine.queue_messages(Runtime.LAMBDA, Priority.NORMAL) == 1
    engine.advance(3)
    engine.drain()
    assert engine.recorder.runs_of(job_id) == [created(engine, job_id) + 3000]


def test_given_a_rate_job_when_the_sweeper_ticks_each_minute_then_runs_follow_the_rate(
    engine: Engine,
) -> None:
    job_id = engine.submit({"schedule": {"rate_seconds": 20}})
    engine.run_minutes(4)
    # A minute's occurrences reach the worker in one batch, whose records run concurrently
    runs = sorted(engine.recorder.runs_of(job_id))
    anchor = created(engine, job_id) + 20_000
    assert runs == [anchor + k * 20_000 for k in range(len(runs))]
    assert len(runs) >= 10  # four minutes of a 20 s rate, minus the sweep horizon's tail
    stored = engine.parts.runs.list(job_id, 100, None).items
    assert sorted(r.scheduled_ms for r in stored) == runs
    assert all(r.status == RunStatus.SUCCEEDED for r in stored)


def test_given_a_cron_job_in_a_time_zone_when_swept_then_it_runs_at_local_wall_times(
    engine: Engine,
) -> None:
    # 05:00 in New York is 10:00 UTC on 2026-11-21 (EST, UTC−5)
    job_id = engine.submit({"schedule": {"cron": "*/2 * * * *", "timezone": "America/New_York"}})
    engine.run_minutes(6)
    expected = [to_ms(parse_rfc3339(f"2026-11-21T10:{m:02d}:00Z")) for m in (2, 4, 6)]
    assert engine.recorder.runs_of(job_id)[:3] == expected


def test_given_a_failing_target_when_retried_then_it_succeeds_on_the_second_attempt(
    engine: Engine,
) -> None:
    job_id = engine.submit(
        {
            "schedule": {"delay_seconds": 0},
            "target": {"type": "handler", "name": "duetime.fail"},
            "payload": {"until_attempt": 2},
            "retry": {"max_attempts": 3, "backoff_seconds": 20},
        }
    )
    engine.drain()
    scheduled = created(engine, job_id)
    run = engine.parts.runs.get(job_id, scheduled)
    assert run is not None
    assert run.status == RunStatus.RETRYING  # backoff: 20 s × jitter 0.5 = 10 s
    engine.advance(10)
    engine.drain()
    run = engine.parts.runs.get(job_id, scheduled)
    assert run is not None
    assert run.status == RunStatus.SUCCEEDED
    assert [a.number for a in run.attempts] == [1, 2]
    assert run.attempts[0].error == "duetime.fail: attempt 1"
    assert run.attempts[1].error is None
    assert engine.parts.service.get("tenant-a", job_id).status == JobStatus.SUCCEEDED


def test_given_a_target_that_always_fails_when_attempts_run_out_then_run_fails_into_the_dlq(
    engine: Engine,
) -> None:
    job_id = engine.submit(
        {
            "schedule": {"delay_seconds": 0},
            "target": {"type": "handler", "name": "duetime.fail"},
            "retry": {"max_attempts": 2, "backoff_seconds": 20},
            "priority": "high",
        }
    )
    engine.drain()
    engine.advance(10)
    engine.drain()
    run = engine.parts.runs.get(job_id, created(engine, job_id))
    assert run is not None
    assert run.status == RunStatus.FAILED
    assert len(run.attempts) == 2
    assert engine.parts.service.get("tenant-a", job_id).status == JobStatus.FAILED
    dlq = engine.aws.settings.queue(Runtime.LAMBDA, Priority.HIGH).dlq_url
    dead = engine.aws.sqs.receive_message(QueueUrl=dlq, MessageAttributeNames=["All"])["Messages"]
    assert len(dead) == 1
    body = RunMessage.from_json(dead[0]["Body"])
    assert (body.job_id, body.attempt) == (job_id, 2)
    reason = dead[0]["MessageAttributes"]["duetime-reason"]["StringValue"]
    assert reason == "attempt 2 of 2: duetime.fail: attempt 2"


def test_given_a_cancelled_job_when_it_falls_due_then_it_never_runs(engine: Engine) -> None:
    later = engine.submit({"schedule": {"at": at(300)}})
    soon = engine.submit({"schedule": {"delay_seconds": 5}})  # already in SQS
    engine.parts.service.cancel("tenant-a", later)
    engine.parts.service.cancel("tenant-a", soon)
    engine.run_minutes(6)
    assert engine.recorder.calls == []
    assert engine.parts.runs.get(later, START_MS + 300_000) is None
    assert engine.parts.runs.get(soon, created(engine, soon) + 5_000) is None
    assert engine.parts.service.get("tenant-a", later).status == JobStatus.CANCELLED


def test_given_duplicate_deliveries_of_one_run_then_the_target_is_called_once(
    engine: Engine,
) -> None:
    job_id = engine.submit({"schedule": {"at": at(300)}})
    job = engine.parts.jobs.get("tenant-a", job_id)
    assert job is not None
    message = RunMessage("tenant-a", job_id, START_MS + 300_000, 1, START_MS + 300_000)
    # The same occurrence reaches SQS three times (e.g. a re-sent batch after a crash)
    engine.parts.queue.send([(message, 0), (message, 0), (message, 0)])
    engine.advance(300)
    engine.drain()
    assert engine.recorder.runs_of(job_id) == [START_MS + 300_000]
    assert engine.queue_messages(Runtime.LAMBDA, Priority.NORMAL) == 0


def test_given_a_worker_that_dies_holding_a_run_then_the_run_is_reclaimed_after_visibility(
    engine: Engine,
) -> None:
    job_id, scheduled = claimed_by_a_worker_that_dies(engine)
    engine.drain()
    assert engine.recorder.calls == []  # still leased: SQS hides it
    # When the visibility timeout expires, SQS delivers it again: the run's lease is long
    # over, so attempt 1 was abandoned (it counts), and attempt 2 runs after its backoff
    engine.advance(engine_visibility(engine) + 1)
    engine.drain()
    engine.advance(5)
    engine.drain()
    assert engine.recorder.runs_of(job_id) == [scheduled]
    run = engine.parts.runs.get(job_id, scheduled)
    assert run is not None
    assert run.status == RunStatus.SUCCEEDED
    assert [(a.number, a.error) for a in run.attempts] == [(1, ABANDONED_ERROR), (2, None)]


def test_given_a_worker_that_died_holding_a_run_of_a_job_cancelled_since_then_the_run_ends_failed(
    engine: Engine,
) -> None:
    # Found by review: the redelivery was dropped with its job, before any look at the run,
    # and the run stayed `running` (in progress, in the API) until its record expired.
    job_id, scheduled = claimed_by_a_worker_that_dies(engine)
    engine.parts.service.cancel("tenant-a", job_id)

    # When SQS delivers the message again, its lease long over
    engine.advance(engine_visibility(engine) + 1)
    engine.drain()

    # Then the run is not run again, and ends failed, saying why
    assert engine.recorder.calls == []
    run = engine.parts.runs.get(job_id, scheduled)
    assert run is not None
    assert (run.status, run.lease) == (RunStatus.FAILED, None)
    assert run.error == f"{ABANDONED_ERROR}; not retried: the job is cancelled"
    assert run.finished_ms == scheduled + 60_000  # its lease's end, not the notice's
    assert engine.queue_messages(Runtime.LAMBDA, Priority.NORMAL) == 0


def test_given_a_run_whose_lease_is_live_when_its_message_comes_back_dropped_then_it_waits(
    engine: Engine,
) -> None:
    # A holder's message can come back while it still runs (a heartbeat failed, a Fargate
    # worker handed back its held messages): the run is left to it, and the message kept.
    job_id, scheduled = claimed_by_a_worker_that_dies(engine, visibility=5)
    engine.parts.service.cancel("tenant-a", job_id)
    engine.advance(10)

    engine.drain()

    run = engine.parts.runs.get(job_id, scheduled)
    assert run is not None
    assert run.status == RunStatus.RUNNING
    assert engine.queue_messages(Runtime.LAMBDA, Priority.NORMAL) == 1
    # Once the lease (60 s) and the clock-skew allowance are over, the run ends failed
    engine.advance(60 + CLOCK_SKEW_ALLOWANCE_MS / 1000)
    engine.drain()
    run = engine.parts.runs.get(job_id, scheduled)
    assert run is not None
    assert run.status == RunStatus.FAILED
    assert engine.queue_messages(Runtime.LAMBDA, Priority.NORMAL) == 0
    assert engine.recorder.calls == []


def test_given_a_copy_of_a_run_held_by_a_dead_worker_then_it_reclaims_when_the_lease_ends(
    engine: Engine,
) -> None:
    # A worker claimed the run with a 60 s lease and died; a second copy of the message is queued
    job_id, scheduled = claimed_by_a_worker_that_dies(engine, holder="dead-worker-message")
    engine.drain()  # the copy finds the run busy and comes back when the lease ends
    assert engine.recorder.calls == []
    # (past its deadline by the clock-skew allowance: the deadline is the dead worker's clock)
    engine.advance_to(scheduled + 62_000)
    engine.drain()
    assert engine.recorder.calls == []
    engine.advance_to(scheduled + 62_000 + CLOCK_SKEW_ALLOWANCE_MS)
    engine.drain()  # abandoned: attempt 2 follows after its backoff
    engine.advance(5)
    engine.drain()
    assert engine.recorder.runs_of(job_id) == [scheduled]
    run = engine.parts.runs.get(job_id, scheduled)
    assert run is not None
    assert (run.status, run.attempt) == (RunStatus.SUCCEEDED, 2)


def test_given_a_run_claimed_a_moment_ago_when_a_copy_finds_it_held_then_it_comes_back_soon(
    engine: Engine,
) -> None:
    # A claim moments old may yet be withdrawn (a late run whose job changed since its read:
    # a one-off re-armed on its instant sends a message that can find it): a copy comes back
    # in seconds, not when the holder's lease ends (60 s here, plus the skew allowance).
    claimed_by_a_worker_that_dies(engine, holder="another-copy")

    engine.drain()  # the job's own message finds the run held

    assert engine.recorder.calls == []
    engine.advance(3)
    url = engine.aws.settings.queue(Runtime.LAMBDA, Priority.NORMAL).url
    back = engine.aws.sqs.receive_message(QueueUrl=url, VisibilityTimeout=0).get("Messages", [])
    assert len(back) == 1


def claimed_by_a_worker_that_dies(
    engine: Engine, holder: str | None = None, visibility: int | None = None
) -> tuple[str, int]:
    """A job due now whose run a worker claimed (a 60 s lease) and died before executing: its
    id and its instant. The worker held the job's message (received here, for `visibility`
    seconds, or the queue's), or `holder`, a copy of it (the job's own message stays queued)."""
    job_id = engine.submit({"schedule": {"delay_seconds": 0}})
    if holder is None:
        url = engine.aws.settings.queue(Runtime.LAMBDA, Priority.NORMAL).url
        extra = {} if visibility is None else {"VisibilityTimeout": visibility}
        holder = engine.aws.sqs.receive_message(QueueUrl=url, **extra)["Messages"][0]["MessageId"]
    scheduled = created(engine, job_id)
    outcome, _ = engine.parts.runs.claim(
        RunClaim(
            "tenant-a",
            job_id,
            scheduled,
            1,
            Lease(holder, 1, scheduled + 60_000),
            scheduled,
            0,
            scheduled // 1000 + 3600,
        )
    )
    assert outcome == ClaimOutcome.CLAIMED
    return job_id, scheduled


def engine_visibility(engine: Engine) -> int:
    url = engine.aws.settings.queue(Runtime.LAMBDA, Priority.NORMAL).url
    attrs = engine.aws.sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["VisibilityTimeout"])
    return int(attrs["Attributes"]["VisibilityTimeout"])


def test_given_two_sweeps_of_the_same_minute_then_each_timer_is_sent_once(
    engine: Engine,
) -> None:
    jobs = [engine.submit({"schedule": {"at": at(300 + i)}}) for i in range(30)]
    engine.advance(240)
    # Handlers on threads share Powertools' metric set, as in the local stack: its guard (a
    # review saw "Must contain at least one metric" from a flush racing another's).
    with serialized_metrics(), ThreadPoolExecutor(max_workers=3) as pool:
        reports = list(pool.map(lambda _: engine.tick(), range(3)))
    engine.tick()  # and once more, afterwards
    assert sum(r["messages_sent"] for r in reports) == 30
    assert engine.queue_messages(Runtime.LAMBDA, Priority.NORMAL) == 30
    engine.advance(120)
    engine.drain()
    assert sorted(c.job_id for c in engine.recorder.calls) == sorted(jobs)


def test_given_missed_ticks_when_the_sweeper_returns_then_every_timer_is_caught_up(
    engine: Engine,
) -> None:
    engine.tick()  # the sweeper ran once, at 10:00
    jobs = [engine.submit({"schedule": {"at": at(180 + 60 * i)}}) for i in range(5)]
    engine.advance(60 * 12)  # ... then missed eleven ticks
    report = engine.tick()
    assert report["messages_sent"] == 5
    assert report["backlog_minutes"] >= 10
    engine.drain()
    assert sorted(c.job_id for c in engine.recorder.calls) == sorted(jobs)
    shards = range(engine.parts.timers.shard_count())
    states = engine.parts.timers.sweep_states(shards)
    assert {s.cursor_minute for s in states.values()} == {minute_of(to_ms(START)) + 12 + 2}
    assert set(states) == set(shards)


def test_given_more_stored_future_jobs_then_the_sweep_reads_the_same(engine: Engine) -> None:
    def sweep_reads(stored: int, sweep_at_ms: int) -> tuple[int, int]:
        # `stored` jobs due days from now, and 5 due in the bucket the sweep looks ahead to
        for i in range(stored):
            engine.submit({"schedule": {"at": at(86_400 * 3 + i)}})
        due = [
            engine.submit({"schedule": {"at": at((sweep_at_ms - START_MS) // 1000 + 60 + i)}})
            for i in range(5)
        ]
        engine.advance_to(sweep_at_ms - 60_000)
        engine.parts.sweeper.sweep()  # settle earlier minutes: the measured sweep reads one
        calls: list[str] = []

        def count(event_name: str, **_: object) -> None:
            calls.append(event_name.rsplit(".", maxsplit=1)[-1])

        events = engine.parts.timers._client.meta.events
        events.register("before-call.dynamodb", count)
        engine.advance_to(sweep_at_ms)
        report = engine.parts.sweeper.sweep()
        events.unregister("before-call.dynamodb", count)
        assert report.messages_sent == 5
        # Partitions holding due timers cost a page query (one-off timers need no job read).
        busy = len({engine.parts.timers.shard_of(job_id) for job_id in due})
        return calls.count("Query") - busy, calls.count("BatchGetItem")

    few = sweep_reads(10, START_MS + 10 * 60_000)
    many = sweep_reads(1000, START_MS + 30 * 60_000)
    assert few == many
    # Besides: per shard, a look into the due bucket, one at its stuck timers due for a retry
    # and a count of its quarantined ones (TimersInQuarantine), and one BatchGetItem of its
    # partitions' progress.
    shards = engine.parts.timers.shards
    assert few == (3 * shards, shards)


def test_given_a_paused_recurring_job_then_it_skips_runs_until_resumed_without_duplicates(
    engine: Engine,
) -> None:
    job_id = engine.submit({"schedule": {"rate_seconds": 30}})
    engine.run_minutes(2)
    before = engine.recorder.runs_of(job_id)
    assert before

    engine.parts.service.pause("tenant-a", job_id)
    paused_at = wall_ms()
    engine.run_minutes(3)
    # Only occurrences already released before the pause may still arrive; they are dropped.
    during = [s for s in engine.recorder.runs_of(job_id) if s > paused_at]
    assert during == []
    assert engine.parts.service.get("tenant-a", job_id).status == JobStatus.PAUSED

    engine.parts.service.resume("tenant-a", job_id)
    resumed_at = wall_ms()
    engine.run_minutes(3)
    after = [s for s in engine.recorder.runs_of(job_id) if s > resumed_at]
    assert len(after) >= 4
    runs = engine.recorder.runs_of(job_id)
    assert len(runs) == len(set(runs))  # no occurrence ran twice (old and new chain)
    anchor = created(engine, job_id) + 30_000
    assert all((s - anchor) % 30_000 == 0 for s in runs)  # still on the rate's grid


def _internal_error(request: Any) -> AWSResponse:
    """DynamoDB's 500, answered to a request moto still applies (a before-send hook that runs
    before moto's own): a write that lands, its answer lost."""
    error = {"__type": "com.amazonaws.dynamodb.v20120810#InternalServerError"}
    return AWSResponse(
        request.url,
        500,
        {"Content-Type": "application/x-amz-json-1.0"},
        _Body(json.dumps(error).encode()),  # type: ignore[arg-type]
    )


def test_given_a_claim_that_lands_but_answers_500_then_the_retry_finds_it_ours_and_runs_at_once(
    engine: Engine,
) -> None:
    # DynamoDB may apply a write and still answer 500; the SDK retries it, and the retry's
    # condition then fails on the record the first request wrote: our own claim.
    runs_table = engine.aws.settings.runs_table
    answered: list[str] = []

    def lands_then_500(request: Any, event_name: str, **_: Any) -> AWSResponse | None:
        body = json.loads(request.body or b"{}")
        if answered or body.get("TableName") != runs_table or "Item" not in body:
            return None
        answered.append(body["Item"]["job_id"]["S"])
        return _internal_error(request)

    client = engine.parts.runs._client
    # Runs before moto's own before-send handler, which still applies the request.
    client.meta.events.register_first("before-send.dynamodb.PutItem", lands_then_500)
    job_id = engine.submit({"schedule": {"delay_seconds": 0}})
    engine.advance(1)
    engine.drain()

    assert answered == [job_id]  # the claim's first write was the one answered with a 500
    assert engine.recorder.runs_of(job_id) == [created(engine, job_id)]  # run at once
    assert engine.queue_messages(Runtime.LAMBDA, Priority.NORMAL) == 0
    run = engine.parts.runs.get(job_id, created(engine, job_id))
    assert run is not None
    assert run.status == RunStatus.SUCCEEDED


def test_given_an_outcome_that_lands_but_answers_500_then_the_dependents_still_run(
    engine: Engine,
) -> None:
    # Found by an outside audit: the SDK's retry of the outcome's write failed its condition
    # on the record it had just written, the worker took it for another worker's, and the
    # `after` job's run was never sent (its upstream `succeeded`).
    runs_table = engine.aws.settings.runs_table
    answered: list[str] = []

    def outcome_lands_then_500(request: Any, event_name: str, **_: Any) -> AWSResponse | None:
        body = json.loads(request.body or b"{}")
        item = body.get("Item", {})
        if answered or body.get("TableName") != runs_table or "status" not in item:
            return None
        if item["status"]["S"] != RunStatus.SUCCEEDED.value:
            return None
        answered.append(item["job_id"]["S"])
        return _internal_error(request)

    client = engine.parts.runs._client
    client.meta.events.register_first("before-send.dynamodb.PutItem", outcome_lands_then_500)
    upstream = engine.submit({"schedule": {"delay_seconds": 0}})
    dependent = engine.submit({"schedule": {"after": {"job_id": upstream}}})
    engine.advance(1)
    engine.drain()

    assert answered == [upstream]
    assert engine.recorder.runs_of(upstream) == [created(engine, upstream)]
    assert engine.recorder.runs_of(dependent) == [created(engine, upstream)]


def _job_and_its_rewrite(engine: Engine, write: str) -> tuple[DynamoJobStore, Job, Job]:
    """The job store, a job (stored first to `replace` it), and the job as the write makes it."""
    jobs = engine.parts.jobs
    assert isinstance(jobs, DynamoJobStore)
    job = make_job()
    if write == "replace":
        jobs.create(job)
    return jobs, job, replace(job, spec=replace(job.spec, name="renamed"), version=job.version + 1)


@pytest.mark.parametrize("write", ["create", "replace"])
def test_given_another_request_wrote_the_same_job_then_a_failed_write_is_not_taken_for_ours(
    engine: Engine, write: str
) -> None:
    # Found by an outside audit: two copies of one request (the same job, in the same
    # millisecond) wrote identical items, so the one whose write failed took the other's for
    # its own: each counted the job against the tenant's quota (or released it on a cancel).
    jobs, job, written = _job_and_its_rewrite(engine, write)
    other = DynamoJobStore(jobs._client, engine.aws.settings.jobs_table)

    if write == "create":
        other.create(written)
        with pytest.raises(ConditionFailed):
            jobs.create(written)
    else:
        other.replace(written, expected=job)
        with pytest.raises(ConditionFailed):
            jobs.replace(written, expected=job)
    assert jobs.get(job.tenant, job.id) == written


@pytest.mark.parametrize("write", ["create", "replace"])
def test_given_a_job_write_that_lands_but_answers_500_then_the_retry_finds_it_ours(
    engine: Engine, write: str
) -> None:
    # Found by review: the SDK's retry of a write DynamoDB applied failed its condition on our
    # own item, and callers took it for a concurrent writer's (a replay answered 201 for a job
    # never armed, a resume answered 409 and left the job without a chain).
    jobs, job, written = _job_and_its_rewrite(engine, write)
    landed: list[str] = []

    def first_write_lands(params: dict[str, Any], **_: Any) -> None:
        if not landed:  # (what the first request applied, before its 500)
            landed.append(params["Item"]["id"]["S"])
            unconditional = {k: v for k, v in params.items() if "Expression" not in k}
            jobs._client.put_item(**unconditional)

    jobs._client.meta.events.register("provide-client-params.dynamodb.PutItem", first_write_lands)
    if write == "create":
        jobs.create(written)
    else:
        jobs.replace(written, expected=job)

    assert landed == [job.id]
    assert jobs.get(job.tenant, job.id) == written
    with pytest.raises(ConditionFailed):  # another writer's change still fails
        jobs.replace(replace(written, version=written.version + 1), expected=job)
