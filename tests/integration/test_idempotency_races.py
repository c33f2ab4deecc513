"""Idempotency-Key races between a request and its retries (found by review): two or three
requests with one key, interleaved on the in-memory twins (a retry runs inside the first
request's hung send or write, or on a thread of its own), each ending as a client expects: a
job answered 2xx is never left cancelled, a job every request failed is not left scheduled
with nothing armed, a live recurring job is counted once, and one key names one job or run.
"""

from __future__ import annotations

import contextlib
import threading
from typing import Any

import pytest

from duetime.domain.errors import (
    DomainError,
    IdempotencyConflict,
    IllegalTransition,
    PreconditionFailed,
    QuotaExceeded,
)
from duetime.domain.jobs import JobStatus, parse_job_spec
from duetime.ports import KeyHold
from duetime.services.batch import BatchJob, BatchSubmitter
from duetime.services.idempotency import IDEMPOTENCY_SECONDS, fingerprint
from duetime.services.jobs import JobView
from duetime.settings import Quotas
from tests.integration.test_correctness import failing_send
from tests.integration.test_partitioned_sweep import Twins

NOOP = {"type": "handler", "name": "duetime.noop"}


def run_in_thread(fn: Any) -> tuple[threading.Thread, dict[str, Any]]:
    box: dict[str, Any] = {}

    def target() -> None:
        try:
            box["result"] = fn()
        except BaseException as exc:
            box["error"] = exc

    thread = threading.Thread(target=target)
    thread.start()
    return thread, box


class HungBatch:
    """Request F: a batch of one job with key "k", on a thread, whose write of the job hangs
    until `fail()`, then fails. Meanwhile the store writes the other requests' jobs."""

    def __init__(self, twins: Twins, spec: Any, quotas: Quotas) -> None:
        create = twins.jobs.create  # a keyed item's write: a conditional put
        self._writing, self._go = threading.Event(), threading.Event()

        def hung_write(job: Any) -> None:
            self._writing.set()
            self._go.wait(5)
            raise ConnectionError("PutItem failed")

        twins.jobs.create = hung_write  # type: ignore[method-assign]
        self.thread, self.box = run_in_thread(
            lambda: BatchSubmitter(twins.service).create("t", [BatchJob(spec, "k")], quotas=quotas)
        )
        assert self._writing.wait(5)
        twins.jobs.create = create  # type: ignore[method-assign]
        twins.clock.now += 1_000  # the client's retry comes a second later

    def fail(self) -> None:
        self._go.set()
        self.thread.join(5)


def test_given_a_batch_write_failing_while_a_retry_sends_then_its_job_lives_counted_once() -> None:
    """F, a batch item with key k: its write of the job hangs, then fails. B, a POST /jobs
    retry with k, is resumed (no job yet): it writes X and sends. F's withdrawal must not
    take B's job for its own (it used to: the same status, generation and version), and the
    tenant's count must be 1."""
    twins = Twins(shards=1)
    spec = parse_job_spec({"schedule": {"rate_seconds": 30}, "target": NOOP})
    quotas = Quotas(max_active_recurring_jobs=10)
    send = twins.queue.send
    first = HungBatch(twins, spec, quotas)

    def b_send(messages: Any) -> None:
        twins.queue.send = send  # type: ignore[method-assign]
        first.fail()  # F's withdrawal lands while B's send is in flight
        send(messages)

    twins.queue.send = b_send  # type: ignore[method-assign]
    answered = twins.service.create("t", spec, idempotency_key="k", quotas=quotas)
    assert isinstance(first.box.get("error"), ConnectionError)
    stored = twins.jobs.get("t", answered.id)
    assert stored.status == JobStatus.SCHEDULED
    assert twins.jobs.recurring_count("t") == 1, twins.jobs.recurring_count("t")


def test_given_a_batch_item_withdrawn_and_not_revived_then_it_is_answered_as_stored() -> None:
    """As above, with B a batch item too, and another recurring job taking the slot F freed
    before B marks its key: B's revival is over the quota. The batch must answer the item as
    it is stored, not as it was written."""
    twins = Twins(shards=1)
    spec = parse_job_spec({"schedule": {"rate_seconds": 30}, "target": NOOP})
    other = parse_job_spec({"schedule": {"rate_seconds": 900}, "target": NOOP})
    quotas = Quotas(max_active_recurring_jobs=2)
    send = twins.queue.send
    first = HungBatch(twins, spec, quotas)

    def b_send(messages: Any) -> None:
        twins.queue.send = send  # type: ignore[method-assign]
        first.fail()
        send(messages)
        twins.service.create("t", other, quotas=quotas)  # takes the slot F freed

    twins.queue.send = b_send  # type: ignore[method-assign]
    (result,) = BatchSubmitter(twins.service).create("t", [BatchJob(spec, "k")], quotas=quotas)
    assert isinstance(result, JobView)
    stored = twins.jobs.get("t", result.job.id)
    assert stored.status == result.job.status, (stored.status, result.job.status)


