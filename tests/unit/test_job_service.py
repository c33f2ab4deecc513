"""The job service on the in-memory twins: submission paths, idempotency, status views."""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import json
import threading
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

import pytest

from duetime.adapters.memory.jobs import MemoryJobStore
from duetime.adapters.memory.queues import MemoryQueue
from duetime.adapters.memory.runs import MemoryRunStore
from duetime.adapters.memory.timers import MemoryTimerStore
from duetime.domain.errors import IdempotencyConflict, IllegalTransition, NotFound, QuotaExceeded
from duetime.domain.jobs import JobStatus, Priority, Runtime, parse_job_spec, spec_to_dict
from duetime.domain.messages import RunMessage
from duetime.domain.timeutil import to_ms
from duetime.ports import ConditionFailed, StoreError
from duetime.services.batch import BatchJob, BatchSubmitter
from duetime.services.idempotency import fingerprint, run_now_binding, run_now_bound
from duetime.services.jobs import JobService
from duetime.services.submission import Prepared
from duetime.settings import QueueUrls, Quotas, Settings, queue_key

T0 = to_ms(datetime(2026, 11, 21, 10, 0, 7, tzinfo=UTC))


class Parts:
    def __init__(self) -> None:
        self.now = T0
        queues = {
            queue_key(r, p): QueueUrls(f"q/{r}/{p}", f"d/{r}/{p}")
            for r in Runtime
            for p in Priority
        }
        self.settings = Settings("j", "t", "r", queues, timer_shards=2)
        self.jobs = MemoryJobStore()
        self.timers = MemoryTimerStore(shards=2)
        self.runs = MemoryRunStore()
        self.queue = MemoryQueue(lambda: self.now)
        self.service = JobService(
            self.jobs, self.timers, self.runs, self.queue, self.settings, clock=lambda: self.now
        )


def spec(**changes: Any) -> Any:
    body = {"schedule": {"delay_seconds": 600}, "target": {"type": "handler", "name": "x.y"}}
    return parse_job_spec({**body, **changes})


def test_given_a_replayed_request_with_its_key_then_the_same_job_is_returned() -> None:
    parts = Parts()
    first = parts.service.create("t", spec(), idempotency_key="order-42")
    parts.now += 1_000
    again = parts.service.create("t", spec(), idempotency_key="order-42")
    assert again == first
    assert len(parts.jobs.list("t", 10, None).items) == 1
    assert parts.timers.count() == 1


def test_given_a_key_reused_for_another_request_then_it_is_a_conflict() -> None:
    parts = Parts()
    parts.service.create("t", spec(), idempotency_key="k")
    with pytest.raises(IdempotencyConflict):
        parts.service.create("t", spec(name="other"), idempotency_key="k")


def test_given_fields_at_their_defaults_then_the_key_binds_only_what_the_body_changes() -> None:
    # A field added later with a default cannot change a fingerprint: a body that leaves the
    # optional fields at their defaults is bound to its schedule and target alone.
    minimal = spec()
    canonical = {"schedule": {"delay_seconds": 600}, "target": {"type": "handler", "name": "x.y"}}
    text = json.dumps(canonical, sort_keys=True, separators=(",", ":"))
    assert fingerprint(minimal) == "2:" + hashlib.sha256(text.encode()).hexdigest()
    assert fingerprint(spec(priority="normal", stage_seconds=0, tags={})) == fingerprint(minimal)
    assert fingerprint(spec(stage_seconds=2)) != fingerprint(minimal)
    assert fingerprint(spec(schedule={"delay_seconds": 601})) != fingerprint(minimal)
    web = {"type": "http", "url": "https://example.com/hook"}
    assert fingerprint(spec(target={**web, "headers": {}})) == fingerprint(spec(target=web))
    assert fingerprint(spec(target={**web, "headers": {"A": ""}})) != fingerprint(spec(target=web))


def test_given_a_key_bound_before_fingerprints_had_a_version_then_the_retry_still_replays() -> None:
    parts = Parts()
    first = parts.service.create("t", spec(payload={"n": 1}))
    everything = json.dumps(
        spec_to_dict(spec(payload={"n": 1})), sort_keys=True, separators=(",", ":")
    )
    legacy = hashlib.sha256(everything.encode()).hexdigest()  # what the previous version stored
    parts.jobs.claim_key("t", "k", first.id, legacy, 2**31, 0)

    assert parts.service.create("t", spec(payload={"n": 1}), idempotency_key="k").id == first.id
    with pytest.raises(IdempotencyConflict):
        parts.service.create("t", spec(payload={"n": 2}), idempotency_key="k")
    assert len(parts.jobs.list("t", 10, None).items) == 1


