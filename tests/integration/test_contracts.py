"""Contract tests for the ports: the stores, the queue, the dead-letter queues, the webhook
secrets' store and cipher, and the secrets HTTP deliveries sign with. Those of the sweep
launcher and the target runner are in test_contracts_runners.py.

Every test runs twice through a parametrised fixture: against the in-memory twin
(`duetime.adapters.memory`) and against the AWS adapter on moto. Assertions are on state read
back through the port and, on the AWS side where the layout matters, on the raw items.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from typing import Any, cast

import pytest
from botocore.exceptions import ClientError

from duetime.adapters.dynamodb.jobs import DynamoJobStore
from duetime.adapters.dynamodb.runs import DynamoRunStore
from duetime.adapters.dynamodb.secrets import DynamoSecretStore
from duetime.adapters.dynamodb.timers import DynamoTimerStore
from duetime.adapters.kms import KmsCipher
from duetime.adapters.memory.jobs import MemoryJobStore
from duetime.adapters.memory.queues import MemoryDeadLetters, MemoryQueue
from duetime.adapters.memory.runs import MemoryRunStore
from duetime.adapters.memory.secrets import MemoryCipher, MemorySecretStore
from duetime.adapters.memory.timers import MemoryTimerStore
from duetime.adapters.sqs import SqsJobQueue
from duetime.api.views import webhook_secret_json
from duetime.domain.ids import new_job_id
from duetime.domain.jobs import (
    Catchup,
    CatchupMode,
    Job,
    JobSpec,
    JobStatus,
    Priority,
    RetryPolicy,
    Runtime,
)
from duetime.domain.messages import MessageAuth, RunMessage
from duetime.domain.runs import (
    CLOCK_SKEW_ALLOWANCE_MS,
    Attempt,
    ClaimOutcome,
    Lease,
    Run,
    RunClaim,
    RunOutcome,
    RunStatus,
)
from duetime.domain.schedule import At, Rate
from duetime.domain.signing import SECRET_BYTES, SecretRecord, rotated
from duetime.domain.targets import HandlerTarget
from duetime.domain.timers import PartitionState, StuckTimer, SweepState, Timer, shard_of
from duetime.ports import (
    ConditionFailed,
    CounterRead,
    DeadLetter,
    DeadLetters,
    Delivery,
    JobQueue,
    JobStore,
    KeyCount,
    KeyHold,
    Page,
    RunStore,
    SecretCipher,
    SecretStore,
    SecretsUnavailable,
    SigningSecrets,
    TimerStore,
)
from duetime.services.webhook_secrets import (
    DEFAULT_CACHE_SECONDS,
    DEFAULT_GRACE_SECONDS,
    WebhookSecrets,
)
from duetime.settings import queue_key
from tests.conftest import Aws

BACKENDS = ["memory", "dynamo"]
SHARDS = 4
T0 = 1_800_000_000_000  # 2027-01-15T08:00:00Z, on a minute boundary
MINUTE = T0 // 60_000
TENANT = "tenant-a"
OTHER_TENANT = "tenant-b"


def _moto(request: pytest.FixtureRequest) -> Aws:
    return cast(Aws, request.getfixturevalue("aws"))


# --- fixtures: one per port ----------------------------------------------------------------------


@pytest.fixture(params=[*BACKENDS, "dynamo-partitioned"])
def job_store(request: pytest.FixtureRequest) -> JobStore:
    if request.param == "memory":
        return MemoryJobStore()
    aws = _moto(request)
    # A tenant's jobs spread over 4 partition keys: the same contract.
    partitions = 4 if request.param == "dynamo-partitioned" else 1
    return DynamoJobStore(aws.dynamodb, aws.settings.jobs_table, partitions)


@pytest.fixture(params=BACKENDS)
def timer_store(request: pytest.FixtureRequest) -> TimerStore:
    if request.param == "memory":
        return MemoryTimerStore(shards=SHARDS)
    aws = _moto(request)
    return DynamoTimerStore(aws.dynamodb, aws.settings.timers_table, shards=SHARDS)


@pytest.fixture(params=BACKENDS)
def run_store(request: pytest.FixtureRequest) -> RunStore:
    if request.param == "memory":
        return MemoryRunStore()
    aws = _moto(request)
    return DynamoRunStore(aws.dynamodb, aws.settings.runs_table)


class ManualClock:
    def __init__(self, now_ms: int) -> None:
        self.now_ms = now_ms

    def __call__(self) -> int:
        return self.now_ms


@dataclass
class QueueUnderTest:
    """A JobQueue plus what a test needs to observe it that the port does not offer."""

    queue: JobQueue
    pass_time: Callable[[float], None]
    dead_letters: Callable[[Runtime, Priority], list[tuple[RunMessage, str]]]
    stored: Callable[[], int]  # messages held by the (non-dead-letter) queues, in flight or not


@pytest.fixture(params=BACKENDS)
def job_queue(request: pytest.FixtureRequest) -> QueueUnderTest:
    if request.param == "memory":
        clock = ManualClock(T0)
        memory = MemoryQueue(clock)

        def advance(seconds: float) -> None:
            clock.now_ms += int(seconds * 1000)

        def dead_letters(runtime: Runtime, priority: Priority) -> list[tuple[RunMessage, str]]:
            return list(memory.dead[queue_key(runtime, priority)])

        return QueueUnderTest(memory, advance, dead_letters, memory.depth)
    aws = _moto(request)

    def aws_dead_letters(runtime: Runtime, priority: Priority) -> list[tuple[RunMessage, str]]:
        response = aws.sqs.receive_message(
            QueueUrl=aws.settings.queue(runtime, priority).dlq_url,
            MaxNumberOfMessages=10,
            MessageAttributeNames=["All"],
        )
        return [
            (
                RunMessage.from_json(m["Body"]),
                m["MessageAttributes"]["duetime-reason"]["StringValue"],
            )
            for m in response.get("Messages", [])
        ]

    def stored() -> int:
        counts = [
            "ApproximateNumberOfMessages",
            "ApproximateNumberOfMessagesNotVisible",
            "ApproximateNumberOfMessagesDelayed",
        ]
        total = 0
        for urls in aws.settings.queues.values():
            attributes = aws.sqs.get_queue_attributes(QueueUrl=urls.url, AttributeNames=counts)
            total += sum(int(attributes["Attributes"][name]) for name in counts)
        return total

    queue = SqsJobQueue(aws.sqs, aws.settings.queues, MessageAuth.ephemeral())
    return QueueUnderTest(queue, time.sleep, aws_dead_letters, stored)


@dataclass
class DeadLettersUnderTest:
    """A DeadLetters port plus what a test needs to feed and observe it that the port does not
    offer: `bury` puts a message on a queue's DLQ (queue key, body, reason or None), as a worker
    or the redrive policy does."""

    letters: DeadLetters
    bury: Callable[[str, str, str | None], None]
    pass_time: Callable[[float], None]
    now_ms: Callable[[], int]


@pytest.fixture(params=["memory", "sqs"])
def dead_letters(request: pytest.FixtureRequest) -> DeadLettersUnderTest:
    if request.param == "memory":
        clock = ManualClock(T0)
        memory = MemoryDeadLetters(clock)

        def advance(seconds: float) -> None:
            clock.now_ms += int(seconds * 1000)

        return DeadLettersUnderTest(memory, memory.add, advance, clock)
    aws = _moto(request)

    def bury(queue: str, body: str, reason: str | None) -> None:
        reason_attribute = {"DataType": "String", "StringValue": reason} if reason else None
        aws.sqs.send_message(
            QueueUrl=aws.settings.queues[queue].dlq_url,
            MessageBody=body,
            **({"MessageAttributes": {"duetime-reason": reason_attribute}} if reason else {}),
        )

    queue = SqsJobQueue(aws.sqs, aws.settings.queues, MessageAuth.ephemeral())
    return DeadLettersUnderTest(
        queue.dead_letters(), bury, time.sleep, lambda: time.time_ns() // 1_000_000
    )


@pytest.fixture(params=BACKENDS)
def secret_store(request: pytest.FixtureRequest) -> SecretStore:
    if request.param == "memory":
        return MemorySecretStore()
    aws = _moto(request)
    return DynamoSecretStore(aws.dynamodb, aws.settings.jobs_table)


@pytest.fixture(params=["memory", "kms"])
def secret_cipher(request: pytest.FixtureRequest) -> SecretCipher:
    if request.param == "memory":
        return MemoryCipher()
    aws = _moto(request)
    kms = aws.session.client("kms")
    key_arn = kms.create_key(Description="webhook secrets")["KeyMetadata"]["Arn"]
    return KmsCipher(key_arn, lambda: kms)


# SigningSecrets, what an HTTP delivery signs with, has no twin of its own, and needs none: its
# one implementation, WebhookSecrets, is built on two ports that have theirs, and whoever signs
# in tests does it over the memory pair (tests/unit/test_webhook_signing.py), as the local stack
# does over moto's DynamoDB and KMS; nothing asks for fixed secrets. So its contract runs
# WebhookSecrets over the memory store and cipher, and over DynamoDB and KMS on moto.


@dataclass
class SigningUnderTest:
    """A worker's SigningSecrets, plus the API's view of the same store and cipher: `shown`, the
    secrets GET /webhook-secret shows (current first), `rotate`, POST /webhook-secret/rotate;
    `pass_time` moves the wall clock and the monotonic one together."""

    signing: SigningSecrets
    shown: Callable[[str], tuple[str, ...]]
    rotate: Callable[[str], None]
    pass_time: Callable[[float], None]


@pytest.fixture(params=["memory", "dynamo-kms"])
def signing_secrets(request: pytest.FixtureRequest) -> SigningUnderTest:
    store: SecretStore
    cipher: SecretCipher
    if request.param == "memory":
        store, cipher = MemorySecretStore(), MemoryCipher()
    else:
        aws = _moto(request)
        kms = aws.session.client("kms")
        key_arn = kms.create_key(Description="webhook secrets")["KeyMetadata"]["Arn"]
        store = DynamoSecretStore(aws.dynamodb, aws.settings.jobs_table)
        cipher = KmsCipher(key_arn, lambda: kms)
    clock = ManualClock(T0)

    def process() -> WebhookSecrets:
        return WebhookSecrets(store, cipher, clock=clock, monotonic=lambda: clock.now_ms / 1000)

    api = process()

    def shown(tenant: str) -> tuple[str, ...]:
        view = webhook_secret_json(api.get(tenant), clock())
        return tuple(s for s in (view["secret"], view["previous_secret"]) if s is not None)

    def rotate(tenant: str) -> None:
        api.rotate(tenant)

    def advance(seconds: float) -> None:
        clock.now_ms += int(seconds * 1000)

    return SigningUnderTest(process(), shown, rotate, advance)


# --- builders ------------------------------------------------------------------------------------


def make_job(
    tenant: str = TENANT,
    *,
    created_ms: int = T0,
    entropy: int = 0,
    recurring: bool = False,
) -> Job:
    schedule: At | Rate
    if recurring:
        schedule = Rate(
            seconds=300,
            start_at=datetime(2027, 1, 15, 9, 0, 0, 250_000, tzinfo=UTC),
            end_at=datetime(2027, 2, 1, tzinfo=UTC),
        )
    else:
        schedule = At(datetime(2027, 1, 15, 9, 30, 0, 123_000, tzinfo=UTC))
    spec = JobSpec(
        schedule=schedule,
        target=HandlerTarget("duetime.noop"),
        payload={"report": "daily", "ids": [1, 2, 3], "ratio": 0.5, "nested": {"ok": True}},
        name="nightly report",
        priority=Priority.HIGH,
        runtime=Runtime.FARGATE,
        retry=RetryPolicy(max_attempts=5, backoff_seconds=1.5, max_backoff_seconds=60.0),
        timeout_seconds=120,
        catchup=Catchup(CatchupMode.ALL, 600),
    )
    return Job(
        tenant=tenant,
        id=new_job_id(created_ms, entropy.to_bytes(10, "big")),
        spec=spec,
        status=JobStatus.SCHEDULED,
        created_ms=created_ms,
        updated_ms=created_ms,
        generation=0,
        next_due_ms=T0 + 90 * 60_000,
    )


def job_ids_in_shard(shard: int, count: int) -> list[str]:
    found = [f"job-{i:03d}" for i in range(200) if shard_of(f"job-{i:03d}", SHARDS) == shard]
    return found[:count]


JOB_ID = "01KF0000000000000000000RUN"
SCHEDULED_MS = T0
LEASE_MS = 60_000


def make_claim(
    message_id: str = "msg-1",
    *,
    attempt: int = 1,
    receive_count: int = 1,
    now_ms: int = SCHEDULED_MS + 250,
    scheduled_ms: int = SCHEDULED_MS,
    job_id: str = JOB_ID,
) -> RunClaim:
    return RunClaim(
        tenant=TENANT,
        job_id=job_id,
        scheduled_ms=scheduled_ms,
        attempt=attempt,
        lease=Lease(message_id, receive_count, now_ms + LEASE_MS),
        now_ms=now_ms,
        lateness_ms=now_ms - scheduled_ms,
        expires_at=scheduled_ms // 1000 + 30 * 86_400,
        job_name="nightly report",
        target_type="handler",
        priority="high",
        runtime="fargate",
    )


def claimed(store: RunStore, claim: RunClaim) -> Run:
    outcome, run = store.claim(claim)
    assert outcome == ClaimOutcome.CLAIMED
    assert run is not None
    return run


def retrying_after_attempt_1(store: RunStore) -> Run:
    run = claimed(store, make_claim("msg-1"))
    done = store.finish(run, RunOutcome(RunStatus.RETRYING, SCHEDULED_MS + 1_000, "timeout"))
    assert done is not None
    return done


def dynamo_item_size(item: dict[str, Any]) -> int:
    """An item's size by DynamoDB's rules: attribute names plus values; a number takes about
    one byte per two significant digits plus one, a list or map 3 bytes plus 1 per element."""
    return sum(len(name.encode()) + _value_size(value) for name, value in item.items())


def _value_size(value: dict[str, Any]) -> int:
    ((kind, data),) = value.items()
    if kind == "S":
        return len(data.encode())
    if kind == "N":
        digits = data.lstrip("-").replace(".", "").strip("0")
        return (len(digits) + 1) // 2 + 1
    if kind == "L":
        return 3 + sum(1 + _value_size(v) for v in data)
    if kind == "M":
        return 3 + sum(1 + len(k.encode()) + _value_size(v) for k, v in data.items())
    return 1  # BOOL, NULL


# --- JobStore ------------------------------------------------------------------------------------


@pytest.mark.parametrize("recurring", [False, True], ids=["at", "rate"])
def test_given_a_created_job_when_getting_it_then_it_equals_what_was_stored(
    job_store: JobStore, recurring: bool
) -> None:
    job = replace(make_job(recurring=recurring), expires_at=T0 // 1000 + 86_400)

    job_store.create(job)

    assert job_store.get(TENANT, job.id) == job


def test_given_an_existing_job_when_creating_it_again_then_condition_failed(
    job_store: JobStore,
) -> None:
    job = make_job()
    job_store.create(job)

    with pytest.raises(ConditionFailed):
        job_store.create(replace(job, status=JobStatus.CANCELLED))

    assert job_store.get(TENANT, job.id) == job


def test_given_new_jobs_when_creating_many_then_each_is_stored_as_given(
    job_store: JobStore,
) -> None:
    jobs = [
        make_job(tenant, entropy=n, recurring=n % 2 == 0)
        for n in range(30)
        for tenant in (TENANT, "tenant-b")
    ]

    job_store.create_many(jobs)

    assert [job_store.get(job.tenant, job.id) for job in jobs] == jobs


def test_given_a_job_of_another_tenant_when_getting_its_id_then_none(
    job_store: JobStore,
) -> None:
    job = make_job(OTHER_TENANT)
    job_store.create(job)

    assert job_store.get(TENANT, job.id) is None
    assert job_store.get(TENANT, "01KF00000000000000000NOPE0") is None


def test_given_jobs_of_two_tenants_when_paging_then_each_job_appears_once_newest_first(
    job_store: JobStore,
) -> None:
    mine = [make_job(created_ms=T0 + i * 1_000, entropy=i) for i in range(7)]
    theirs = [make_job(OTHER_TENANT, created_ms=T0 + i * 1_000 + 500, entropy=i) for i in range(3)]
    for job in [*mine, *theirs]:
        job_store.create(job)

    pages = []
    cursor: str | None = None
    while True:
        page = job_store.list(TENANT, 3, cursor)
        assert len(page.items) <= 3
        pages.append(page.items)
        cursor = page.cursor
        if cursor is None:
            break

    seen = [job for items in pages for job in items]
    assert seen == sorted(mine, key=lambda j: j.id, reverse=True)
    assert [j.id for j in pages[0]] == [j.id for j in mine[6:3:-1]]
    assert all(j.tenant == TENANT for j in seen)
    # A page that holds exactly the rest has no cursor.
    assert job_store.list(TENANT, 7, None).cursor is None
    first_cursor = job_store.list(TENANT, 3, None).cursor
    assert job_store.list(TENANT, 4, first_cursor) == Page(mine[3::-1], None)


def test_given_an_idempotency_key_then_the_first_claim_wins_per_tenant(
    job_store: JobStore,
) -> None:
    assert job_store.claim_key(TENANT, "k1", "job-1", "fp-1", T0 // 1000 + 60, T0 // 1000) is None
    assert job_store.claim_key(TENANT, "k1", "job-2", "fp-2", T0 // 1000 + 60, T0 // 1000) == (
        "job-1",
        "fp-1",
    )
    assert (
        job_store.claim_key(OTHER_TENANT, "k1", "job-3", "fp-3", T0 // 1000 + 60, T0 // 1000)
        is None
    )


def test_given_an_expired_key_not_yet_deleted_by_ttl_then_it_is_free(
    job_store: JobStore,
) -> None:
    # DynamoDB's TTL deletes expired items up to days late: a key past its window must not
    # answer a new request as a replay of its old job (or refuse it as a conflict).
    expires = T0 // 1000 + 60
    assert job_store.claim_key(TENANT, "k1", "job-1", "fp-1", expires, T0 // 1000) is None
    assert job_store.claim_key(TENANT, "k1", "job-2", "fp-2", expires + 60, expires - 1) == (
        "job-1",
        "fp-1",
    )
    assert job_store.claim_key(TENANT, "k1", "job-2", "fp-2", expires + 60, expires) is None
    # The new record holds for its own window.
    assert job_store.claim_key(TENANT, "k1", "job-3", "fp-3", expires + 90, expires + 59) == (
        "job-2",
        "fp-2",
    )


def test_given_a_key_written_over_after_it_expired_then_a_late_replay_does_not_mark_it(
    job_store: JobStore,
) -> None:
    # A replay read the old record just before it expired; a new request then took the key
    # for its own job. The replay's mark must not make the new request's key unreleasable.
    expires = T0 // 1000 + 60
    job_store.claim_key(TENANT, "k1", "job-old", "fp-1", expires, T0 // 1000)
    job_store.claim_key(TENANT, "k1", "job-new", "fp-2", expires + 60, expires)
    assert not job_store.mark_key(TENANT, "k1", "token-late", "job-old")  # says so
    job_store.release_key(TENANT, "k1", "job-new")  # the new request was refused
    assert job_store.claim_key(TENANT, "k1", "job-3", "fp-3", expires + 60, expires) is None


def test_given_a_released_key_then_it_is_free_unless_it_names_another_job(
    job_store: JobStore,
) -> None:
    expires = T0 // 1000 + 60
    job_store.claim_key(TENANT, "k1", "job-1", "fp-1", expires, T0 // 1000)
    job_store.release_key(TENANT, "k1", "job-9")  # names another job: kept
    assert job_store.claim_key(TENANT, "k1", "job-2", "fp-2", expires, T0 // 1000) == (
        "job-1",
        "fp-1",
    )
    job_store.release_key(TENANT, "k1", "job-1")
    job_store.release_key(TENANT, "k1", "job-1")  # twice, or never recorded: nothing
    assert job_store.claim_key(TENANT, "k1", "job-2", "fp-2", expires, T0 // 1000) is None
    assert job_store.claim_key(TENANT, "k1", "job-3", "fp-3", expires, T0 // 1000) == (
        "job-2",
        "fp-2",
    )


def test_given_a_key_marked_by_a_replay_then_only_its_holder_may_withdraw_the_job(
    job_store: JobStore,
) -> None:
    job = make_job()
    job_store.create(job)
    job_store.claim_key(TENANT, "k1", job.id, "fp", T0 // 1000 + 60, T0 // 1000)
    withdrawn = replace(job, status=JobStatus.CANCELLED, version=job.version + 1)
    first, replay = KeyHold("k1"), KeyHold("k1", "token-a")

    assert job_store.mark_key(TENANT, "k1", replay.token, job.id)

    with pytest.raises(ConditionFailed):  # the first request: a replay answered with the job
        job_store.replace(withdrawn, expected=job, hold=first)
    with pytest.raises(ConditionFailed):  # an earlier replay, since overtaken
        job_store.replace(withdrawn, expected=job, hold=KeyHold("k1", "token-b"))
    assert job_store.get(TENANT, job.id) == job
    job_store.replace(withdrawn, expected=job, hold=replay)
    assert job_store.get(TENANT, job.id) == withdrawn
    # A marked key is not released; a mark is taken back only by its own token.
    job_store.release_key(TENANT, "k1", job.id)
    job_store.unmark_key(TENANT, "k1", "token-b")
    job_store.release_key(TENANT, "k1", job.id)
    assert job_store.claim_key(TENANT, "k1", "j", "fp", T0 // 1000 + 60, T0 // 1000) == (
        job.id,
        "fp",
    )
    job_store.unmark_key(TENANT, "k1", replay.token)
    job_store.release_key(TENANT, "k1", job.id)
    assert job_store.claim_key(TENANT, "k1", "j", "fp", T0 // 1000 + 60, T0 // 1000) is None
    # A job of the same id written by another request (another creation time) is not the
    # one expected.
    lookalike = replace(withdrawn, created_ms=withdrawn.created_ms + 1)
    with pytest.raises(ConditionFailed):
        job_store.replace(replace(withdrawn, version=9), expected=lookalike)
    # Unmarked (or never recorded) keys hold nothing back; marking one records nothing.
    other = make_job(entropy=1)
    job_store.create(other)
    assert not job_store.mark_key(TENANT, "never-claimed", "token-c", other.id)
    job_store.replace(replace(other, version=2), expected=other, hold=KeyHold("never-claimed"))
    assert (
        job_store.claim_key(TENANT, "never-claimed", "j", "fp", T0 // 1000 + 60, T0 // 1000) is None
    )


def test_given_idempotency_records_then_listing_and_get_never_return_them(
    job_store: JobStore,
) -> None:
    jobs = [make_job(created_ms=T0 + i, entropy=i) for i in range(3)]
    for job in jobs:
        job_store.create(job)
    job_store.claim_key(TENANT, "key", jobs[0].id, "fp", T0 // 1000 + 60, T0 // 1000)
    assert [j.id for j in job_store.list(TENANT, 10, None).items] == [j.id for j in jobs[::-1]]
    assert job_store.get(TENANT, "!idem#key") is None


def test_given_another_tenants_cursor_when_listing_then_only_own_jobs_are_returned(
    job_store: JobStore,
) -> None:
    mine = [make_job(created_ms=T0 + i * 1_000, entropy=i) for i in range(4)]
    theirs = [make_job(OTHER_TENANT, created_ms=T0 + i * 1_000 + 1, entropy=i) for i in range(2)]
    for job in [*mine, *theirs]:
        job_store.create(job)
    foreign_cursor = job_store.list(TENANT, 1, None).cursor
    assert foreign_cursor is not None

    page = job_store.list(OTHER_TENANT, 10, foreign_cursor)

    assert {j.tenant for j in page.items} <= {OTHER_TENANT}
    assert job_store.list(OTHER_TENANT, 10, None).items == sorted(
        theirs, key=lambda j: j.id, reverse=True
    )


def test_given_unchanged_status_and_generation_when_replacing_then_the_job_is_written(
    job_store: JobStore,
) -> None:
    job = make_job(recurring=True)
    job_store.create(job)
    paused = job.transition(JobStatus.PAUSED, T0 + 5_000)

    job_store.replace(paused, expected=job)

    stored = job_store.get(TENANT, job.id)
    assert stored == paused
    assert stored is not None
    assert stored.generation == 1


def test_given_a_changed_status_when_replacing_then_condition_failed(
    job_store: JobStore,
) -> None:
    job = make_job(recurring=True)
    job_store.create(job)
    cancelled = job.transition(JobStatus.CANCELLED, T0 + 1_000)
    job_store.replace(cancelled, expected=job)  # same generation, other status

    with pytest.raises(ConditionFailed):
        job_store.replace(job.transition(JobStatus.PAUSED, T0 + 2_000), expected=job)

    assert job_store.get(TENANT, job.id) == cancelled


def test_given_a_changed_generation_when_replacing_then_condition_failed(
    job_store: JobStore,
) -> None:
    job = make_job(recurring=True)
    job_store.create(job)
    bumped = replace(job, generation=job.generation + 1, updated_ms=T0 + 1_000)
    job_store.replace(bumped, expected=job)  # same status, other generation

    with pytest.raises(ConditionFailed):
        job_store.replace(replace(job, next_due_ms=T0), expected=job)

    assert job_store.get(TENANT, job.id) == bumped


def test_given_no_stored_job_when_replacing_then_condition_failed(job_store: JobStore) -> None:
    job = make_job()

    with pytest.raises(ConditionFailed):
        job_store.replace(job, expected=job)

    assert job_store.get(TENANT, job.id) is None


def test_given_some_missing_keys_when_getting_many_then_only_existing_jobs_are_returned(
    job_store: JobStore,
) -> None:
    first, second = make_job(entropy=1), make_job(entropy=2)
    foreign = make_job(OTHER_TENANT, entropy=3)
    for job in (first, second, foreign):
        job_store.create(job)

    found = job_store.get_many(
        [
            (TENANT, first.id),
            (TENANT, second.id),
            (TENANT, first.id),  # duplicates are tolerated
            (TENANT, "01KF00000000000000000NOPE0"),
            (TENANT, foreign.id),  # right id, wrong tenant
        ]
    )

    assert found == {first.id: first, second.id: second}
    assert job_store.get_many([]) == {}


def test_given_jobs_in_every_status_when_scanning_segments_then_each_active_job_comes_once(
    job_store: JobStore,
) -> None:
    scheduled = [make_job(entropy=n, recurring=n % 2 == 0) for n in range(12)]
    scheduled += [make_job(OTHER_TENANT, entropy=50 + n) for n in range(3)]
    for job in scheduled:
        job_store.create(job)
    paused = replace(make_job(entropy=90, recurring=True), status=JobStatus.PAUSED)
    cancelled = replace(make_job(entropy=91), status=JobStatus.CANCELLED)
    job_store.create(paused)
    job_store.create(cancelled)
    job_store.claim_key(TENANT, "idem-1", scheduled[0].id, "f", T0 // 1000 + 60, T0 // 1000)

    found = [job for segment in range(3) for job in job_store.scan_active(segment, 3)]

    active = [*scheduled, paused]
    assert sorted(found, key=lambda j: j.id) == sorted(active, key=lambda j: j.id)


def test_given_recurring_counters_then_the_scan_reads_them_with_their_changes_beside_the_jobs(
    job_store: JobStore,
) -> None:
    job = make_job(entropy=1, recurring=True)
    job_store.create(job)
    for tenant, reserved in ((TENANT, 2), (OTHER_TENANT, 1), ("tenant-c", 1)):
        for _ in range(reserved):
            assert job_store.reserve_recurring(tenant, 5)
    job_store.release_recurring("tenant-c")
    counters: dict[str, CounterRead] = {}

    found = [j.id for segment in range(3) for j in job_store.scan_active(segment, 3, counters)]

    assert found == [job.id]
    # (count, changes): tenant-c's at zero is read too, the recount may have to raise it
    assert counters == {TENANT: (2, 2), OTHER_TENANT: (1, 1), "tenant-c": (0, 2)}


def test_given_a_counter_changed_and_back_since_it_was_read_then_a_conditional_set_leaves_it(
    job_store: JobStore,
) -> None:
    # Found by an outside audit: a cancel and a create during the recount's scan left the
    # count as read, and the recount then wrote the scan's count of jobs over it.
    for _ in range(2):
        job_store.reserve_recurring(TENANT, 5)
    counters: dict[str, CounterRead] = {}
    list(job_store.scan_active(0, 1, counters))
    job_store.release_recurring(TENANT)
    job_store.reserve_recurring(TENANT, 5)  # 2 again

    job_store.set_recurring_count(TENANT, 3, expected=counters[TENANT])

    assert [job_store.reserve_recurring(TENANT, 3) for _ in range(2)] == [True, False]  # held 2


def test_given_an_idempotency_key_then_one_count_is_taken_for_it(job_store: JobStore) -> None:
    # A keyed request's retries resume its key: the count its first request took goes on with
    # the key, whatever the quota now (an outside contract audit, round eight).
    assert job_store.claim_key(TENANT, "k", "J", "f", 10**10, 0) is None
    assert job_store.reserve_recurring(TENANT, 1, ("k", "J")) is True
    assert job_store.reserve_recurring(TENANT, 1, ("k", "J")) is None  # at the limit too
    assert job_store.reserve_recurring(TENANT, 5, ("k", "J")) is None
    assert job_store.reserve_recurring(TENANT, 1, ("k", "other job")) is False  # counted alone
    assert job_store.reserve_recurring(TENANT, 5, ("k", "other job")) is True  # (no mark)
    job_store.release_recurring(TENANT)
    assert job_store.reserve_recurring(TENANT, 1) is False
    counters: dict[str, CounterRead] = {}
    list(job_store.scan_active(0, 1, counters))
    assert counters[TENANT][0] == 1
    job_store.release_recurring(TENANT)
    assert job_store.release_key(TENANT, "k", "other job") is False  # not its job's key
    assert job_store.release_key(TENANT, "k", "J")  # freed: a later request counts afresh
    assert job_store.claim_key(TENANT, "k", "J2", "f", 10**10, 0) is None
    assert job_store.reserve_recurring(TENANT, 1, ("k", "J2")) is True
    assert job_store.mark_key(TENANT, "k", "token", "J2")
    assert job_store.release_key(TENANT, "k", "J2") is False  # a replay marked it: kept


def test_given_keys_that_carry_a_count_then_the_scan_reads_them(job_store: JobStore) -> None:
    # (The recount counts a key whose job was never written: services.reconcile.)
    assert job_store.claim_key(TENANT, "k", "J", "f", 10**10, 0) is None
    assert job_store.claim_key(TENANT, "other", "J2", "f", 10**10, 0) is None  # not counted
    assert job_store.reserve_recurring(TENANT, 5, ("k", "J")) is True
    keys: list[KeyCount] = []

    for segment in range(3):
        list(job_store.scan_active(segment, 3, None, keys.append))

    assert keys == [(TENANT, "J", 10**10)]


def test_given_a_recurring_quota_when_reserving_then_the_check_and_increment_are_atomic(
    job_store: JobStore,
) -> None:
    reserved = []
    lock = threading.Lock()

    def reserve() -> None:
        ok = job_store.reserve_recurring(TENANT, 5)
        with lock:
            reserved.append(ok)

    threads = [threading.Thread(target=reserve) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()

    assert sorted(reserved) == [False] * 3 + [True] * 5
    assert job_store.reserve_recurring(OTHER_TENANT, 5) is True  # per tenant
    job_store.release_recurring(TENANT)
    assert job_store.reserve_recurring(TENANT, 5) is True
    assert job_store.reserve_recurring(TENANT, 5) is False
    job_store.set_recurring_count(TENANT, 0)
    for _ in range(3):
        job_store.release_recurring(TENANT)  # never below zero
    assert [job_store.reserve_recurring(TENANT, 2) for _ in range(3)] == [True, True, False]
    # The counter is not a job: it is never listed
    assert job_store.list(TENANT, 50, None).items == []


def test_given_a_counter_changed_since_it_was_read_then_a_conditional_set_leaves_it(
    job_store: JobStore,
) -> None:
    job_store.set_recurring_count(TENANT, 3, expected=(0, 0))  # none stored: it holds 0
    job_store.set_recurring_count(TENANT, 1, expected=(2, 1))  # it holds 3: left
    assert [job_store.reserve_recurring(TENANT, 4) for _ in range(2)] == [True, False]
    job_store.set_recurring_count(TENANT, 1, expected=(4, 2))
    assert [job_store.reserve_recurring(TENANT, 3) for _ in range(3)] == [True, True, False]
    job_store.set_recurring_count(OTHER_TENANT, 2, expected=(1, 0))  # none stored: not 1
    assert job_store.reserve_recurring(OTHER_TENANT, 1) is True


# --- TimerStore: timers ---------------------------------------------------------------------------


def test_given_timers_when_reading_due_then_only_earlier_ones_come_back_in_due_order(
    timer_store: TimerStore,
) -> None:
    a, b, c = job_ids_in_shard(1, 3)
    shard = 1
    timers = [
        Timer(TENANT, b, T0 + 30_000),
        Timer(TENANT, a, T0 + 5_000, generation=2),
        Timer(OTHER_TENANT, c, T0 + 30_000),  # same instant: job id breaks the tie
        Timer(TENANT, c, T0 + 45_000),  # exactly at the bound: not due yet
        Timer(TENANT, a, T0 + 59_999),
    ]
    timer_store.put(timers)

    due, more = timer_store.read_due(MINUTE, shard, None, T0 + 45_000, 10)

    assert due == [
        Timer(TENANT, a, T0 + 5_000, generation=2),
        Timer(TENANT, b, T0 + 30_000),
        Timer(OTHER_TENANT, c, T0 + 30_000),
    ]
    assert more is False
    assert [t.sort_key for t in due] == sorted(t.sort_key for t in due)


def test_given_a_partition_when_paging_with_after_key_then_each_timer_comes_back_once(
    timer_store: TimerStore,
) -> None:
    shard = 2
    job_ids = job_ids_in_shard(shard, 5)
    timers = [Timer(TENANT, job_id, T0 + i * 1_000) for i, job_id in enumerate(job_ids)]
    timer_store.put(list(reversed(timers)))

    first, more_after_first = timer_store.read_due(MINUTE, shard, None, T0 + 60_000, 2)
    second, more_after_second = timer_store.read_due(
        MINUTE, shard, first[-1].sort_key, T0 + 60_000, 2
    )
    third, more_after_third = timer_store.read_due(
        MINUTE, shard, second[-1].sort_key, T0 + 60_000, 2
    )

    assert (first, more_after_first) == (timers[0:2], True)
    assert (second, more_after_second) == (timers[2:4], True)
    assert (third, more_after_third) == (timers[4:5], False)
    # A page that ends exactly at the last due timer says nothing more remains.
    assert timer_store.read_due(MINUTE, shard, timers[2].sort_key, T0 + 60_000, 2) == (
        timers[3:5],
        False,
    )
    assert timer_store.read_due(MINUTE, shard, timers[4].sort_key, T0 + 60_000, 2) == ([], False)


def test_given_timers_in_other_minutes_and_shards_when_reading_a_partition_then_they_are_absent(
    timer_store: TimerStore,
) -> None:
    (in_0,) = job_ids_in_shard(0, 1)
    (in_3,) = job_ids_in_shard(3, 1)
    this_minute = Timer(TENANT, in_0, T0 + 10_000)
    next_minute = Timer(TENANT, in_0, T0 + 60_000)
    previous_minute = Timer(TENANT, in_0, T0 - 1)
    other_shard = Timer(TENANT, in_3, T0 + 10_000)
    timer_store.put([this_minute, next_minute, previous_minute, other_shard])
    far = T0 + 10 * 60_000

    assert timer_store.read_due(MINUTE, 0, None, far, 10) == ([this_minute], False)
    assert timer_store.read_due(MINUTE + 1, 0, None, far, 10) == ([next_minute], False)
    assert timer_store.read_due(MINUTE - 1, 0, None, far, 10) == ([previous_minute], False)
    assert timer_store.read_due(MINUTE, 3, None, far, 10) == ([other_shard], False)
    assert timer_store.read_due(MINUTE, 1, None, far, 10) == ([], False)


@pytest.mark.parametrize("timer_store", ["dynamo"], indirect=True)
def test_given_a_timer_when_stored_then_its_item_is_keyed_by_minute_shard_and_due_ms(
    timer_store: TimerStore, request: pytest.FixtureRequest
) -> None:
    aws = _moto(request)
    (job_id,) = job_ids_in_shard(3, 1)
    timer = Timer(TENANT, job_id, T0 + 42_123, generation=4)

    timer_store.put([timer])

    items = aws.dynamodb.scan(TableName=aws.settings.timers_table)["Items"]
    assert items == [
        {
            "pk": {"S": "202701150800#3"},
            "sk": {"S": f"1800000042123#{job_id}#4"},
            "tenant": {"S": TENANT},
            "gen": {"N": "4"},
            "expires_at": {"N": str((T0 + 42_123) // 1000 + 7 * 86_400)},
        }
    ]


def test_given_the_same_timer_put_twice_when_reading_then_it_is_stored_once(
    timer_store: TimerStore,
) -> None:
    (job_id,) = job_ids_in_shard(0, 1)
    timer = Timer(TENANT, job_id, T0 + 1_000)

    timer_store.put([timer])
    timer_store.put([timer, Timer(TENANT, job_id, T0 + 2_000)])
    timer_store.put([timer, timer])

    due, _ = timer_store.read_due(MINUTE, 0, None, T0 + 60_000, 10)
    assert due == [timer, Timer(TENANT, job_id, T0 + 2_000)]


def test_given_timers_of_two_generations_when_put_in_any_order_then_neither_replaces_the_other(
    timer_store: TimerStore,
) -> None:
    # A sweep that read the job before a pause and a resume writes the chain's next timer
    # with the old generation, after the resume wrote the new one at the same instant.
    (job_id,) = job_ids_in_shard(0, 1)
    resumed = Timer(TENANT, job_id, T0 + 1_000, generation=2)
    stale = Timer(TENANT, job_id, T0 + 1_000, generation=1)

    timer_store.put([resumed])
    timer_store.put([stale])

    due, _ = timer_store.read_due(MINUTE, 0, None, T0 + 60_000, 10)
    assert due == [stale, resumed]


def test_given_many_timers_when_put_in_one_call_then_all_are_stored(
    timer_store: TimerStore,
) -> None:
    timers = [Timer(TENANT, f"job-{i:03d}", T0 + i * 100) for i in range(60)]

    timer_store.put(timers)

    found = [
        t
        for shard in range(SHARDS)
        for t in timer_store.read_due(MINUTE, shard, None, T0 + 60_000, 100)[0]
    ]
    assert sorted(found, key=lambda t: t.job_id) == timers


def test_given_a_continuation_timer_when_stored_then_it_is_read_from_its_bucket_with_its_size(
    timer_store: TimerStore,
) -> None:
    (job_id,) = job_ids_in_shard(2, 1)
    # A catch-up continuation: due ten minutes ago, stored in a later bucket.
    late = Timer(TENANT, job_id, T0 - 600_000, 3, bucket_minute=MINUTE, job_bytes=1234)
    timer_store.put([late])

    assert timer_store.read_due(MINUTE - 10, 2, None, T0 + 60_000, 10) == ([], False)
    due, more = timer_store.read_due(MINUTE, 2, None, T0 + 60_000, 10)
    assert (due, more) == ([late], False)
    assert due[0].job_bytes == 1234
    assert due[0].bucket == MINUTE


def test_given_stored_timers_when_finding_by_key_then_only_stored_ones_come_back_with_their_gen(
    timer_store: TimerStore,
) -> None:
    a, b = job_ids_in_shard(0, 2)
    stored = [Timer(TENANT, a, T0 + 1_000, 2), Timer(TENANT, b, T0 + 90_000, 1)]
    timer_store.put(stored)

    found = timer_store.find(
        [
            Timer(TENANT, a, T0 + 1_000, 2),
            Timer(TENANT, a, T0 + 1_000, 1),  # another generation: another timer
            Timer(TENANT, a, T0 + 2_000, 2),
            Timer(TENANT, b, T0 + 90_000, 1),
            Timer(TENANT, b, T0 + 90_000, 1, bucket_minute=MINUTE + 5),  # another bucket
        ]
    )

    assert sorted(found, key=lambda t: t.due_ms) == stored
    assert timer_store.find([]) == []


def test_given_a_timer_in_a_shard_of_another_count_then_only_anywhere_finds_it(
    timer_store: TimerStore,
) -> None:
    # Written while the setting was one more shard; the setting lowered since (recorded).
    ids = (f"job-{i:03d}" for i in range(200))
    job = next(j for j in ids if shard_of(j, SHARDS + 1) != shard_of(j, SHARDS))
    timer = Timer(TENANT, job, T0 + 1_000, 1)
    timer_store.shards = SHARDS + 1
    timer_store.raise_shard_count(SHARDS + 1)
    timer_store.put([timer])
    timer_store.shards = SHARDS

    assert timer_store.find([timer]) == []
    assert timer_store.find([timer], anywhere=True) == [timer]


# --- TimerStore: stuck timers ---------------------------------------------------------------------


def stuck_timer(job_id: str, shard: int, attempts: int, next_attempt: int | None) -> StuckTimer:
    return StuckTimer(
        Timer(TENANT, job_id, T0 + 5_000, 1, job_bytes=700),
        shard,
        attempts,
        f"QueueError: attempt {attempts}",
        T0,
        T0 + attempts,
        next_attempt,
    )


def test_given_parked_timers_when_reading_due_ones_then_only_those_due_and_not_quarantined(
    timer_store: TimerStore,
) -> None:
    a, b, c, d = job_ids_in_shard(1, 4)
    early = stuck_timer(a, 1, 1, T0 + 60_000)
    later = stuck_timer(b, 1, 2, T0 + 120_000)
    out = stuck_timer(c, 1, 8, None)
    for entry in (later, out, early):
        timer_store.park(entry)
    timer_store.park(stuck_timer(a, 3, 1, T0))  # another shard's

    assert timer_store.parked_due(1, T0 + 59_999, 10) == []
    assert timer_store.parked_due(1, T0 + 60_000, 10) == [early]
    assert timer_store.parked_due(1, T0 + 500_000, 10) == [early, later]
    assert timer_store.parked_due(1, T0 + 500_000, 1) == [early]
    assert timer_store.stuck(1) == [out, early, later]  # quarantined first
    assert out.quarantined
    assert (timer_store.quarantined(1, 10), timer_store.quarantined(3, 10)) == (1, 0)
    timer_store.park(stuck_timer(d, 1, 8, None))
    assert (timer_store.quarantined(1, 10), timer_store.quarantined(1, 1)) == (2, 1)


def test_given_a_parked_timer_when_replaced_then_unparked_then_it_is_gone(
    timer_store: TimerStore,
) -> None:
    (a,) = job_ids_in_shard(0, 1)
    first = stuck_timer(a, 0, 1, T0 + 60_000)
    timer_store.park(first)
    second = stuck_timer(a, 0, 2, T0 + 180_000)
    timer_store.park(second, replacing=first)

    assert timer_store.stuck(0) == [second]
    quarantined = stuck_timer(a, 0, 8, None)
    timer_store.park(quarantined, replacing=second)
    assert timer_store.stuck(0) == [quarantined]
    assert timer_store.parked_due(0, T0 + 10**9, 10) == []

    timer_store.unpark(quarantined)
    assert timer_store.stuck(0) == []


def test_given_a_parked_timer_replaced_or_unparked_meanwhile_then_a_replacement_is_refused(
    timer_store: TimerStore,
) -> None:
    # Found by an outside audit: two retries at once each wrote their own entry (a duplicate),
    # and a failed retry finishing after a successful one parked a timer handed over already.
    (a,) = job_ids_in_shard(0, 1)
    first = stuck_timer(a, 0, 1, T0 + 60_000)
    timer_store.park(first)
    timer_store.park(stuck_timer(a, 0, 2, T0 + 180_000), replacing=first)
    with pytest.raises(ConditionFailed):  # the other retry's, reading `first` too
        timer_store.park(stuck_timer(a, 0, 2, T0 + 190_000), replacing=first)
    assert [s.next_attempt_ms for s in timer_store.stuck(0)] == [T0 + 180_000]

    (entry,) = timer_store.stuck(0)
    timer_store.unpark(entry)  # handed over by one retry
    with pytest.raises(ConditionFailed):  # the failure of another, recorded after it
        timer_store.park(stuck_timer(a, 0, 3, None), replacing=entry)
    assert timer_store.stuck(0) == []


# --- TimerStore: sweep state ----------------------------------------------------------------------


def test_given_no_sweep_yet_when_raising_the_horizon_then_it_is_a_max_and_sets_the_cursor_once(
    timer_store: TimerStore,
) -> None:
    assert timer_store.sweep_states([0, 1]) == {}

    assert timer_store.raise_horizon(1, MINUTE) == SweepState(MINUTE, MINUTE)
    assert timer_store.raise_horizon(1, MINUTE - 5) == SweepState(MINUTE, MINUTE)
    assert timer_store.raise_horizon(1, MINUTE + 3) == SweepState(MINUTE, MINUTE + 3)
    assert timer_store.raise_horizon(1, MINUTE + 3) == SweepState(MINUTE, MINUTE + 3)

    # Each shard has its own progress.
    assert timer_store.sweep_states([0, 1]) == {1: SweepState(MINUTE, MINUTE + 3)}
    assert timer_store.raise_horizon(0, MINUTE + 7) == SweepState(MINUTE + 7, MINUTE + 7)
    assert timer_store.sweep_states([0, 1, 2]) == {
        0: SweepState(MINUTE + 7, MINUTE + 7),
        1: SweepState(MINUTE, MINUTE + 3),
    }


def test_given_a_cursor_when_advancing_it_then_only_the_expected_value_is_replaced(
    timer_store: TimerStore,
) -> None:
    timer_store.raise_horizon(2, MINUTE + 2)

    assert timer_store.advance_cursor(2, MINUTE + 2, MINUTE + 3) is True
    assert timer_store.advance_cursor(2, MINUTE + 2, MINUTE + 4) is False  # a stale expectation
    assert timer_store.advance_cursor(2, None, MINUTE + 4) is False

    assert timer_store.sweep_states([2]) == {2: SweepState(MINUTE + 3, MINUTE + 2)}


def test_given_no_cursor_when_advancing_from_none_then_it_is_set_once(
    timer_store: TimerStore,
) -> None:
    assert timer_store.advance_cursor(0, None, MINUTE) is True
    assert timer_store.advance_cursor(0, None, MINUTE + 1) is False
    assert timer_store.sweep_states([0]) == {0: SweepState(MINUTE, None)}

    assert timer_store.raise_horizon(0, MINUTE + 1) == SweepState(MINUTE, MINUTE + 1)


def test_given_a_shard_count_when_raised_then_it_only_grows_and_never_below_the_setting(
    timer_store: TimerStore,
) -> None:
    assert timer_store.shard_count() == SHARDS  # the setting, before anything was recorded

    assert timer_store.raise_shard_count(SHARDS + 3) == SHARDS + 3
    assert timer_store.raise_shard_count(SHARDS + 1) == SHARDS + 3  # lowering: shards stay swept
    assert timer_store.raise_shard_count(1) == SHARDS + 3
    assert timer_store.shard_count() == SHARDS + 3


# --- TimerStore: partition leases -----------------------------------------------------------------


def test_given_a_live_lease_when_another_owner_acquires_then_it_is_refused_until_the_lease_ends(
    timer_store: TimerStore,
) -> None:
    lease = timer_store.acquire(MINUTE, 1, "sweeper-a", T0, 10_000)
    assert lease == PartitionState(MINUTE, 1, owner="sweeper-a", lease_until_ms=T0 + 10_000)

    assert timer_store.acquire(MINUTE, 1, "sweeper-b", T0 + 9_999, 10_000) is None
    assert timer_store.partition_states([(MINUTE, 1)]) == {(MINUTE, 1): lease}

    # Its holder never released it: taking it over counts a stall.
    taken = timer_store.acquire(MINUTE, 1, "sweeper-b", T0 + 10_000, 10_000)
    assert taken == PartitionState(
        MINUTE, 1, owner="sweeper-b", lease_until_ms=T0 + 20_000, stalls=1
    )
    assert timer_store.partition_states([(MINUTE, 1)]) == {(MINUTE, 1): taken}


def test_given_holders_that_die_when_taking_over_then_stalls_count_until_reset(
    timer_store: TimerStore,
) -> None:
    for n, owner in enumerate(["a", "b", "c"]):
        timer_store.acquire(MINUTE, 2, owner, T0 + n * 20_000, 10_000)
    assert timer_store.partition_states([(MINUTE, 2)])[(MINUTE, 2)].stalls == 2

    # A clean release is not a death; a reset (after the cause was parked) clears the count.
    assert timer_store.advance(MINUTE, 2, "c", "0000000000001#x", release=True) is True
    again = timer_store.acquire(MINUTE, 2, "d", T0 + 100_000, 10_000)
    assert again is not None
    assert again.stalls == 2
    assert timer_store.advance(MINUTE, 2, "d", None, stalls=0) is True
    assert timer_store.partition_states([(MINUTE, 2)])[(MINUTE, 2)].stalls == 0


def test_given_our_own_live_lease_when_acquiring_again_then_it_is_extended(
    timer_store: TimerStore,
) -> None:
    timer_store.acquire(MINUTE, 0, "sweeper-a", T0, 10_000)

    again = timer_store.acquire(MINUTE, 0, "sweeper-a", T0 + 5_000, 10_000)

    assert again == PartitionState(MINUTE, 0, owner="sweeper-a", lease_until_ms=T0 + 15_000)
    assert timer_store.acquire(MINUTE, 0, "sweeper-b", T0 + 12_000, 10_000) is None


def test_given_a_lease_when_a_non_owner_advances_then_false_and_nothing_changes(
    timer_store: TimerStore,
) -> None:
    lease = timer_store.acquire(MINUTE, 2, "sweeper-a", T0, 10_000)

    assert timer_store.advance(MINUTE, 2, "sweeper-b", "0000000000001#x", complete=True) is False
    assert timer_store.advance(MINUTE + 1, 2, "sweeper-a", "0000000000001#x") is False  # no lease

    assert timer_store.partition_states([(MINUTE, 2), (MINUTE + 1, 2)]) == {(MINUTE, 2): lease}


def test_given_a_lost_lease_when_the_old_owner_advances_then_false(
    timer_store: TimerStore,
) -> None:
    timer_store.acquire(MINUTE, 2, "sweeper-a", T0, 10_000)
    taken = timer_store.acquire(MINUTE, 2, "sweeper-b", T0 + 10_000, 10_000)

    assert timer_store.advance(MINUTE, 2, "sweeper-a", "1800000001000#x", release=True) is False

    assert timer_store.partition_states([(MINUTE, 2)]) == {(MINUTE, 2): taken}


def test_given_progress_when_released_then_another_owner_acquires_and_resumes_from_the_watermark(
    timer_store: TimerStore,
) -> None:
    timer_store.acquire(MINUTE, 3, "sweeper-a", T0, 10_000)
    assert timer_store.advance(MINUTE, 3, "sweeper-a", "1800000001000#job-a") is True
    assert timer_store.partition_states([(MINUTE, 3)])[(MINUTE, 3)] == PartitionState(
        MINUTE, 3, "1800000001000#job-a", False, "sweeper-a", T0 + 10_000
    )

    assert timer_store.advance(MINUTE, 3, "sweeper-a", "1800000002000#job-b", release=True)
    released = PartitionState(MINUTE, 3, watermark="1800000002000#job-b")
    assert timer_store.partition_states([(MINUTE, 3)]) == {(MINUTE, 3): released}

    taken = timer_store.acquire(MINUTE, 3, "sweeper-b", T0 + 1_000, 10_000)
    assert taken == PartitionState(
        MINUTE, 3, "1800000002000#job-b", False, "sweeper-b", T0 + 11_000
    )


def test_given_no_new_progress_when_advancing_with_no_watermark_then_the_old_one_is_kept(
    timer_store: TimerStore,
) -> None:
    timer_store.acquire(MINUTE, 3, "sweeper-a", T0, 10_000)
    timer_store.advance(MINUTE, 3, "sweeper-a", "1800000001000#job-a")

    assert timer_store.advance(MINUTE, 3, "sweeper-a", None, release=True) is True

    assert timer_store.partition_states([(MINUTE, 3)]) == {
        (MINUTE, 3): PartitionState(MINUTE, 3, watermark="1800000001000#job-a")
    }


def test_given_a_complete_partition_when_acquiring_then_nobody_gets_it(
    timer_store: TimerStore,
) -> None:
    timer_store.acquire(MINUTE, 0, "sweeper-a", T0, 10_000)
    assert timer_store.advance(MINUTE, 0, "sweeper-a", "1800000059000#z", complete=True)
    assert timer_store.acquire(MINUTE, 0, "sweeper-a", T0 + 1_000, 10_000) is None
    assert timer_store.acquire(MINUTE, 0, "sweeper-b", T0 + 60_000, 10_000) is None

    timer_store.acquire(MINUTE, 1, "sweeper-a", T0, 10_000)
    timer_store.advance(MINUTE, 1, "sweeper-a", None, complete=True, release=True)

    assert timer_store.acquire(MINUTE, 1, "sweeper-b", T0 + 1_000, 10_000) is None
    assert timer_store.partition_states([(MINUTE, 0), (MINUTE, 1)]) == {
        (MINUTE, 0): PartitionState(MINUTE, 0, "1800000059000#z", True, "sweeper-a", T0 + 10_000),
        (MINUTE, 1): PartitionState(MINUTE, 1, None, True),
    }


def test_given_some_swept_partitions_when_reading_states_then_never_swept_ones_are_absent(
    timer_store: TimerStore,
) -> None:
    timer_store.acquire(MINUTE, 0, "sweeper-a", T0, 5_000)
    timer_store.acquire(MINUTE + 1, 2, "sweeper-b", T0, 7_000)
    timer_store.advance(MINUTE + 1, 2, "sweeper-b", "1800000061000#j", release=True)
    keys = [(m, s) for m in (MINUTE - 1, MINUTE, MINUTE + 1) for s in range(SHARDS)]

    states = timer_store.partition_states(keys)

    assert states == {
        (MINUTE, 0): PartitionState(MINUTE, 0, owner="sweeper-a", lease_until_ms=T0 + 5_000),
        (MINUTE + 1, 2): PartitionState(MINUTE + 1, 2, watermark="1800000061000#j"),
    }
    assert timer_store.partition_states([]) == {}


def test_given_a_partition_state_and_timers_when_reading_due_then_the_state_is_not_a_timer(
    timer_store: TimerStore,
) -> None:
    job_ids = job_ids_in_shard(1, 2)
    timers = [Timer(TENANT, job_id, T0 + 1_000 * (i + 1)) for i, job_id in enumerate(job_ids)]
    timer_store.put(timers)
    timer_store.acquire(MINUTE, 1, "sweeper-a", T0, 10_000)
    timer_store.advance(MINUTE, 1, "sweeper-a", None)

    assert timer_store.read_due(MINUTE, 1, None, T0 + 60_000, 2) == (timers, False)
    assert timer_store.read_due(MINUTE, 1, None, T0 + 60_000, 10) == (timers, False)


# --- RunStore: the claim rule, one test per branch of decide_claim --------------------------------


def test_given_no_record_when_claiming_then_claimed_with_a_fresh_running_record(
    run_store: RunStore,
) -> None:
    claim = make_claim("msg-1", now_ms=SCHEDULED_MS + 250)

    outcome, run = run_store.claim(claim)

    expected = Run(
        tenant=TENANT,
        job_id=JOB_ID,
        scheduled_ms=SCHEDULED_MS,
        status=RunStatus.RUNNING,
        attempt=1,
        attempts=(Attempt(1, SCHEDULED_MS + 250, 250),),
        lease=Lease("msg-1", 1, SCHEDULED_MS + 250 + LEASE_MS),
        expires_at=claim.expires_at,
        job_name="nightly report",
        target_type="handler",
        priority="high",
        runtime="fargate",
        version=1,
    )
    assert (outcome, run) == (ClaimOutcome.CLAIMED, expected)
    assert run_store.get(JOB_ID, SCHEDULED_MS) == expected


def test_given_a_running_run_with_a_live_lease_when_a_duplicate_arrives_then_busy(
    run_store: RunStore,
) -> None:
    held = claimed(run_store, make_claim("msg-1"))

    outcome, existing = run_store.claim(make_claim("msg-2", now_ms=SCHEDULED_MS + 5_000))
    same_receive = run_store.claim(make_claim("msg-1", now_ms=SCHEDULED_MS + 6_000))

    assert (outcome, existing) == (ClaimOutcome.BUSY, held)
    assert same_receive == (ClaimOutcome.BUSY, held)  # not a redelivery: same receive count
    assert run_store.get(JOB_ID, SCHEDULED_MS) == held


def test_given_a_running_run_when_its_message_is_redelivered_under_a_live_lease_then_busy(
    run_store: RunStore,
) -> None:
    # SQS took the message's visibility back (a failed heartbeat): the holder may be running
    # it still, and the run record's lease says it is.
    held = claimed(run_store, make_claim("msg-1", receive_count=1))
    redelivered = make_claim("msg-1", receive_count=2, now_ms=SCHEDULED_MS + 30_000)

    assert run_store.claim(redelivered) == (ClaimOutcome.BUSY, held)
    assert run_store.get(JOB_ID, SCHEDULED_MS) == held


def test_given_a_running_run_whose_lease_expired_when_claimed_then_it_is_abandoned(
    run_store: RunStore,
) -> None:
    held = claimed(run_store, make_claim("msg-1"))
    assert held.lease is not None
    late = make_claim(
        "msg-1", receive_count=2, now_ms=held.lease.until_ms + CLOCK_SKEW_ALLOWANCE_MS
    )

    # The record is left as it was: the caller records the abandoned attempt as failed.
    assert run_store.claim(late) == (ClaimOutcome.ABANDONED, held)
    assert run_store.get(JOB_ID, SCHEDULED_MS) == held


@pytest.mark.parametrize("status", [RunStatus.SUCCEEDED, RunStatus.FAILED])
def test_given_a_finished_run_when_any_delivery_arrives_then_done(
    run_store: RunStore, status: RunStatus
) -> None:
    run = claimed(run_store, make_claim("msg-1"))
    finished = run_store.finish(run, RunOutcome(status, SCHEDULED_MS + 900, None))
    assert finished is not None

    duplicate = run_store.claim(make_claim("msg-2", now_ms=SCHEDULED_MS + 1_000))
    next_attempt = run_store.claim(make_claim("msg-3", attempt=2, now_ms=SCHEDULED_MS + 900_000))
    redelivered = run_store.claim(make_claim("msg-1", receive_count=2))

    assert duplicate == next_attempt == redelivered == (ClaimOutcome.DONE, finished)
    assert run_store.get(JOB_ID, SCHEDULED_MS) == finished


def test_given_a_retrying_run_when_the_next_attempt_arrives_then_claimed_keeping_history(
    run_store: RunStore,
) -> None:
    retrying = retrying_after_attempt_1(run_store)
    retry = make_claim("msg-2", attempt=2, now_ms=SCHEDULED_MS + 5_000)

    outcome, run = run_store.claim(retry)

    assert outcome == ClaimOutcome.CLAIMED
    assert run is not None
    assert (run.status, run.attempt, run.lease) == (RunStatus.RUNNING, 2, retry.lease)
    assert run.attempts == (
        retrying.attempts[0],
        Attempt(2, SCHEDULED_MS + 5_000, 5_000),
    )
    assert run.attempts[0] == Attempt(1, SCHEDULED_MS + 250, 250, SCHEDULED_MS + 1_000, "timeout")
    assert run_store.get(JOB_ID, SCHEDULED_MS) == run


def test_given_a_retrying_run_when_a_stale_copy_of_the_failed_attempt_arrives_then_done(
    run_store: RunStore,
) -> None:
    retrying = retrying_after_attempt_1(run_store)

    stale = run_store.claim(make_claim("msg-1", attempt=1, receive_count=2))
    other_copy = run_store.claim(make_claim("msg-9", attempt=1, now_ms=SCHEDULED_MS + 99_000))

    assert stale == other_copy == (ClaimOutcome.DONE, retrying)
    assert run_store.get(JOB_ID, SCHEDULED_MS) == retrying


def test_given_a_run_running_attempt_2_when_attempt_1_arrives_then_done(
    run_store: RunStore,
) -> None:
    retrying_after_attempt_1(run_store)
    second = claimed(run_store, make_claim("msg-2", attempt=2, now_ms=SCHEDULED_MS + 5_000))
    assert second.lease is not None

    # Even after attempt 2's lease ran out, a delivery of attempt 1 is a stale duplicate.
    outcome, existing = run_store.claim(
        make_claim("msg-1", attempt=1, receive_count=3, now_ms=second.lease.until_ms + 1)
    )

    assert (outcome, existing) == (ClaimOutcome.DONE, second)
    assert run_store.get(JOB_ID, SCHEDULED_MS) == second


# --- RunStore: finish, reads ----------------------------------------------------------------------


def test_given_a_claimed_run_when_finishing_then_the_outcome_is_stored_and_returned(
    run_store: RunStore,
) -> None:
    run = claimed(run_store, make_claim("msg-1"))
    error = "x" * 1_000

    done = run_store.finish(run, RunOutcome(RunStatus.FAILED, SCHEDULED_MS + 2_000, error))

    assert done is not None
    assert (done.status, done.finished_ms, done.error, done.lease) == (
        RunStatus.FAILED,
        SCHEDULED_MS + 2_000,
        "x" * 300,
        None,
    )
    assert done.started_ms == SCHEDULED_MS + 250
    assert run_store.get(JOB_ID, SCHEDULED_MS) == done


def test_given_an_abandoned_attempt_retried_when_the_old_holder_finishes_then_none(
    run_store: RunStore,
) -> None:
    stale = claimed(run_store, make_claim("msg-1"))
    assert stale.lease is not None
    later = stale.lease.until_ms + CLOCK_SKEW_ALLOWANCE_MS
    # Whoever found it abandoned recorded attempt 1 as failed and sent attempt 2.
    failed = run_store.finish(stale, RunOutcome(RunStatus.RETRYING, later, "worker stopped"))
    assert failed is not None
    retried = claimed(run_store, make_claim("msg-2", attempt=2, now_ms=later + 1_000))

    result = run_store.finish(stale, RunOutcome(RunStatus.SUCCEEDED, SCHEDULED_MS + 70_000))

    assert result is None
    assert run_store.get(JOB_ID, SCHEDULED_MS) == retried
    finished = run_store.finish(retried, RunOutcome(RunStatus.SUCCEEDED, later + 2_000))
    assert finished is not None
    assert run_store.get(JOB_ID, SCHEDULED_MS) == finished


def test_given_a_finished_run_when_finishing_it_again_then_none(run_store: RunStore) -> None:
    run = claimed(run_store, make_claim("msg-1"))
    done = run_store.finish(run, RunOutcome(RunStatus.SUCCEEDED, SCHEDULED_MS + 1_000))

    assert run_store.finish(run, RunOutcome(RunStatus.FAILED, SCHEDULED_MS + 2_000, "x")) is None
    assert run_store.get(JOB_ID, SCHEDULED_MS) == done


def test_given_a_first_attempt_claimed_when_withdrawn_then_its_record_is_gone(
    run_store: RunStore,
) -> None:
    run = claimed(run_store, make_claim("msg-1"))

    assert run_store.withdraw(run, "the job is cancelled") is True

    assert run_store.get(JOB_ID, SCHEDULED_MS) is None
    # The next delivery of the occurrence (a re-arm's) finds no record: it may claim.
    assert claimed(run_store, make_claim("msg-2")).attempt == 1


def test_given_a_retry_claimed_when_withdrawn_then_the_run_ends_failed_without_it(
    run_store: RunStore,
) -> None:
    retrying = retrying_after_attempt_1(run_store)
    run = claimed(run_store, make_claim("msg-2", attempt=2, now_ms=SCHEDULED_MS + 9_000))

    assert run_store.withdraw(run, "the job is paused") is True

    stored = run_store.get(JOB_ID, SCHEDULED_MS)
    assert stored is not None
    assert (stored.status, stored.attempt, stored.lease) == (RunStatus.FAILED, 1, None)
    assert [a.number for a in stored.attempts] == [1]
    assert stored.error == "timeout; not retried: the job is paused"
    assert stored.finished_ms == retrying.finished_ms
    assert stored.started_ms == SCHEDULED_MS + 250
    # Finished: a later delivery of the withdrawn attempt is a duplicate.
    assert run_store.claim(make_claim("msg-2", attempt=2))[0] == ClaimOutcome.DONE


def test_given_a_claim_that_is_no_longer_current_when_withdrawn_then_false_and_kept(
    run_store: RunStore,
) -> None:
    run = claimed(run_store, make_claim("msg-1"))
    done = run_store.finish(run, RunOutcome(RunStatus.SUCCEEDED, SCHEDULED_MS + 1_000))

    assert run_store.withdraw(run, "the job is cancelled") is False

    assert run_store.get(JOB_ID, SCHEDULED_MS) == done


def test_given_a_retry_claim_that_is_no_longer_current_when_withdrawn_then_false_and_kept(
    run_store: RunStore,
) -> None:
    retrying_after_attempt_1(run_store)
    run = claimed(run_store, make_claim("msg-2", attempt=2, now_ms=SCHEDULED_MS + 9_000))
    done = run_store.finish(run, RunOutcome(RunStatus.SUCCEEDED, SCHEDULED_MS + 10_000))

    assert run_store.withdraw(run, "the job is cancelled") is False

    assert run_store.get(JOB_ID, SCHEDULED_MS) == done


@pytest.mark.parametrize("run_store", ["dynamo"], indirect=True)
@pytest.mark.parametrize("attempts", [1, 2, 3, 20])
def test_given_failed_attempts_with_long_errors_when_stored_then_the_item_is_under_one_kb(
    run_store: RunStore, request: pytest.FixtureRequest, attempts: int
) -> None:
    aws = _moto(request)
    for number in range(1, attempts + 1):
        now_ms = SCHEDULED_MS + number * 10_000
        run = claimed(run_store, make_claim(f"msg-{number}", attempt=number, now_ms=now_ms))
        status = RunStatus.FAILED if number == attempts else RunStatus.RETRYING
        error = f"attempt {number}: " + "e" * 1_000  # truncated to MAX_ERROR_CHARS
        assert run_store.finish(run, RunOutcome(status, now_ms + 5_000, error)) is not None

    item = aws.dynamodb.get_item(
        TableName=aws.settings.runs_table,
        Key={"job_id": {"S": JOB_ID}, "scheduled_ms": {"N": str(SCHEDULED_MS)}},
    )["Item"]

    assert dynamo_item_size(item) < 1024
    assert item["expires_at"] == {"N": str(SCHEDULED_MS // 1000 + 30 * 86_400)}


def test_given_runs_of_two_jobs_when_paging_then_each_run_appears_once_newest_first(
    run_store: RunStore,
) -> None:
    scheduled = [SCHEDULED_MS + i * 60_000 for i in range(7)]
    for at in scheduled:
        claimed(run_store, make_claim(f"msg-{at}", scheduled_ms=at, now_ms=at + 10))
    claimed(run_store, make_claim("other", job_id="01KF000000000000000000OTHER"))

    pages = []
    cursor: str | None = None
    while True:
        page = run_store.list(JOB_ID, 3, cursor)
        assert len(page.items) <= 3
        pages.append(page.items)
        cursor = page.cursor
        if cursor is None:
            break

    seen = [run.scheduled_ms for items in pages for run in items]
    assert seen == sorted(scheduled, reverse=True)
    assert [r.scheduled_ms for r in pages[0]] == scheduled[6:3:-1]
    assert all(run.job_id == JOB_ID for items in pages for run in items)
    # A page that holds exactly the rest has no cursor.
    assert run_store.list(JOB_ID, 7, None).cursor is None
    rest = run_store.list(JOB_ID, 4, run_store.list(JOB_ID, 3, None).cursor)
    assert [r.scheduled_ms for r in rest.items] == scheduled[3::-1]
    assert rest.cursor is None
    assert run_store.list("01KF00000000000000000NONE0", 3, None).items == []


def test_given_some_missing_keys_when_getting_many_runs_then_only_existing_ones_are_returned(
    run_store: RunStore,
) -> None:
    first = claimed(run_store, make_claim("a", scheduled_ms=SCHEDULED_MS))
    second = claimed(run_store, make_claim("b", scheduled_ms=SCHEDULED_MS + 60_000))

    found = run_store.get_many(
        [
            (JOB_ID, SCHEDULED_MS),
            (JOB_ID, SCHEDULED_MS + 60_000),
            (JOB_ID, SCHEDULED_MS),
            (JOB_ID, SCHEDULED_MS + 1),
            ("01KF00000000000000000NONE0", SCHEDULED_MS),
        ]
    )

    assert found == {(JOB_ID, SCHEDULED_MS): first, (JOB_ID, SCHEDULED_MS + 60_000): second}
    assert run_store.get(JOB_ID, SCHEDULED_MS + 1) is None


def test_given_eight_concurrent_deliveries_when_claiming_then_exactly_one_wins(
    run_store: RunStore,
) -> None:
    workers = 8
    barrier = threading.Barrier(workers)
    results: dict[str, tuple[ClaimOutcome, Run | None]] = {}
    errors: list[BaseException] = []

    def deliver(message_id: str) -> None:
        try:
            barrier.wait(timeout=10)
            results[message_id] = run_store.claim(make_claim(message_id))
        except BaseException as exc:  # surfaced by the assertion below
            errors.append(exc)

    threads = [threading.Thread(target=deliver, args=(f"msg-{i}",)) for i in range(workers)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=30)

    assert errors == []
    winners = [m for m, (outcome, _) in results.items() if outcome == ClaimOutcome.CLAIMED]
    assert len(winners) == 1
    assert sorted(outcome for outcome, _ in results.values()) == sorted(
        [ClaimOutcome.CLAIMED] + [ClaimOutcome.BUSY] * (workers - 1)
    )
    stored = run_store.get(JOB_ID, SCHEDULED_MS)
    assert stored is not None
    assert stored.lease is not None
    assert stored.lease.message_id == winners[0]
    assert stored.version == 1


# --- JobQueue ------------------------------------------------------------------------------------


def run_message(i: int, runtime: Runtime, priority: Priority) -> RunMessage:
    return RunMessage(
        tenant=f"tenant-{i % 3}",
        job_id=f"job-{i:03d}",
        scheduled_ms=T0 + i * 1_000,
        attempt=1 + i % 2,
        due_ms=T0 + i * 1_000 + 500,
        runtime=runtime,
        priority=priority,
    )


def drain(queue: JobQueue, runtime: Runtime, priority: Priority) -> list[Delivery]:
    received: list[Delivery] = []
    while batch := queue.receive(runtime, priority, 10, 0):
        assert len(batch) <= 10
        received += batch
    return received


def test_given_messages_for_two_queues_when_receiving_then_each_queue_returns_its_own(
    job_queue: QueueUnderTest,
) -> None:
    urgent = [run_message(i, Runtime.LAMBDA, Priority.HIGH) for i in range(15)]
    batch = [run_message(i, Runtime.FARGATE, Priority.LOW) for i in range(15, 25)]
    interleaved = [m for pair in zip(urgent, batch, strict=False) for m in pair] + urgent[10:]

    job_queue.queue.send([(m, 0) for m in interleaved])

    from_urgent = drain(job_queue.queue, Runtime.LAMBDA, Priority.HIGH)
    from_batch = drain(job_queue.queue, Runtime.FARGATE, Priority.LOW)
    assert sorted(RunMessage.from_json(d.body).job_id for d in from_urgent) == [
        m.job_id for m in urgent
    ]
    assert {RunMessage.from_json(d.body) for d in from_urgent} == set(urgent)
    assert {RunMessage.from_json(d.body) for d in from_batch} == set(batch)
    assert len(from_urgent) == 15
    assert len(from_batch) == 10
    assert len({d.queue for d in from_urgent}) == 1
    assert len({d.queue for d in from_batch}) == 1
    assert from_urgent[0].queue != from_batch[0].queue
    assert all(d.receive_count == 1 for d in from_urgent + from_batch)
    assert len({d.message_id for d in from_urgent + from_batch}) == 25
    assert drain(job_queue.queue, Runtime.LAMBDA, Priority.NORMAL) == []

    job_queue.queue.delete([*from_urgent, *from_batch])  # more than one batch, two queues

    assert job_queue.stored() == 0


def test_given_a_delayed_message_when_receiving_then_it_is_hidden_until_the_delay_passed(
    job_queue: QueueUnderTest,
) -> None:
    delayed = run_message(1, Runtime.LAMBDA, Priority.NORMAL)
    now = run_message(2, Runtime.LAMBDA, Priority.NORMAL)

    job_queue.queue.send([(delayed, 1), (now, 0)])

    first = drain(job_queue.queue, Runtime.LAMBDA, Priority.NORMAL)
    assert [RunMessage.from_json(d.body) for d in first] == [now]
    job_queue.pass_time(1.2)
    later = drain(job_queue.queue, Runtime.LAMBDA, Priority.NORMAL)
    assert [RunMessage.from_json(d.body) for d in later] == [delayed]


def test_given_a_received_message_when_made_visible_again_then_its_receive_count_grows(
    job_queue: QueueUnderTest,
) -> None:
    message = run_message(7, Runtime.FARGATE, Priority.HIGH)
    job_queue.queue.send([(message, 0)])
    (first,) = job_queue.queue.receive(Runtime.FARGATE, Priority.HIGH, 10, 0)
    assert job_queue.queue.receive(Runtime.FARGATE, Priority.HIGH, 10, 0) == []  # in flight

    job_queue.queue.change_visibility(first, 0)
    (second,) = job_queue.queue.receive(Runtime.FARGATE, Priority.HIGH, 10, 0)

    assert (first.receive_count, second.receive_count) == (1, 2)
    assert second.message_id == first.message_id
    assert RunMessage.from_json(second.body) == message


def test_given_received_messages_when_one_is_deleted_then_only_the_other_comes_back(
    job_queue: QueueUnderTest,
) -> None:
    kept = run_message(1, Runtime.LAMBDA, Priority.LOW)
    done = run_message(2, Runtime.LAMBDA, Priority.LOW)
    job_queue.queue.send([(kept, 0), (done, 0)])
    deliveries = drain(job_queue.queue, Runtime.LAMBDA, Priority.LOW)
    by_message = {RunMessage.from_json(d.body): d for d in deliveries}
    assert job_queue.stored() == 2

    job_queue.queue.delete([by_message[done]])

    assert job_queue.stored() == 1
    job_queue.queue.change_visibility(by_message[kept], 0)
    again = drain(job_queue.queue, Runtime.LAMBDA, Priority.LOW)
    assert [RunMessage.from_json(d.body) for d in again] == [kept]
    job_queue.queue.delete(again)
    assert job_queue.stored() == 0


def test_given_a_poison_message_when_sent_dead_then_its_dlq_holds_it_with_the_reason(
    job_queue: QueueUnderTest,
) -> None:
    message = run_message(3, Runtime.FARGATE, Priority.NORMAL)

    job_queue.queue.send_dead(message, "target rejected the payload: 400")

    assert job_queue.dead_letters(Runtime.FARGATE, Priority.NORMAL) == [
        (message, "target rejected the payload: 400")
    ]
    assert job_queue.dead_letters(Runtime.LAMBDA, Priority.NORMAL) == []
    assert drain(job_queue.queue, Runtime.FARGATE, Priority.NORMAL) == []


# --- DeadLetters ---------------------------------------------------------------------------------

DLQ = "lambda/normal"


def receive_all(letters: DeadLetters, queue: str) -> list[DeadLetter]:
    received: list[DeadLetter] = []
    while batch := letters.receive(queue, 10, 60):
        assert len(batch) <= 10
        received += batch
    return received


def test_given_letters_on_two_dlqs_when_received_then_each_gives_its_own_with_reason_and_time(
    dead_letters: DeadLettersUnderTest,
) -> None:
    before = dead_letters.now_ms()
    dead_letters.bury("lambda/high", "body-1", "attempt 2 of 2: boom")
    dead_letters.bury("lambda/high", "body-2", None)  # moved by the redrive policy: no reason
    dead_letters.bury("fargate/low", "body-3", "target refused")
    after = dead_letters.now_ms()
    letters = dead_letters.letters

    assert [letters.approximate_count(q) for q in ("lambda/high", "fargate/low", DLQ)] == [2, 1, 0]
    high = receive_all(letters, "lambda/high")
    assert sorted((d.body, d.reason) for d in high) == [
        ("body-1", "attempt 2 of 2: boom"),
        ("body-2", None),
    ]
    assert [d.queue for d in high] == ["lambda/high", "lambda/high"]
    assert [d.receive_count for d in high] == [1, 1]
    assert all(before <= d.sent_ms <= after for d in high)
    assert high[0].message_id != high[1].message_id
    (low,) = receive_all(letters, "fargate/low")
    assert (low.queue, low.body, low.reason) == ("fargate/low", "body-3", "target refused")
    assert receive_all(letters, DLQ) == []


def test_given_received_letters_when_released_then_they_are_visible_again_at_once(
    dead_letters: DeadLettersUnderTest,
) -> None:
    dead_letters.bury(DLQ, "body-1", "boom")
    dead_letters.bury(DLQ, "body-2", "boom")
    letters = dead_letters.letters
    first = receive_all(letters, DLQ)
    assert len(first) == 2
    assert letters.approximate_count(DLQ) == 0  # hidden while held, not gone

    letters.release(first)

    assert letters.approximate_count(DLQ) == 2
    again = receive_all(letters, DLQ)
    assert sorted(d.message_id for d in again) == sorted(d.message_id for d in first)
    assert sorted(d.body for d in again) == ["body-1", "body-2"]
    assert [d.receive_count for d in again] == [2, 2]


def test_given_a_held_letter_when_its_hold_ends_then_it_comes_back_without_a_release(
    dead_letters: DeadLettersUnderTest,
) -> None:
    dead_letters.bury(DLQ, "body", None)
    (held,) = dead_letters.letters.receive(DLQ, 10, 1)

    dead_letters.pass_time(1.2)

    (again,) = dead_letters.letters.receive(DLQ, 10, 60)
    assert (again.message_id, again.body, again.receive_count) == (held.message_id, "body", 2)


def test_given_a_deleted_letter_then_only_the_others_remain(
    dead_letters: DeadLettersUnderTest,
) -> None:
    for i in range(3):
        dead_letters.bury(DLQ, f"body-{i}", None)
    letters = dead_letters.letters
    received = receive_all(letters, DLQ)
    (gone,) = [d for d in received if d.body == "body-1"]

    letters.delete(gone)
    letters.release([d for d in received if d is not gone])

    assert letters.approximate_count(DLQ) == 2
    assert sorted(d.body for d in receive_all(letters, DLQ)) == ["body-0", "body-2"]


def test_given_more_than_ten_letters_when_receiving_then_at_most_ten_a_call_and_each_once(
    dead_letters: DeadLettersUnderTest,
) -> None:
    bodies = [f"body-{i:02d}" for i in range(12)]
    for body in bodies:
        dead_letters.bury(DLQ, body, None)
    letters = dead_letters.letters

    (one,) = letters.receive(DLQ, 1, 60)
    rest: list[DeadLetter] = []
    while batch := letters.receive(DLQ, 50, 60):
        assert len(batch) <= 10
        rest += batch

    assert sorted([one.body, *(d.body for d in rest)]) == bodies


# --- SecretStore ---------------------------------------------------------------------------------


def test_given_no_record_when_the_first_one_is_written_then_it_is_read_back_whole(
    secret_store: SecretStore,
) -> None:
    assert secret_store.get(TENANT) is None
    first = SecretRecord(TENANT, b"\x00\xffciphertext")

    secret_store.put(first)

    assert secret_store.get(TENANT) == first
    assert secret_store.get(OTHER_TENANT) is None


def test_given_rotations_when_written_then_each_version_is_read_back_with_its_previous_secret(
    secret_store: SecretStore,
) -> None:
    first = SecretRecord(TENANT, b"one")
    secret_store.put(first)
    second = rotated(first, b"two", T0, grace_seconds=3600)
    secret_store.put(second)
    assert secret_store.get(TENANT) == second
    assert (second.version, second.previous, second.previous_expires_ms) == (
        2,
        b"one",
        T0 + 3_600_000,
    )

    third = rotated(second, b"three", T0 + 60_000, grace_seconds=3600)
    secret_store.put(third)

    assert secret_store.get(TENANT) == third
    assert (third.version, third.current, third.previous) == (3, b"three", b"two")


def test_given_a_record_when_another_first_write_arrives_then_condition_failed_and_it_stays(
    secret_store: SecretStore,
) -> None:
    first = SecretRecord(TENANT, b"first")
    secret_store.put(first)

    with pytest.raises(ConditionFailed):
        secret_store.put(SecretRecord(TENANT, b"second first"))

    assert secret_store.get(TENANT) == first


def test_given_a_stale_or_skipped_version_when_writing_then_condition_failed(
    secret_store: SecretStore,
) -> None:
    first = SecretRecord(TENANT, b"one")
    secret_store.put(first)
    second = rotated(first, b"two", T0, grace_seconds=3600)
    secret_store.put(second)

    with pytest.raises(ConditionFailed):
        secret_store.put(rotated(first, b"late", T0 + 1, grace_seconds=3600))  # read version 1
    with pytest.raises(ConditionFailed):
        secret_store.put(replace(second, current=b"ahead", version=4))

    assert secret_store.get(TENANT) == second


def test_given_records_of_two_tenants_then_each_has_its_own_versions(
    secret_store: SecretStore,
) -> None:
    mine = SecretRecord(TENANT, b"mine")
    secret_store.put(mine)
    mine_rotated = rotated(mine, b"mine again", T0, grace_seconds=60)
    secret_store.put(mine_rotated)
    theirs = SecretRecord(OTHER_TENANT, b"theirs")

    secret_store.put(theirs)  # a first write, while the other tenant is at version 2

    assert secret_store.get(TENANT) == mine_rotated
    assert secret_store.get(OTHER_TENANT) == theirs


# --- SecretCipher --------------------------------------------------------------------------------


def test_given_generated_keys_when_decrypted_for_their_tenant_then_each_opens_to_its_key(
    secret_cipher: SecretCipher,
) -> None:
    key, ciphertext = secret_cipher.generate(TENANT)
    other_key, other_ciphertext = secret_cipher.generate(TENANT)

    assert len(key) == len(other_key) == SECRET_BYTES
    assert key != other_key
    assert ciphertext != other_ciphertext
    assert key not in ciphertext
    assert secret_cipher.decrypt(TENANT, ciphertext) == key
    assert secret_cipher.decrypt(TENANT, other_ciphertext) == other_key


def test_given_a_ciphertext_when_decrypted_for_another_tenant_or_never_made_then_it_does_not_open(
    secret_cipher: SecretCipher,
) -> None:
    _, ciphertext = secret_cipher.generate(TENANT)

    # The twin refuses with SecretsUnavailable; KMS with its ClientError
    # (InvalidCiphertextException), which duetime.services.webhook_secrets turns into one.
    with pytest.raises((SecretsUnavailable, ClientError)):
        secret_cipher.decrypt(OTHER_TENANT, ciphertext)
    with pytest.raises((SecretsUnavailable, ClientError)):
        secret_cipher.decrypt(TENANT, b"\x01" * 64)


# --- SigningSecrets ------------------------------------------------------------------------------


def test_given_a_tenant_when_its_requests_are_signed_then_with_the_secret_the_api_shows(
    signing_secrets: SigningUnderTest,
) -> None:
    signed = signing_secrets.signing.signing_secrets(TENANT)  # a first delivery makes it

    assert len(signed) == 1
    assert signed[0].startswith("whsec_")
    assert signed == signing_secrets.shown(TENANT)
    others = signing_secrets.signing.signing_secrets(OTHER_TENANT)
    assert others == signing_secrets.shown(OTHER_TENANT)
    assert others != signed


def test_given_a_rotation_then_the_new_and_old_secret_sign_as_shown_until_the_grace_period_ends(
    signing_secrets: SigningUnderTest,
) -> None:
    (old,) = signing_secrets.shown(TENANT)
    signing_secrets.signing.signing_secrets(TENANT)  # a worker signs with it, and keeps it

    signing_secrets.rotate(TENANT)
    signing_secrets.pass_time(DEFAULT_CACHE_SECONDS)  # a worker reuses what it decrypted

    new, previous = signing_secrets.shown(TENANT)
    assert new != old
    assert previous == old
    assert signing_secrets.signing.signing_secrets(TENANT) == (new, old)
    assert signing_secrets.signing.signing_secrets(OTHER_TENANT) == signing_secrets.shown(
        OTHER_TENANT
    )
    signing_secrets.pass_time(DEFAULT_GRACE_SECONDS)
    assert signing_secrets.shown(TENANT) == (new,)
    assert signing_secrets.signing.signing_secrets(TENANT) == (new,)


# --- JobStore: description, tags and the version (issue 14) -----------------------------------


def test_given_a_job_with_description_and_tags_then_it_round_trips(job_store: JobStore) -> None:
    base = make_job()
    spec = replace(base.spec, description="closes the day", tags={"team": "payments", "env": ""})
    job = replace(base, spec=spec, version=4)

    job_store.create(job)

    assert job_store.get(TENANT, job.id) == job


def test_given_a_job_written_since_it_was_read_then_a_replace_from_the_stale_read_fails(
    job_store: JobStore,
) -> None:
    job = make_job()
    job_store.create(job)
    renamed = replace(job, spec=replace(job.spec, name="renamed"), version=2)
    job_store.replace(renamed, expected=job)

    # The same status and generation, but not the version that was read.
    with pytest.raises(ConditionFailed):
        job_store.replace(
            replace(job, spec=replace(job.spec, name="lost"), version=2), expected=job
        )

    assert job_store.get(TENANT, job.id) == renamed


def test_given_a_chain_job_re_armed_since_it_was_read_then_a_replace_depending_on_it_fails(
    job_store: JobStore,
) -> None:
    # A PATCH to a new `after` writes only if the chain it checked for a loop is as read.
    job, upstream = make_job(), make_job(entropy=1)
    job_store.create(job)
    job_store.create(upstream)
    renamed = replace(job, spec=replace(job.spec, name="renamed"), version=2)
    rearmed = replace(upstream, generation=upstream.generation + 1, version=2)
    job_store.replace(rearmed, expected=upstream)

    with pytest.raises(ConditionFailed):
        job_store.replace(renamed, expected=job, unchanged=[upstream])

    assert job_store.get(TENANT, job.id) == job
    job_store.replace(renamed, expected=job, unchanged=[rearmed])  # as read: written
    assert job_store.get(TENANT, job.id) == renamed