def test_given_a_resumed_batch_item_and_sqs_down_after_its_send_then_the_batch_answers() -> None:
    """As above, with B a batch of [the resumed item k, a fresh unkeyed item], and SQS down
    after B's first send. F's withdrawal used to cancel B's job, B's revival then failed, and
    the batch answered 5xx although its fresh job was written and armed (a retry without keys
    would duplicate it). Now F leaves B's job alone, and the batch answers each item as it is
    stored."""
    twins = Twins(shards=1)
    spec = parse_job_spec({"schedule": {"rate_seconds": 30}, "target": NOOP})
    fresh = parse_job_spec({"schedule": {"delay_seconds": 30}, "target": NOOP})
    quotas = Quotas(max_active_recurring_jobs=10)
    send = twins.queue.send
    first = HungBatch(twins, spec, quotas)
    calls = []

    def b_send(messages: Any) -> None:
        calls.append(1)
        if len(calls) == 1:
            first.fail()
            return send(messages)
        raise ConnectionError("SQS down for the revival")

    twins.queue.send = b_send  # type: ignore[method-assign]
    resumed, new = BatchSubmitter(twins.service).create(
        "t", [BatchJob(spec, "k"), BatchJob(fresh, None)], quotas=quotas
    )
    assert isinstance(resumed, JobView)
    assert isinstance(new, JobView)
    assert resumed.job.status == twins.jobs.get("t", resumed.job.id).status  # type: ignore[union-attr]
    assert resumed.job.status == JobStatus.SCHEDULED  # F's withdrawal no longer takes it
    assert twins.jobs.recurring_count("t") == 1
    assert twins.jobs.get("t", new.job.id).status == JobStatus.SCHEDULED  # type: ignore[union-attr]


def test_given_a_run_now_that_read_its_job_paused_before_a_resume_then_its_key_is_one_run() -> None:
    """R1 reads the job paused, the owner resumes it, R2 (a copy) lands while R1 is refused:
    R2 is told to try again (its key is in use), R1 answers 409, and the client's retry R3 is
    the key's one run (R1 bound its key before its refusal until 2026-11-30; then R1 and R2
    answered one run, which R1 had been refused)."""
    twins = Twins(shards=1)
    spec = parse_job_spec({"schedule": {"rate_seconds": 600}, "target": NOOP})
    job_id = twins.service.create("t", spec).id
    twins.service.pause("t", job_id)
    twins.sent()
    claim = twins.jobs.claim_key

    def claim_with_race(tenant, key, jid, bound, expires, now):
        twins.jobs.claim_key = claim  # type: ignore[method-assign]
        twins.clock.now += 1
        twins.service.resume("t", job_id)  # the owner resumes after R1 read it paused
        twins.clock.now += 1
        recorded = claim(tenant, key, jid, bound, expires, now)
        with pytest.raises(IdempotencyConflict, match="in use by a concurrent request"):
            twins.service.run_now("t", job_id, "rk")  # R2 races R1
        return recorded

    twins.jobs.claim_key = claim_with_race  # type: ignore[method-assign]
    with pytest.raises(IllegalTransition):
        twins.service.run_now("t", job_id, "rk")  # R1, refused: the job was paused
    twins.sent()  # (the resumed schedule's run)
    twins.clock.now += 5_000
    again = twins.service.run_now("t", job_id, "rk")  # R3: the client's retry
    assert twins.service.run_now("t", job_id, "rk") == again  # and its replay
    assert set(twins.sent()) == {(job_id, again)}  # one run for the key


