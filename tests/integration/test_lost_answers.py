"""Writes under the SDK's own retries: DynamoDB may have applied a write whose answer was lost
(a 500, a reset connection), and botocore sends it again (found by an outside concurrency
audit, 2026-11-30).

- The count of a tenant's active recurring jobs: an `ADD` sent twice counted a create twice (a
  429 below the quota) or a cancel twice (a tenant over it). The counter is written as a
  one-item transaction: DynamoDB applies a request carrying a `ClientRequestToken` it has seen
  within 10 minutes only once, and botocore keeps the token across its retries. moto does not
  keep tokens, so these tests answer a repeated token as DynamoDB documents it.
- An idempotency key's claim: the resent conditional put failed on the record its own first
  attempt wrote, and the request took itself for an earlier one (a refused request then left
  its key bound). The record carries its claim's token, and a claim knows its own."""

from __future__ import annotations

import json
import threading
from dataclasses import replace
from typing import Any

import pytest
from botocore.exceptions import ClientError, ReadTimeoutError

from duetime.adapters.dynamodb.jobs import RECURRING_COUNTER, DynamoJobStore
from duetime.adapters.dynamodb.runs import DynamoRunStore
from duetime.adapters.dynamodb.timers import DynamoTimerStore
from duetime.domain.jobs import Job, JobStatus
from duetime.domain.runs import ClaimOutcome, RunStatus
from duetime.ports import StoreError
from tests.conftest import Aws
from tests.integration.test_contracts import make_claim, make_job

TENANT = "tenant-a"


class LostAnswers:
    """The first attempt of each write of `operations` reaches DynamoDB and is applied; its
    answer is lost, so botocore sends it again. A repeated `ClientRequestToken` of a
    transaction that was applied is answered as DynamoDB does: success, nothing applied again
    (sent to moto as a condition check that always holds)."""

    def __init__(
        self, client: Any, operations: tuple[str, ...] = ("UpdateItem", "TransactWriteItems")
    ) -> None:
        self.resent = 0
        self._applied: set[str] = set()
        self._local = threading.local()
        for operation in operations:
            client.meta.events.register_first(f"before-send.dynamodb.{operation}", self._send)
            client.meta.events.register_first(f"needs-retry.dynamodb.{operation}", self._retry)

    def _send(self, request: Any, **_: Any) -> None:
        body = json.loads(request.body or b"{}")
        self._local.token = body.get("ClientRequestToken")
        if self._local.token in self._applied:  # applied once: now a check that changes nothing
            check = {
                "TableName": body["TransactItems"][0]["Update"]["TableName"],
                "Key": body["TransactItems"][0]["Update"]["Key"],
                "ConditionExpression": "attribute_exists(#k) OR attribute_not_exists(#k)",
                "ExpressionAttributeNames": {"#k": "id"},
            }
            request.body = json.dumps({"TransactItems": [{"ConditionCheck": check}]}).encode()
            request.headers["Content-Length"] = str(len(request.body))

    def _retry(self, attempts: int, response: Any, **_: Any) -> float | None:
        if attempts != 1 or response is None or response[0].status_code != 200:
            return None
        if self._local.token:
            self._applied.add(self._local.token)
        self.resent += 1
        return 0  # sent again at once, as after a 500 whose write had landed


def counter(aws: Aws) -> int:
    item = aws.dynamodb.get_item(
        TableName=aws.settings.jobs_table,
        Key={"tenant": {"S": TENANT}, "id": {"S": RECURRING_COUNTER}},
        ConsistentRead=True,
    ).get("Item", {})
    return int(item.get("active", {}).get("N", "0"))


def test_a_reservation_whose_answer_was_lost_counts_once(aws: Aws) -> None:
    store = DynamoJobStore(aws.dynamodb, aws.settings.jobs_table)
    lost = LostAnswers(aws.dynamodb)

    assert store.reserve_recurring(TENANT, 2) is True

    assert lost.resent == 1
    assert counter(aws) == 1
    assert store.reserve_recurring(TENANT, 2) is True  # the quota's second job is let in
    assert counter(aws) == 2