def test_given_the_same_key_from_another_tenant_then_it_is_a_separate_job() -> None:
    parts = Parts()
    mine = parts.service.create("a", spec(), idempotency_key="k")
    theirs = parts.service.create("b", spec(), idempotency_key="k")
    assert mine.id != theirs.id


def test_given_a_first_call_that_died_after_its_key_then_the_replay_completes_it() -> None:
    parts = Parts()

    class Dying(RuntimeError):
        pass

    def die(job: object) -> None:
        raise Dying

    create = parts.jobs.create
    parts.jobs.create = die  # type: ignore[method-assign]
    with pytest.raises(Dying):
        parts.service.create("t", spec(), idempotency_key="k")
    parts.jobs.create = create  # type: ignore[method-assign]

    job = parts.service.create("t", spec(), idempotency_key="k")
    recorded = parts.jobs.claim_key("t", "k", "another-id", "fp", 2**31, 0)
    assert recorded is not None
    assert recorded[0] == job.id  # created under the id the first call recorded
    assert parts.service.get("t", job.id).status == JobStatus.SCHEDULED
    assert parts.timers.count() == 1


def test_given_a_dispatch_failure_then_the_job_is_cancelled_and_the_error_raised() -> None:
    parts = Parts()

    def fail(messages: object) -> None:
        raise ConnectionError("SQS unreachable")

    parts.queue.send = fail  # type: ignore[method-assign]
    with pytest.raises(ConnectionError):
        parts.service.create("t", spec(schedule={"delay_seconds": 1}))
    (job,) = parts.jobs.list("t", 10, None).items
    assert job.status == JobStatus.CANCELLED


def test_given_another_tenants_job_then_every_operation_is_not_found() -> None:
    parts = Parts()
    job = parts.service.create("a", spec(schedule={"rate_seconds": 60}))
    for operation in (
        parts.service.get,
        parts.service.cancel,
        parts.service.pause,
        parts.service.resume,
        parts.service.run_now,
    ):
        with pytest.raises(NotFound):
            operation("b", job.id)
    assert parts.service.get("a", job.id).status == JobStatus.SCHEDULED


def test_given_a_concurrent_change_then_a_transition_is_a_conflict_not_a_lost_update() -> None:
    parts = Parts()
    job = parts.service.create("a", spec(schedule={"rate_seconds": 60}))
    replace = parts.jobs.replace

    def raced(new: object, **_: object) -> None:
        raise ConditionFailed("changed")

    parts.jobs.replace = raced  # type: ignore[method-assign]
    with pytest.raises(IllegalTransition):
        parts.service.pause("a", job.id)
    parts.jobs.replace = replace  # type: ignore[method-assign]
    assert parts.service.get("a", job.id).status == JobStatus.SCHEDULED