def test_given_a_run_now_refused_by_its_preconditions_then_its_copy_sends_no_run_for_it() -> None:
    """R1 (its If-Match stale) and R2, a copy with the same key, in flight together. R1 bound
    the key before it checked its preconditions: R2, landing between that bind and R1's
    unbind, was taken for R1's replay and sent R1's run (202) while R1 answered 412 (until
    2026-11-30; found by a review). Now a request binds its key only once its preconditions
    hold: R2 is the first request, and R1, refused, answers as R2's replay (one run)."""
    twins = Twins(shards=1)
    spec = parse_job_spec({"schedule": {"rate_seconds": 600}, "target": NOOP})
    job_id = twins.service.create("t", spec).id
    twins.sent()  # (the schedule's first run)
    copies = []

    def stale(job: Any) -> None:
        twins.clock.now += 1
        copies.append(twins.service.run_now("t", job_id, "rk"))  # R2, in R1's window
        raise PreconditionFailed(job_id, {job.version + 1}, job.version)

    first = twins.service.run_now("t", job_id, "rk", check=stale)  # R1
    assert [first] == copies
    assert set(twins.sent()) == {(job_id, first)}  # R2's run, and no run R1 was refused


def test_given_a_replay_that_marked_then_failed_then_a_later_failure_still_withdraws() -> None:
    """F wrote X; replay Y armed it; F's failed send withdrew X just before Y's mark; Y
    revived X and that send failed: Y answers 5xx. Its mark used to stay, so a later retry's
    own failure could not withdraw X: X was left scheduled, counted, with nothing sent."""
    twins = Twins(shards=1)
    spec = parse_job_spec({"schedule": {"delay_seconds": 30}, "target": NOOP})
    first = twins.service.create("t", spec, idempotency_key="k")  # F: written (its send: see Y)
    send = twins.queue.send
    mark = twins.jobs.mark_key

    def f_withdraws_first(tenant: str, key: str, token: str, job_id: str) -> None:
        twins.jobs.mark_key = mark  # type: ignore[method-assign]
        twins.service.submission.withdraw(first, hold=KeyHold(key))  # F's send failed
        mark(tenant, key, token, job_id)
        twins.queue.send = failing_send  # type: ignore[method-assign]  # SQS goes down

    twins.jobs.mark_key = f_withdraws_first  # type: ignore[method-assign]
    with pytest.raises(ConnectionError):
        twins.service.create("t", spec, idempotency_key="k")  # Y
    assert twins.jobs.get("t", first.id).status == JobStatus.CANCELLED
    twins.sent()  # Y's first message came while X was cancelled: dropped
    twins.clock.now += 60_000
    with pytest.raises(ConnectionError):
        twins.service.create("t", spec, idempotency_key="k")  # R3, SQS still down
    twins.queue.send = send  # type: ignore[method-assign]
    stored = twins.jobs.get("t", first.id)
    assert stored.status == JobStatus.CANCELLED, "all requests failed, X left scheduled unsent"


def test_given_a_refused_first_request_then_it_does_not_free_a_key_a_retry_answered_with() -> None:
    """F claims k (job id X) and is refused by the quota; meanwhile retry R, resumed, gets the
    freed slot, writes X and answers 201. F's release of k used to delete the record R
    answered with, so the next retry with k created a second job."""
    twins = Twins(shards=1)
    spec = parse_job_spec({"schedule": {"rate_seconds": 30}, "target": NOOP})
    quotas = Quotas(max_active_recurring_jobs=1)
    blocker = twins.service.create(
        "t", parse_job_spec({"schedule": {"rate_seconds": 60}, "target": NOOP}), quotas=quotas
    )
    reserve = twins.jobs.reserve_recurring
    answers = []

    def refused_then_slot_frees(tenant: str, limit: int, key: Any = None) -> bool | None:
        twins.jobs.reserve_recurring = reserve  # type: ignore[method-assign]
        ok = reserve(tenant, limit, key)  # F: refused (at the limit)
        twins.service.cancel("t", blocker.id)  # a slot frees
        twins.clock.now += 500
        answers.append(twins.service.create("t", spec, idempotency_key="k", quotas=quotas))
        return ok

    twins.jobs.reserve_recurring = refused_then_slot_frees  # type: ignore[method-assign]
    with pytest.raises(DomainError):
        twins.service.create("t", spec, idempotency_key="k", quotas=quotas)
    (r,) = answers
    twins.service.cancel("t", r.id)  # (make room so the next retry is not itself refused)
    twins.clock.now += 500
    again = twins.service.create("t", spec, idempotency_key="k", quotas=quotas)
    assert again.id == r.id, "the same key created two jobs"