def test_a_release_whose_answer_was_lost_counts_once(aws: Aws) -> None:
    store = DynamoJobStore(aws.dynamodb, aws.settings.jobs_table)
    for _ in range(2):
        store.reserve_recurring(TENANT, 2)
    lost = LostAnswers(aws.dynamodb)

    store.release_recurring(TENANT)

    assert lost.resent == 1
    assert counter(aws) == 1
    assert store.reserve_recurring(TENANT, 2) is True
    assert store.reserve_recurring(TENANT, 2) is False  # one over the quota is refused


def test_the_quota_still_refuses_and_releases_stop_at_zero(aws: Aws) -> None:
    store = DynamoJobStore(aws.dynamodb, aws.settings.jobs_table)
    assert [store.reserve_recurring(TENANT, 1) for _ in range(2)] == [True, False]
    for _ in range(3):
        store.release_recurring(TENANT)
    assert counter(aws) == 0


def test_a_key_claim_whose_answer_was_lost_is_still_its_own(aws: Aws) -> None:
    store = DynamoJobStore(aws.dynamodb, aws.settings.jobs_table)
    lost = LostAnswers(aws.dynamodb, ("PutItem",))

    claimed = store.claim_key(TENANT, "k-1", "01JOB", "print-1", 2_000_000_000, 1_000_000_000)

    assert lost.resent == 1
    assert claimed is None  # won: not a record of an earlier request
    # the record stands for later requests, which find it
    again = store.claim_key(TENANT, "k-1", "01OTHER", "print-2", 2_000_000_000, 1_000_000_000)
    assert again == ("01JOB", "print-1")


def applied_then_failed(client: Any, marker: str) -> dict[str, int]:
    """The next PutItem whose item holds `marker` is applied by DynamoDB, and its answer is a
    500 (DynamoDB documents that a 500 may have been applied; the SDK's retries spent)."""
    state = {"hits": 0}
    put_item = client.put_item

    def applied_then_500(**params: Any) -> Any:
        answer = put_item(**params)
        if state["hits"] or marker not in json.dumps(params):
            return answer
        state["hits"] += 1
        error = {"Error": {"Code": "InternalServerError", "Message": "injected"}}
        raise ClientError(error, "PutItem")  # type: ignore[arg-type]

    client.put_item = applied_then_500
    return state


def stored_job(aws: Aws, entropy: int) -> tuple[Any, DynamoJobStore, Job, Job]:
    """A client of its own, a store on it, a recurring job stored, and that job cancelled."""
    client = aws.session.client("dynamodb")
    store = DynamoJobStore(client, aws.settings.jobs_table)
    job = make_job(entropy=entropy, recurring=True)
    store.create(job)
    return client, store, job, replace(job, status=JobStatus.CANCELLED, version=job.version + 1)


def test_a_job_write_applied_whose_answer_failed_is_known_as_written(aws: Aws) -> None:
    # A cancel whose write was applied but answered 500 left its quota slot counted: the
    # retried cancel found the job cancelled and released nothing (found by an outside audit).
    client, store, job, cancelled = stored_job(aws, 1)
    failed = applied_then_failed(client, '"cancelled"')

    store.replace(cancelled, expected=job)  # answered as written, not a StoreError

    assert failed["hits"] == 1
    stored = store.get(job.tenant, job.id)
    assert stored is not None
    assert stored.status == JobStatus.CANCELLED


def test_a_job_write_that_failed_unapplied_is_a_store_error(aws: Aws) -> None:
    client, store, job, cancelled = stored_job(aws, 2)
    answer = {"Error": {"Code": "InternalServerError", "Message": "down"}}

    def refused(**_: Any) -> Any:
        raise ClientError(answer, "PutItem")  # type: ignore[arg-type]

    client.put_item = refused
    with pytest.raises(StoreError):
        store.replace(cancelled, expected=job)
    stored = store.get(job.tenant, job.id)
    assert stored is not None
    assert stored.status == JobStatus.SCHEDULED