def test_given_a_one_off_job_past_its_hot_window_then_it_is_history_not_state() -> None:
    parts = Parts()
    job = parts.service.create("t", spec(schedule={"delay_seconds": 0}))
    # The window starts once its run can have ended, every attempt and wait taken (with the
    # defaults: 3 attempts of 30 s, 2 waits of at most 900 s, a target's Retry-After): a retry
    # reads its job.
    runs_end = job.created_ms // 1000 + 3 * 30 + 2 * 900
    assert job.expires_at == runs_end + parts.settings.run_ttl_seconds
    past = parts.service.create("t", spec(schedule={"at": "2000-01-01T00:00:00Z"}))
    assert past.expires_at == job.expires_at  # it runs now
    quick = spec(schedule={"delay_seconds": 0}, retry={"max_attempts": 1}, timeout_seconds=5)
    once = parts.service.create("t", quick)
    assert once.expires_at == job.created_ms // 1000 + 5 + parts.settings.run_ttl_seconds
    parts.now += (runs_end - job.created_ms // 1000) * 1000
    parts.now += (parts.settings.run_ttl_seconds + 1) * 1000  # TTL passed, item not yet deleted
    with pytest.raises(NotFound):
        parts.service.get("t", job.id)
    assert parts.service.list("t").items == []


def test_a_run_now_binding_keeps_its_instant_and_the_moment_asked_across_versions() -> None:
    assert run_now_bound(run_now_binding(T0 + 2, T0)) == (T0 + 2, T0)
    # A key bound before 2026-11-29 holds the instant alone: it was the moment asked.
    assert run_now_bound(f"run-now:{T0}") == (T0, T0)
    assert run_now_bound(fingerprint(spec())) is None


def _messages(parts: Parts) -> list[RunMessage]:
    """Every run message queued, whenever it is due."""
    parts.now += 3_600_000
    return [
        parts.queue.auth.open(delivery.body)
        for runtime in Runtime
        for priority in Priority
        for delivery in parts.queue.receive(runtime, priority, 10, 0)
    ]


def _sent(parts: Parts) -> list[tuple[int, int | None]]:
    """(scheduled instant, generation) of every run message queued, whenever it is due."""
    return [(message.scheduled_ms, message.generation) for message in _messages(parts)]


@pytest.mark.parametrize(
    "change", [{"priority": "high"}, {"runtime": "fargate"}, {"jitter_seconds": 5}]
)
def test_given_a_delay_job_re_armed_without_a_new_schedule_then_it_keeps_its_instant(
    change: dict[str, Any],
) -> None:
    # A new queue, jitter or staging re-arms the job, but its delay is not counted again: the
    # run would be another run (another instant, another run id), a second one if the first
    # is in progress (found by an outside audit).
    parts = Parts()
    job = parts.service.create("t", spec(schedule={"delay_seconds": 60}))
    parts.now += 61_000  # its run is due, perhaps running
    updated = parts.service.update("t", job.id, change).job
    assert updated.next_due_ms == job.next_due_ms == T0 + 60_000
    assert set(_sent(parts)) == {(T0 + 60_000, 0), (T0 + 60_000, 1)}


def test_given_a_delay_job_given_a_new_delay_then_it_is_counted_from_the_update() -> None:
    parts = Parts()
    job = parts.service.create("t", spec(schedule={"delay_seconds": 3600}))
    parts.now += 3_000_000
    updated = parts.service.update("t", job.id, {"schedule": {"delay_seconds": 3601}}).job
    assert updated.next_due_ms == T0 + 3_000_000 + 3_601_000


def _replayed_after_a_failed_send(parts: Parts, body: dict[str, Any], wait_ms: int) -> Any:
    """The job of a keyed submission whose send failed (withdrawn), replayed `wait_ms` later."""
    send = parts.queue.send

    def fail(messages: object) -> None:
        raise ConnectionError("SQS unreachable")

    parts.queue.send = fail  # type: ignore[method-assign]
    with pytest.raises(ConnectionError):
        parts.service.create("t", spec(**body), idempotency_key="k1")
    parts.queue.send = send  # type: ignore[method-assign]
    parts.now += wait_ms
    return parts.service.create("t", spec(**body), idempotency_key="k1")


def test_given_a_replay_once_a_withdrawn_job_s_schedule_ended_then_it_runs_on_schedule() -> None:
    # Its only occurrence passed while it was withdrawn: the replay finishes what the first
    # request started, its missed occurrence under the catch-up policy ("latest": it runs),
    # never a run at the replay's own instant (off the schedule, after end_at).
    parts = Parts()
    body = {
        "schedule": {
            "rate_seconds": 60,
            "start_at": "2026-11-21T10:00:37Z",
            "end_at": "2026-11-21T10:00:47Z",
        }
    }
    replayed = _replayed_after_a_failed_send(parts, body, 120_000)
    assert [instant for instant, _ in _sent(parts)] == [T0 + 30_000]
    assert parts.service.get("t", replayed.id).status == JobStatus.COMPLETED  # its runs sent


def test_given_a_replay_of_a_withdrawn_one_off_at_the_epoch_then_it_keeps_its_instant() -> None:
    parts = Parts()
    body = {"schedule": {"at": "1970-01-01T00:00:00Z"}}
    replayed = _replayed_after_a_failed_send(parts, body, 5_000)
    assert replayed.next_due_ms == 0
    assert [instant for instant, _ in _sent(parts)] == [0]


def test_given_a_job_write_that_landed_but_whose_answer_was_lost_then_it_stays_counted() -> None:
    # Found by an outside audit: the write's error released the count while the job stayed
    # stored; the client's retry armed it uncounted, and the tenant went over its quota.
    parts = Parts()
    quotas = Quotas(max_active_recurring_jobs=2)
    with _a_write_landing_then_timing_out(parts), pytest.raises(TimeoutError):
        parts.service.create(
            "t", spec(schedule={"rate_seconds": 60}), idempotency_key="k", quotas=quotas
        )
    retried = parts.service.create(
        "t", spec(schedule={"rate_seconds": 60}), idempotency_key="k", quotas=quotas
    )
    assert parts.service.get("t", retried.id).status == JobStatus.SCHEDULED
    parts.service.create("t", spec(schedule={"rate_seconds": 60}), quotas=quotas)
    with pytest.raises(QuotaExceeded):
        parts.service.create("t", spec(schedule={"rate_seconds": 60}), quotas=quotas)
    assert parts.jobs.recurring_count("t") == 2


def test_after_jobs_count_as_active_recurring_jobs() -> None:
    # Found by an outside audit: `after` jobs were not counted, so under a quota of 1 a rate
    # job fanned out to 100 dependents in two levels: 101 runs an occurrence.
    parts = Parts()
    quotas = Quotas(max_active_recurring_jobs=3)
    upstream = parts.service.create("t", spec(schedule={"rate_seconds": 60}), quotas=quotas)
    after = spec(schedule={"after": {"job_id": upstream.id}})
    first = parts.service.create("t", after, quotas=quotas)
    second = parts.service.create("t", after, quotas=quotas)
    with pytest.raises(QuotaExceeded, match="recurring or `after` jobs"):
        parts.service.create("t", after, quotas=quotas)
    assert parts.jobs.recurring_count("t") == 3

    parts.service.cancel("t", first.id)  # room for one again
    one_off = parts.service.create("t", spec(), quotas=quotas)
    becomes_after = {"schedule": {"after": {"job_id": upstream.id}}}
    parts.service.update("t", one_off.id, becomes_after, quotas=quotas)
    assert parts.jobs.recurring_count("t") == 3
    with pytest.raises(QuotaExceeded):  # a one-off becoming an `after` job takes room too
        parts.service.update(
            "t", parts.service.create("t", spec()).id, becomes_after, quotas=quotas
        )
    parts.service.update("t", second.id, {"schedule": {"delay_seconds": 60}}, quotas=quotas)
    assert parts.jobs.recurring_count("t") == 2  # an `after` job made one-off gives it back


def test_given_a_job_completed_by_its_resume_then_it_expires_like_one_completed_by_a_sweep() -> (
    None
):
    parts = Parts()
    ends = "2026-11-21T10:10:07Z"
    job = parts.service.create("t", spec(schedule={"rate_seconds": 60, "end_at": ends}))
    parts.service.pause("t", job.id)
    parts.now += 20 * 60_000
    resumed = parts.service.resume("t", job.id)
    assert resumed.status == JobStatus.COMPLETED
    # A hot window from then, after its last run's attempts can have ended (3 of 30 s, 2
    # waits of 900 s): its end has passed (a sweep's completion bounds it by end_at).
    attempts = 3 * 30 + 2 * 900
    hot = parts.settings.run_ttl_seconds
    assert resumed.job.expires_at == (T0 + 1_200_000) // 1000 + attempts + hot


def test_given_an_after_job_whose_write_answer_was_lost_then_its_replay_sends_no_run() -> None:
    # (Found by review: the revived `after` job was launched at instant 0, with no upstream.)
    parts = Parts()
    upstream = parts.service.create("t", spec(schedule={"rate_seconds": 60}))
    after = spec(schedule={"after": {"job_id": upstream.id}})
    with _a_write_landing_then_timing_out(parts), pytest.raises(TimeoutError):
        parts.service.create("t", after, idempotency_key="k")
    replayed = parts.service.create("t", after, idempotency_key="k")

    assert parts.service.get("t", replayed.id).status == JobStatus.SCHEDULED
    assert {message.job_id for message in _messages(parts)} == {upstream.id}


@contextlib.contextmanager
def _a_write_landing_then_timing_out(parts: Parts) -> Iterator[None]:
    """The job store's create writes the job, then its answer is lost (a read timeout)."""
    create = parts.jobs.create

    def landed_then_timeout(job: Any) -> None:
        create(job)
        raise TimeoutError("read timeout")

    parts.jobs.create = landed_then_timeout  # type: ignore[method-assign]
    try:
        yield
    finally:
        parts.jobs.create = create  # type: ignore[method-assign]


def test_given_an_after_job_revived_by_a_replay_then_it_is_linked_when_revived() -> None:
    # Withdrawn (its write's answer lost), it was not charged to a run-now asked meanwhile;
    # revived with its first `created_ms`, that run-now's run triggered it (an audit of the
    # fan-out fix, round one).
    parts = Parts()
    upstream = parts.service.create("t", spec(schedule={"rate_seconds": 3600}))
    create = parts.jobs.create

    def lost_answer(job: Any) -> None:
        create(job)
        raise ConnectionError("timed out")

    parts.jobs.create = lost_answer  # type: ignore[method-assign]
    body = spec(schedule={"after": {"job_id": upstream.id}})
    with pytest.raises(ConnectionError):
        parts.service.create("t", body, idempotency_key="k1")
    parts.jobs.create = create  # type: ignore[method-assign]
    (withdrawn,) = [j for j in parts.jobs.list("t", 10, None).items if j.id != upstream.id]
    assert withdrawn.status == JobStatus.CANCELLED
    parts.now += 1_000

    revived = parts.service.create("t", body, idempotency_key="k1")

    assert (revived.id, revived.status) == (withdrawn.id, JobStatus.SCHEDULED)
    assert revived.created_ms == T0
    assert revived.linked_ms == T0 + 1_000
    assert revived.generation_ms == T0 + 1_000  # its chain begins again (the reconciler's)


def test_given_an_upstream_stored_before_the_dependents_mark_then_its_fan_out_is_counted() -> None:
    # A job item written before `deps` reads None ("maybe"): its runs read its dependents, and
    # trigger them, but the charge counted none (an audit of the fan-out fix, round one).
    parts = Parts()
    upstream = parts.service.create("t", spec(schedule={"rate_seconds": 3600}))
    parts.service.create("t", spec(schedule={"after": {"job_id": upstream.id}}))
    marked = parts.jobs.get("t", upstream.id)
    assert marked is not None
    parts.jobs.replace(
        dataclasses.replace(marked, has_dependents=None, version=marked.version + 1),
        expected=marked,
    )

    assert parts.service.fan_out("t", upstream.id) == 1


def test_given_a_page_of_jobs_then_their_last_runs_are_read_several_at_once_in_order() -> None:
    # One after another, a page of 100 jobs waited for 100 round trips (noticed by an outside
    # security audit, round six).
    parts = Parts()
    created = [parts.service.create("t", spec(name=f"job-{i}")) for i in range(20)]
    reads = parts.runs.list
    at_once = 0
    most = 0
    lock = threading.Lock()

    def slow_read(*args: Any) -> Any:
        nonlocal at_once, most
        with lock:
            at_once += 1
            most = max(most, at_once)
        time.sleep(0.02)
        with lock:
            at_once -= 1
        return reads(*args)

    parts.runs.list = slow_read  # type: ignore[method-assign]
    page = parts.service.list("t", 100)

    stored = parts.jobs.list("t", 100, None).items  # newest first
    assert [view.job.id for view in page.items] == [job.id for job in stored]
    assert sorted(job.id for job in stored) == sorted(job.id for job in created)
    assert most > 1


def test_given_a_patch_to_recurring_whose_write_may_have_landed_then_its_count_is_kept() -> None:
    # No answer to the write nor to its read-back (StoreError.unknown): the count it reserved
    # was given back, and a tenant at its quota could make one more (a contract audit, round
    # seven). Kept: one high at worst, which the daily recount lowers.
    parts = Parts()
    quotas = Quotas(max_active_recurring_jobs=1)
    job = parts.service.create("t", spec(), quotas=quotas)
    replace = parts.jobs.replace

    def landed_unknown(updated: Any, **kwargs: Any) -> None:
        replace(updated, **kwargs)
        raise StoreError("no answer, nor to the read-back", unknown=True)

    parts.jobs.replace = landed_unknown  # type: ignore[method-assign]
    with pytest.raises(StoreError):
        parts.service.update("t", job.id, {"schedule": {"rate_seconds": 60}}, quotas=quotas)
    parts.jobs.replace = replace  # type: ignore[method-assign]

    assert parts.service.get("t", job.id).job.spec.recurring
    assert parts.jobs.recurring_count("t") == 1
    with pytest.raises(QuotaExceeded):
        parts.service.create("t", spec(schedule={"rate_seconds": 60}), quotas=quotas)


def test_given_a_revive_whose_write_may_have_landed_then_its_count_is_kept() -> None:
    # The same for a keyed replay reviving a job its failed send withdrew.
    parts, quotas = Parts(), Quotas(max_active_recurring_jobs=1)
    body = {"schedule": {"rate_seconds": 30}}
    send, replace = parts.queue.send, parts.jobs.replace

    def fail(messages: object) -> None:
        raise ConnectionError("SQS unreachable")

    def landed_unknown(updated: Any, **kwargs: Any) -> None:
        replace(updated, **kwargs)
        raise StoreError("no answer, nor to the read-back", unknown=True)

    parts.queue.send = fail  # type: ignore[method-assign]
    with pytest.raises(ConnectionError):  # withdrawn: its count given back
        parts.service.create("t", spec(**body), idempotency_key="k1", quotas=quotas)
    parts.queue.send = send  # type: ignore[method-assign]
    parts.jobs.replace = landed_unknown  # type: ignore[method-assign]
    with pytest.raises(StoreError):
        parts.service.create("t", spec(**body), idempotency_key="k1", quotas=quotas)
    parts.jobs.replace = replace  # type: ignore[method-assign]

    assert parts.jobs.recurring_count("t") == 1
    with pytest.raises(QuotaExceeded):
        parts.service.create("t", spec(**body), quotas=quotas)


def test_given_a_store_that_gives_no_answer_then_a_failed_create_tries_no_withdrawal() -> None:
    # Each call to a silent table takes the API's three attempts (~9-18 s): the withdrawal
    # after a create whose write got no answer (its write and its read-back) took the request
    # past the API function's 29 s, and API Gateway answered its own 5xx (a contract audit,
    # round seven). The job, if its write landed, stays; a keyed retry answers with it.
    parts = Parts()
    calls: list[str] = []
    create, replace = parts.jobs.create, parts.jobs.replace

    def silent_create(job: Any) -> None:
        calls.append("create")
        create(job)
        raise StoreError("Read timeout on endpoint URL", unknown=True)

    def spied_replace(job: Any, **kwargs: Any) -> None:
        calls.append("replace")
        replace(job, **kwargs)

    parts.jobs.create = silent_create  # type: ignore[method-assign]
    parts.jobs.replace = spied_replace  # type: ignore[method-assign]
    with pytest.raises(StoreError):
        parts.service.create("t", spec(), idempotency_key="k")

    assert calls == ["create"]
    parts.jobs.create = create  # type: ignore[method-assign]
    again = parts.service.create("t", spec(), idempotency_key="k")  # the client's retry
    assert again.status == JobStatus.SCHEDULED
    assert len(parts.jobs.list("t", 10, None).items) == 1


def test_given_a_withdrawal_that_gets_no_answer_then_the_batch_s_others_are_left_as_they_are() -> (
    None
):
    # A batch's jobs were withdrawn one by one against the silent table: a batch of 100 took
    # about 700 s (a contract audit, round seven). The first withdrawal without an answer
    # stops them; a request that failed so itself withdraws none.
    parts = Parts()
    jobs = [parts.service.create("t", spec()) for _ in range(3)]
    prepared = [Prepared(job) for job in jobs]
    tried: list[str] = []

    def silent(job: Any, **_: Any) -> None:
        tried.append(job.id)
        raise StoreError("Read timeout on endpoint URL", unknown=True)

    parts.jobs.replace = silent  # type: ignore[method-assign]
    parts.service.submission.abandon(prepared, ConnectionError("SQS"))
    assert tried == [jobs[0].id]
    parts.service.submission.abandon(prepared, StoreError("silent", unknown=True))
    assert tried == [jobs[0].id]


def test_given_a_first_run_whose_timer_write_gets_no_answer_then_no_withdrawal_is_tried() -> None:
    # The job written, its first run's timer got no answer: withdrawing the job (a write and
    # its read-back to the silent table) took the request past the API function's 29 s (an
    # outside contract audit, round eight). The job stays; a keyed retry arms it.
    parts = Parts()
    put, replace = parts.timers.put, parts.jobs.replace
    tried: list[str] = []

    def silent(timers: Any) -> None:
        raise StoreError("Read timeout on endpoint URL", unknown=True)

    def spied(job: Any, **kwargs: Any) -> None:
        tried.append(job.id)
        replace(job, **kwargs)

    parts.timers.put = silent  # type: ignore[method-assign]
    parts.jobs.replace = spied  # type: ignore[method-assign]
    with pytest.raises(StoreError):
        parts.service.create("t", spec(), idempotency_key="k")
    assert tried == []
    parts.timers.put = put  # type: ignore[method-assign]
    again = parts.service.create("t", spec(), idempotency_key="k")  # the client's retry
    assert again.status == JobStatus.SCHEDULED
    assert parts.timers.count() == 1


def _silent_creates(parts: Parts) -> Any:
    """The jobs store's creates get no answer and are not applied, until the returned undo."""
    create = parts.jobs.create

    def silent(job: Any) -> None:
        raise StoreError("Read timeout on endpoint URL", unknown=True)

    parts.jobs.create = silent  # type: ignore[method-assign]
    return lambda: setattr(parts.jobs, "create", create)


def test_given_keyed_retries_of_a_create_that_got_no_answer_then_the_key_holds_one_count() -> None:
    # Each keyed retry resumed the key and counted the job again, and each write without an
    # answer kept its count: five 500s left a tenant's count at 5 with no job, every recurring
    # create refused 429 until the daily recount, the retry too (an outside contract audit,
    # round eight). The count taken by the key's first request goes on with the key.
    parts, quotas = Parts(), Quotas(max_active_recurring_jobs=1)
    body = {"schedule": {"rate_seconds": 60}}
    answer_again = _silent_creates(parts)
    for _ in range(5):
        with pytest.raises(StoreError):
            parts.service.create("t", spec(**body), idempotency_key="k", quotas=quotas)
    assert parts.jobs.recurring_count("t") == 1
    answer_again()

    job = parts.service.create("t", spec(**body), idempotency_key="k", quotas=quotas)

    assert job.status == JobStatus.SCHEDULED
    assert parts.jobs.recurring_count("t") == 1
    with pytest.raises(QuotaExceeded):
        parts.service.create("t", spec(**body), quotas=quotas)


def test_given_a_keyed_create_refused_by_the_store_then_its_key_and_count_go_back() -> None:
    # A write refused for good (not written, and known so): the count and the key are freed,
    # so a retry with the key counts afresh (and another body with it is no conflict).
    parts, quotas = Parts(), Quotas(max_active_recurring_jobs=1)
    body = {"schedule": {"rate_seconds": 60}}
    create = parts.jobs.create

    def refused(job: Any) -> None:
        raise StoreError("AccessDeniedException", transient=False)

    parts.jobs.create = refused  # type: ignore[method-assign]
    with pytest.raises(StoreError):
        parts.service.create("t", spec(**body), idempotency_key="k", quotas=quotas)
    assert parts.jobs.recurring_count("t") == 0
    parts.jobs.create = create  # type: ignore[method-assign]

    parts.service.create(
        "t", spec(schedule={"rate_seconds": 120}), idempotency_key="k", quotas=quotas
    )
    assert parts.jobs.recurring_count("t") == 1


def test_given_a_batch_whose_keyed_writes_got_no_answer_then_their_retry_is_counted_once() -> None:
    # Their counts were kept, and re-sending the items with their keys (what api.md says to
    # do) counted them again: three 429 items under a quota of 3, with no job.
    parts, quotas = Parts(), Quotas(max_active_recurring_jobs=3)
    batch = BatchSubmitter(parts.service)
    items = [BatchJob(spec(schedule={"rate_seconds": 60}), f"b-{i}") for i in range(3)]
    answer_again = _silent_creates(parts)
    with pytest.raises(StoreError):
        batch.create("t", items, quotas=quotas)
    answer_again()

    results = batch.create("t", items, quotas=quotas)

    assert [type(r).__name__ for r in results] == ["JobView"] * 3
    assert parts.jobs.recurring_count("t") == 3