def test_given_two_resumed_retries_racing_then_the_one_that_loses_the_write_replays() -> None:
    """F claimed k for job X and died before writing it. Retries A and B both find k bound to X
    and no job (resumed); B writes X first, sends and answers 201. A's conditional write of X
    then fails: A used to answer 500. It now answers with X, as a replay, counted once."""
    twins = Twins(shards=1)
    spec = parse_job_spec({"schedule": {"rate_seconds": 30}, "target": NOOP})
    quotas = Quotas(max_active_recurring_jobs=10)
    now = twins.clock.now // 1000
    twins.jobs.claim_key("t", "k", "X", fingerprint(spec), now + IDEMPOTENCY_SECONDS, now)  # F died
    create = twins.jobs.create
    answers = []

    def b_writes_first(job: Any) -> None:
        twins.jobs.create = create  # type: ignore[method-assign]
        answers.append(twins.service.create("t", spec, idempotency_key="k", quotas=quotas))
        create(job)

    twins.jobs.create = b_writes_first  # type: ignore[method-assign]
    a = twins.service.create("t", spec, idempotency_key="k", quotas=quotas)
    (b,) = answers
    assert a.id == b.id == "X"
    assert twins.jobs.get("t", "X").status == JobStatus.SCHEDULED  # type: ignore[union-attr]
    assert twins.jobs.recurring_count("t") == 1


def test_given_a_batch_write_landing_after_a_retry_answered_then_the_retry_s_job_stays() -> None:
    """F, a batch item with key k: its write of job X lands late (the SDK retried it through a
    DynamoDB brownout), after B, a POST /jobs retry with k, resumed, wrote X, sent it and
    answered 201. F's write was an unconditional BatchWriteItem: it overwrote B's job (another
    first instant, a second message) and counted it again. Now a keyed item's write is
    conditional: F's fails, and F answers the item as it is stored."""
    twins = Twins(shards=1)
    spec = parse_job_spec({"schedule": {"rate_seconds": 30}, "target": NOOP})
    quotas = Quotas(max_active_recurring_jobs=10)
    create, create_many = twins.jobs.create, twins.jobs.create_many
    answers: list[Any] = []
    started: list[bool] = []

    def b_first(write: Any) -> Any:
        def late(jobs: Any) -> None:
            if jobs and not started:  # F's write of X: B comes in before it lands
                started.append(True)
                twins.clock.now += 2_000
                answers.append(twins.service.create("t", spec, idempotency_key="k", quotas=quotas))
                twins.clock.now += 1_000
            write(jobs)

        return late

    twins.jobs.create = b_first(create)  # type: ignore[method-assign]
    twins.jobs.create_many = b_first(create_many)  # type: ignore[method-assign]
    (result,) = BatchSubmitter(twins.service).create("t", [BatchJob(spec, "k")], quotas=quotas)
    (b,) = answers
    assert isinstance(result, JobView)
    assert result.job.id == b.id
    stored = twins.jobs.get("t", b.id)
    assert stored is not None
    assert (stored.created_ms, stored.next_due_ms) == (b.created_ms, b.next_due_ms)
    assert twins.jobs.recurring_count("t") == 1
    # B's occurrences (those within the sweep horizon), none of F's. (F, answering as a replay,
    # sends them again: copies of one run share its id and run once.)
    sent = twins.sent()
    assert {(ms - b.next_due_ms) % 30_000 for _, ms in sent} == {0}, sent


def test_given_a_batch_losing_its_write_to_a_retry_that_then_fails_its_answer_holds() -> None:
    """F, a batch item with key k: its write of X is slow. B, a retry with k, resumed, writes X;
    B's send hangs. F's write then fails its condition, and F answered 201 with X as stored,
    without marking the key: B's send failed, B withdrew X, and the job F answered with was
    cancelled, never run. Now F answers as a replay (it sends X and marks k): X stays."""
    twins = Twins(shards=1)
    spec = parse_job_spec({"schedule": {"delay_seconds": 30}, "target": NOOP})
    create, send = twins.jobs.create, twins.queue.send
    b_wrote, b_fails = threading.Event(), threading.Event()
    b_thread: list[threading.Thread] = []
    box: dict[str, Any] = {}

    def hung_send(messages: Any) -> None:
        if threading.current_thread() is not threading.main_thread():  # B's
            b_wrote.set()  # B wrote X and is sending it
            b_fails.wait(5)
            raise ConnectionError("SQS send failed")
        send(messages)

    def f_writes_late(job: Any) -> None:
        twins.jobs.create = create  # type: ignore[method-assign]
        twins.clock.now += 2_000
        thread, result = run_in_thread(
            lambda: twins.service.create("t", spec, idempotency_key="k")  # B
        )
        b_thread.append(thread)
        box.update(b=result)
        assert b_wrote.wait(5)
        create(job)  # F's write lands: X is there

    twins.queue.send = hung_send  # type: ignore[method-assign]
    twins.jobs.create = f_writes_late  # type: ignore[method-assign]
    (f,) = BatchSubmitter(twins.service).create("t", [BatchJob(spec, "k")])
    b_fails.set()
    b_thread[0].join(5)

    assert isinstance(box["b"].get("error"), ConnectionError)
    assert isinstance(f, JobView)
    assert f.job.status == JobStatus.SCHEDULED
    stored = twins.jobs.get("t", f.job.id)
    assert stored is not None
    assert stored.status == JobStatus.SCHEDULED, stored.cancel_reason  # it was cancelled
    assert [job for job, _ in twins.sent()] == [f.job.id]  # sent, by F