def test_a_claim_applied_whose_answer_failed_is_still_claimed(aws: Aws) -> None:
    # The claim's put landed, and every answer of the SDK's tries failed: the attempt was
    # taken for abandoned by the next delivery, the target never called (with one attempt,
    # `failed` in the DLQ; found by an outside audit). The stored lease is this claim's.
    client = aws.session.client("dynamodb")
    store = DynamoRunStore(client, aws.settings.runs_table)
    failed = applied_then_failed(client, '"running"')

    outcome, run = store.claim(make_claim())

    assert failed["hits"] == 1
    assert outcome == ClaimOutcome.CLAIMED
    assert run is not None
    assert run.status == RunStatus.RUNNING
    again, _ = store.claim(make_claim("msg-1", receive_count=2))  # another delivery's
    assert again == ClaimOutcome.BUSY


@pytest.mark.parametrize("applied", [True, False])
def test_a_job_write_that_got_no_answer_is_unknown_without_a_read_back(
    aws: Aws, applied: bool
) -> None:
    # No answer to any of the SDK's tries: written or not is unknown, and its caller must keep
    # the count it changed (a contract audit, round seven: a revive applied so gave its count
    # back, and a tenant at its quota had one more recurring job). It is not read back: the
    # read would wait as long again on a silent table, and an API request outlasted its
    # function's 29 s (a contract audit, round eight). One answered with an error is read
    # back (test_a_job_write_applied_whose_answer_failed_is_known_as_written).
    client, store, job, cancelled = stored_job(aws, 3 + applied)
    put_item = client.put_item
    reads: list[str] = []

    def silent(**params: Any) -> Any:
        if applied:
            put_item(**params)
        raise ReadTimeoutError(endpoint_url="https://dynamodb")

    client.put_item = silent
    client.get_item = lambda **_: reads.append("GetItem")
    with pytest.raises(StoreError) as failed:
        store.replace(cancelled, expected=job)
    assert (failed.value.transient, failed.value.unknown) == (True, True)
    assert reads == []


@pytest.mark.parametrize("applied", [True, False])
def test_a_claim_without_an_answer_whose_check_read_fails_too_is_unknown(
    aws: Aws, applied: bool
) -> None:
    # No answer to the claim nor to its check read: the store cannot tell, and says so with
    # the run as it would be claimed (the worker reads it again while the lease lasts). Until
    # 2026-12-01 it raised, and the next delivery took the claim for abandoned: an attempt
    # spent, the target never called (an outside fault audit, round nine).
    client = aws.session.client("dynamodb")
    store = DynamoRunStore(client, aws.settings.runs_table)
    put_item = client.put_item

    def silent(**params: Any) -> Any:
        if applied:
            put_item(**params)
        raise ReadTimeoutError(endpoint_url="https://dynamodb")

    client.put_item = silent
    client.get_item = lambda **_: (_ for _ in ()).throw(ReadTimeoutError(endpoint_url="x"))

    outcome, run = store.claim(make_claim())

    assert outcome == ClaimOutcome.UNKNOWN
    assert run is not None
    assert (run.status, run.lease, run.attempt) == (RunStatus.RUNNING, make_claim().lease, 1)
    client.get_item = aws.session.client("dynamodb").get_item  # the check answers now
    stored = store.get(run.job_id, run.scheduled_ms)
    assert (stored is not None) is applied


def test_a_claim_without_an_answer_whose_check_finds_another_record_is_an_error(
    aws: Aws,
) -> None:
    # The check read answers: the claim did not land (the record is not ours), a passing
    # error as before; the next delivery claims again.
    client = aws.session.client("dynamodb")
    store = DynamoRunStore(client, aws.settings.runs_table)
    client.put_item = lambda **_: (_ for _ in ()).throw(ReadTimeoutError(endpoint_url="x"))

    with pytest.raises(StoreError) as failed:
        store.claim(make_claim())
    assert failed.value.transient


def test_a_run_whose_claim_and_check_got_no_answer_runs_once_and_succeeds(engine: Any) -> None:
    # The runs table applies the first delivery's claim and answers none of its tries, nor the
    # check read's; then it answers again. The worker reads the claim again (its lease lasts):
    # it is its own, so the target runs now, once; no attempt is taken for abandoned.
    runs_table = engine.aws.settings.runs_table
    client = engine.parts.runs._client
    state = {"on": 0, "calls": 0}

    def silence(request: Any, **_: Any) -> None:
        target = str(request.headers.get("X-Amz-Target", b""), "utf-8", "replace")
        body = request.body.decode() if isinstance(request.body, bytes) else str(request.body)
        if state["on"] and target.endswith((".PutItem", ".GetItem")) and runs_table in body:
            state["calls"] += 1
            raise ReadTimeoutError(endpoint_url="https://dynamodb.us-east-1.amazonaws.com")

    client.meta.events.register_last("before-send", silence)  # after moto applied it
    claim = engine.parts.runs.claim

    def claim_once(run_claim: Any) -> Any:
        try:
            return claim(run_claim)
        finally:
            state["on"] = 0  # the table answers again after this claim and its check

    engine.parts.runs.claim = claim_once
    job = engine.submit(
        {"schedule": {"delay_seconds": 0}, "retry": {"max_attempts": 1}, "timeout_seconds": 30}
    )
    on_failed = engine.submit({"schedule": {"after": {"job_id": job, "on": "failed"}}})
    scheduled = engine.parts.jobs.get("tenant-a", job).next_due_ms
    state["on"] = 1

    engine.drain()
    for _ in range(30):
        engine.advance(10)
        engine.drain()

    run = engine.parts.runs.get(job, scheduled)
    assert state["calls"] >= 2
    assert (run.status, run.attempt) == (RunStatus.SUCCEEDED, 1)
    assert len(engine.recorder.runs_of(job)) == 1
    assert engine.recorder.runs_of(on_failed) == []


@pytest.mark.parametrize("error", ["500", "no answer"])
def test_a_sweeps_lease_acquire_applied_whose_answer_was_lost_is_held(aws: Aws, error: str) -> None:
    # The partition's lease was written under the sweep's owner id, and every answer of the
    # SDK's tries was lost: the sweep gave the partition up, the next sweep found it busy, and
    # the one after took it over as a dead holder's, a stall counted and the minute's runs a
    # minute late (an outside fault audit, round twelve). The lease read back is this sweep's.
    client = aws.session.client("dynamodb")
    store = DynamoTimerStore(client, aws.settings.timers_table, 1)
    update_item = client.update_item
    lost = {"hits": 0}

    def applied_then_lost(**params: Any) -> Any:
        answer = update_item(**params)
        if lost["hits"] or params.get("UpdateExpression") != "SET #o = :o, lease_until = :u":
            return answer
        lost["hits"] += 1
        if error == "500":
            failure = {"Error": {"Code": "InternalServerError", "Message": "injected"}}
            raise ClientError(failure, "UpdateItem")  # type: ignore[arg-type]
        raise ReadTimeoutError(endpoint_url="https://dynamodb.us-east-1.amazonaws.com")

    client.update_item = applied_then_lost
    state = store.acquire(100, 0, "sweep-1", 1_000_000, 120_000)

    assert lost["hits"] == 1
    assert state is not None
    assert state.stalls == 0
    assert store.acquire(100, 0, "sweep-2", 1_000_001, 120_000) is None  # held: busy
    again = store.acquire(100, 0, "sweep-1", 1_000_002, 120_000)  # its own: held again
    assert again is not None
    assert again.stalls == 0