def test_given_a_first_request_refused_at_the_quota_while_a_copy_resumes_then_one_job_per_key() -> (
    None
):
    """Found by an outside audit. A claims key k (job id J) and is refused at the recurring
    quota; meanwhile a slot frees and B, a copy of A, finds A's record without a job and
    writes J in its place. A's refusal then freed the key as B wrote J, so B answered 201 for
    a job the key no longer named, and the next request with k created a second job. B now
    holds the key before it reserves: A's refusal leaves it bound to J."""
    twins = Twins(shards=1)
    quotas = Quotas(max_active_recurring_jobs=1)
    spec = parse_job_spec({"schedule": {"rate_seconds": 60}, "target": NOOP})
    other = twins.service.create("t", spec, quotas=quotas)  # the tenant is at its quota
    now = twins.clock.now
    # A: its key recorded for J, its job not written yet
    job_id = "01KAW3Z6H8D4G7VQ5R2T9XNMBC"
    assert (
        twins.jobs.claim_key("t", "k", job_id, fingerprint(spec), now // 1000 + 86_400, 0) is None
    )
    twins.service.cancel("t", other.id)  # a slot frees
    create = twins.jobs.create

    def create_after_the_refusal(job: Any) -> None:
        twins.service.submission.unbind("t", "k", job_id)  # A, refused, frees its key
        create(job)

    twins.jobs.create = create_after_the_refusal  # type: ignore[method-assign]
    b = twins.service.create("t", spec, idempotency_key="k", quotas=quotas)
    twins.jobs.create = create  # type: ignore[method-assign]

    c = twins.service.create("t", spec, idempotency_key="k", quotas=quotas)  # the client again

    assert b.id == c.id == job_id
    live = [j for j in twins.jobs._jobs.values() if j.status == JobStatus.SCHEDULED]
    assert [j.id for j in live] == [job_id]
    assert twins.jobs.recurring_count("t") == 1


# A review of the key's one count (2026-12-01): a first request failing with an answer after
# its retry resumed the key gave the count back, and the retry's job lived uncounted.


def _hung_first(twins: Twins, start: Any) -> tuple[threading.Event, threading.Thread, dict]:
    """Request F on a thread: its conditional put of the job hangs until released, then fails
    (an answered error: the job known unwritten)."""
    create = twins.jobs.create
    writing, go = threading.Event(), threading.Event()

    def hung_write(job: Any) -> None:
        writing.set()
        go.wait(5)
        raise ConnectionError("PutItem failed")

    twins.jobs.create = hung_write  # type: ignore[method-assign]
    thread, box = run_in_thread(start)
    assert writing.wait(5)
    twins.jobs.create = create  # type: ignore[method-assign]
    twins.clock.now += 1_000
    return go, thread, box


def _b_writes_after_f_fails(twins: Twins, go: threading.Event, thread: threading.Thread) -> None:
    """B (the retry, resumed: it marked the key) reaches its own write; F fails and withdraws
    first, then B's write lands."""
    create = twins.jobs.create

    def b_create(job: Any) -> None:
        twins.jobs.create = create  # type: ignore[method-assign]
        go.set()
        thread.join(5)  # F's failure and withdrawal land before B's write
        create(job)

    twins.jobs.create = b_create  # type: ignore[method-assign]


def test_a_resumed_retry_whose_first_request_failed_first_keeps_its_job_counted() -> None:
    twins = Twins(shards=1)
    spec = parse_job_spec({"schedule": {"rate_seconds": 30}, "target": NOOP})
    quotas = Quotas(max_active_recurring_jobs=10)
    go, thread, box = _hung_first(
        twins, lambda: twins.service.create("t", spec, idempotency_key="k", quotas=quotas)
    )
    _b_writes_after_f_fails(twins, go, thread)

    answered = twins.service.create("t", spec, idempotency_key="k", quotas=quotas)  # B

    assert isinstance(box.get("error"), ConnectionError)  # F answered 5xx
    assert twins.jobs.get("t", answered.id).status == JobStatus.SCHEDULED
    # One live recurring job: counted once (it was 0: F gave back the count B carried on).
    assert twins.jobs.recurring_count("t") == 1


def test_a_batch_item_variant_keeps_the_resumed_job_counted() -> None:
    twins = Twins(shards=1)
    spec = parse_job_spec({"schedule": {"rate_seconds": 30}, "target": NOOP})
    quotas = Quotas(max_active_recurring_jobs=10)
    go, thread, box = _hung_first(
        twins,
        lambda: BatchSubmitter(twins.service).create("t", [BatchJob(spec, "k")], quotas=quotas),
    )
    _b_writes_after_f_fails(twins, go, thread)

    answered = twins.service.create("t", spec, idempotency_key="k", quotas=quotas)  # B

    assert isinstance(box.get("error"), ConnectionError)
    assert twins.jobs.get("t", answered.id).status == JobStatus.SCHEDULED
    assert twins.jobs.recurring_count("t") == 1


def test_so_a_tenant_gets_one_recurring_job_over_its_quota() -> None:
    """The consequence: at max_active_recurring_jobs=2, after the race the tenant can create
    two more live recurring jobs (three in all): the quota's 429 never comes."""
    twins = Twins(shards=1)
    spec = parse_job_spec({"schedule": {"rate_seconds": 30}, "target": NOOP})
    other = parse_job_spec({"schedule": {"rate_seconds": 60}, "target": NOOP})
    quotas = Quotas(max_active_recurring_jobs=2)
    go, thread, _ = _hung_first(
        twins, lambda: twins.service.create("t", spec, idempotency_key="k", quotas=quotas)
    )
    _b_writes_after_f_fails(twins, go, thread)
    twins.service.create("t", spec, idempotency_key="k", quotas=quotas)

    for _ in range(2):
        with contextlib.suppress(QuotaExceeded):
            twins.service.create("t", other, quotas=quotas)
    live = [j for j in twins.jobs._jobs.values() if j.status == JobStatus.SCHEDULED]
    assert len(live) <= 2, f"{len(live)} live recurring jobs at a quota of 2"


# The same at the first request's refusal at its link (its upstream's dependents full): it gave
# the count back after its retry had resumed the key (a second review, 2026-12-01).
def test_a_first_request_refused_at_its_link_after_its_retry_resumed_keeps_the_count() -> None:
    twins = Twins(shards=1)
    quotas = Quotas(max_active_recurring_jobs=10)
    upstream = twins.service.create(
        "t", parse_job_spec({"schedule": {"rate_seconds": 60}, "target": NOOP}), quotas=quotas
    ).id
    spec = parse_job_spec({"schedule": {"after": {"job_id": upstream}}, "target": NOOP})
    deps = twins.service.submission._deps
    link = deps.link
    linking, go = threading.Event(), threading.Event()

    def first_link(job: Any) -> None:
        # F's conditional add of the dependent found the upstream full; before F goes on, one
        # of its dependents is cancelled and the client's retry B (same key) links and writes.
        deps.link = link  # B links as usual
        linking.set()
        go.wait(5)
        raise QuotaExceeded("job already has 1000 jobs that run after it", 60, field="schedule")

    deps.link = first_link  # type: ignore[method-assign]
    thread, box = run_in_thread(
        lambda: twins.service.create("t", spec, idempotency_key="k", quotas=quotas)
    )
    assert linking.wait(5)
    twins.clock.now += 1_000
    retry = twins.service.create("t", spec, idempotency_key="k", quotas=quotas)  # B: resumed
    go.set()
    thread.join(5)

    assert isinstance(box.get("error"), QuotaExceeded)  # F answered 429
    assert twins.jobs.get("t", retry.id).status == JobStatus.SCHEDULED  # B answered 201
    live = [j for j in twins.jobs._jobs.values() if j.status == JobStatus.SCHEDULED]
    assert len(live) == 2  # the upstream and B's `after` job, both counted
    assert twins.jobs.recurring_count("t") == 2
