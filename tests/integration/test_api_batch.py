"""Issue 14, item 5 through the API handler on moto: POST /jobs/batch (items answered on their
own, in order; per-item idempotency keys and quotas) and what a batch costs in AWS requests
(botocore event hooks count them).

Every reply is validated against the OpenAPI document (tests/integration/test_api.py)."""

from __future__ import annotations

from collections import Counter
from typing import Any

import pytest

from duetime.clock import wall_ms
from duetime.domain.jobs import Priority, Runtime, parse_job_spec
from duetime.domain.messages import RELEASE_LEAD_MS, RELEASE_MARGIN_MS
from duetime.domain.timeutil import rfc3339_ms
from duetime.ports import QueueError
from duetime.services.idempotency import fingerprint as _fingerprint
from duetime.settings import QuotaEnv
from tests.integration.conftest import Engine, engine  # noqa: F401 - fixture
from tests.integration.test_api import (
    HANDLER_TARGET,
    Api,
    Reply,
    _validator,
    api,  # noqa: F401 - fixture
)
from tests.integration.test_early_wait import visible


def job(**fields: Any) -> dict[str, Any]:
    return {"schedule": {"delay_seconds": 60}, "target": HANDLER_TARGET, **fields}


def batch(api: Api, jobs: list[Any], **kwargs: Any) -> Reply:  # noqa: F811
    reply = api.call("POST", "/jobs/batch", {"jobs": jobs}, **kwargs)
    if reply.status == 200 and all(i["status"] == 201 for i in reply.json["items"]):
        # What the API accepted is valid under the document's request schema.
        _validator("/components/schemas/JobBatchRequest", None).validate({"jobs": jobs})
    return reply


def statuses(reply: Reply) -> list[int]:
    return [item["status"] for item in reply.json["items"]]


def test_items_are_answered_in_order_and_a_bad_one_rejects_no_other(api: Api) -> None:  # noqa: F811
    jobs = [
        job(name="first"),
        job(schedule={"cron": "not a cron"}),
        job(name="third", schedule={"rate_seconds": 60}),
        "not an object",
        job(id="01KAAAAAAAAAAAAAAAAAAAAAAA"),
        job(name="last", priority="high"),
    ]

    reply = batch(api, jobs)

    assert reply.status == 200
    assert statuses(reply) == [201, 400, 201, 400, 400, 201]
    items = reply.json["items"]
    assert [items[i]["job"]["name"] for i in (0, 2, 5)] == ["first", "third", "last"]
    assert [items[i]["error"]["field"] for i in (1, 3, 4)] == ["schedule.cron", "body", "id"]
    assert {i["error"]["code"] for i in (items[1], items[3], items[4])} == {"invalid"}
    stored = {i["id"]["S"] for i in api.job_items()}
    assert stored == {items[i]["job"]["id"] for i in (0, 2, 5)}
    for index in (0, 2, 5):  # each as GET /jobs/{id} shows it
        created = items[index]["job"]
        assert api.call("GET", f"/jobs/{created['id']}").json == created


def test_a_batchs_jobs_list_newest_first_in_the_reverse_of_their_order(api: Api) -> None:  # noqa: F811
    """Jobs created in one millisecond have increasing ids, so `GET /jobs` (newest first)
    lists a batch's last item first (until 2026-12-01 their order was at random; a new user's
    round)."""
    names = [f"line {n}" for n in range(1, 21)]
    reply = batch(api, [job(name=name) for name in names])
    assert statuses(reply) == [201] * 20
    listed = api.call("GET", "/jobs", query={"limit": "100"}).json["items"]
    assert [j["name"] for j in listed] == names[::-1]


@pytest.mark.parametrize(
    "body",
    [{"jobs": []}, {"jobs": [job()] * 101}, {"jobs": job()}, {"jobs": None}, {}],
    ids=["empty", "101", "an object", "null", "missing"],
)
def test_a_jobs_field_that_is_not_a_list_of_1_to_100_is_a_400_naming_jobs(
    api: Api,  # noqa: F811
    body: dict[str, Any],
) -> None:
    reply = api.call("POST", "/jobs/batch", body)
    assert (reply.status, reply.error["field"]) == (400, "jobs")
    assert api.job_items() == []


def test_an_unknown_field_or_a_body_that_is_not_an_object_is_a_400(api: Api) -> None:  # noqa: F811
    assert api.call("POST", "/jobs/batch", {"jobs": [job()], "x": 1}).error["field"] == "x"
    assert api.call("POST", "/jobs/batch", [job()]).error["field"] == "body"
    assert api.job_items() == []


def test_a_misspelt_item_field_is_hinted_with_idempotency_key_among_known_names(
    api: Api,  # noqa: F811
) -> None:
    # A batch item's own field was missing from the hint (HTTP contract, round six).
    reply = batch(api, [job(idempotency_keys="a")])
    assert reply.json["items"][0]["error"] == {
        "code": "invalid",
        "message": "unknown field; did you mean idempotency_key?",
        "field": "idempotency_keys",
    }


def test_a_body_over_256_kib_is_a_413_on_body(api: Api) -> None:  # noqa: F811
    jobs = [job(payload="x" * 60_000) for _ in range(5)]
    reply = api.call("POST", "/jobs/batch", {"jobs": jobs})
    assert (reply.status, reply.error["field"]) == (413, "body")
    assert api.job_items() == []


def test_a_hundred_jobs_are_accepted_and_all_run(api: Api) -> None:  # noqa: F811
    reply = batch(api, [job(schedule={"delay_seconds": 5}, payload={"n": n}) for n in range(100)])

    assert statuses(reply) == [201] * 100
    ids = [item["job"]["id"] for item in reply.json["items"]]
    assert len(set(ids)) == 100
    api.engine.advance(10)
    api.engine.drain()
    assert Counter(c.job_id for c in api.engine.recorder.calls if c.job_id in ids) == dict.fromkeys(
        ids, 1
    )


# --- idempotency keys -------------------------------------------------------------------------


@pytest.mark.parametrize("header", ["Idempotency-Key", "idempotency-key"])
def test_an_idempotency_key_header_on_a_batch_is_a_400_not_ignored(
    api: Api,  # noqa: F811
    header: str,
) -> None:
    # Found by an outside contract audit: the header was ignored, so a batch retried with it
    # made its jobs twice. Each job carries its own `idempotency_key`.
    reply = batch(api, [job()], headers={header: "k-1"})
    assert (reply.status, reply.error["field"]) == (400, "Idempotency-Key"), reply.json
    assert "idempotency_key" in reply.error["message"]
    assert api.job_items() == []


def test_each_item_has_its_own_idempotency_key(api: Api) -> None:  # noqa: F811
    first = batch(api, [job(idempotency_key="a", payload=1), job(idempotency_key="b", payload=2)])
    ids = [item["job"]["id"] for item in first.json["items"]]

    again = batch(
        api,
        [
            job(idempotency_key="b", payload=2),  # a replay: the same job
            job(idempotency_key="a", payload=9),  # the key with another body: a 409 item
            job(idempotency_key="c", payload=3),  # a new one
            job(idempotency_key="c", payload=3),  # the same key twice in a batch: one job
            job(idempotency_key="with space"),  # a malformed key
            job(idempotency_key="c", payload=4),  # the batch's own key with another body
        ],
    )

    items = again.json["items"]
    assert statuses(again) == [201, 409, 201, 201, 400, 409]
    # A conflict names the item's key field (not the header of POST /jobs)
    assert [items[i]["error"]["field"] for i in (1, 5)] == ["idempotency_key"] * 2
    assert items[0]["job"]["id"] == ids[1]
    assert items[1]["error"]["code"] == "idempotency_conflict"
    assert items[2]["job"]["id"] == items[3]["job"]["id"] not in ids
    assert items[4]["error"]["field"] == "idempotency_key"
    assert len(api.job_items()) == 3
    # The keys are those of the Idempotency-Key header of POST /jobs, per tenant.
    header = api.call("POST", "/jobs", job(payload=3), headers={"Idempotency-Key": "c"})
    assert (header.status, header.json["id"]) == (201, items[2]["job"]["id"])
    theirs = batch(api, [job(idempotency_key="a", payload=1)], tenant="tenant-b")
    assert theirs.json["items"][0]["job"]["id"] not in ids


def test_an_item_refused_binds_its_key_for_no_later_item(api: Api) -> None:  # noqa: F811
    # Found by review: the key was recorded for the batch before the item was checked, so an
    # item refused by a later check (here the lambda runtime's timeout) made a later item
    # with its key a 409, though a refused request binds nothing.
    answer = batch(
        api,
        [
            job(idempotency_key="p", timeout_seconds=841),
            job(idempotency_key="p", payload=2),
        ],
    )

    assert statuses(answer) == [400, 201]
    assert answer.json["items"][0]["error"]["field"] == "timeout_seconds"


# --- quotas -----------------------------------------------------------------------------------


def test_each_job_spends_a_submission_token_and_those_beyond_are_429_items(api: Api) -> None:  # noqa: F811
    api.configure(**{QuotaEnv.SUBMISSIONS_PER_SECOND: "0.01", QuotaEnv.SUBMISSION_BURST: "3"})

    reply = batch(api, [job(payload=n) for n in range(5)])

    assert statuses(reply) == [201, 201, 201, 429, 429]
    refused = reply.json["items"][3]
    assert refused["error"]["code"] == "quota_exceeded"
    assert 1 <= refused["retry_after_seconds"] <= 100
    assert len(api.job_items()) == 3
    assert api.call("POST", "/jobs", job()).status == 429  # the same bucket as POST /jobs


def test_recurring_jobs_beyond_the_quota_are_429_items(api: Api) -> None:  # noqa: F811
    api.configure(**{QuotaEnv.MAX_ACTIVE_RECURRING_JOBS: "2", QuotaEnv.MIN_RATE_SECONDS: "10"})
    recurring = job(schedule={"rate_seconds": 60})

    reply = batch(api, [recurring, job(schedule={"rate_seconds": 5}), recurring, recurring, job()])

    assert statuses(reply) == [201, 429, 201, 429, 201]
    assert reply.json["items"][1]["error"]["field"] == "schedule.rate_seconds"
    assert len(api.job_items()) == 3


# --- cost: batched writes and sends ------------------------------------------------------------


class Calls:
    """Every AWS operation called, by name (botocore's before-call event)."""

    def __init__(self, engine: Engine) -> None:  # noqa: F811
        self.count: Counter[str] = Counter()
        for client in {id(c): c for c in self._clients(engine)}.values():
            client.meta.events.register("before-call", self._seen)

    @staticmethod
    def _clients(engine: Engine) -> list[Any]:  # noqa: F811
        parts = engine.parts
        return [parts.jobs._client, parts.timers._client, parts.runs._client, parts.queue._client]  # type: ignore[attr-defined]

    def _seen(self, event_name: str, **_: Any) -> None:
        self.count[event_name.rsplit(".", maxsplit=1)[-1]] += 1


def test_a_batch_of_100_fast_path_jobs_costs_10_sqs_requests_and_4_job_writes(
    api: Api,  # noqa: F811
) -> None:
    calls = Calls(api.engine)

    reply = batch(api, [job(schedule={"delay_seconds": 30}, payload=n) for n in range(100)])

    assert statuses(reply) == [201] * 100
    # The first occurrences go out as SendMessageBatch of 10 (one queue: lambda × normal)...
    assert (calls.count["SendMessageBatch"], calls.count["SendMessage"]) == (10, 0)
    assert api.engine.queue_messages(Runtime.LAMBDA, Priority.NORMAL) == 100
    # ...and the job items as BatchWriteItem of 25, with no single PutItem.
    assert (calls.count["BatchWriteItem"], calls.count["PutItem"]) == (4, 0)
    assert len(api.job_items()) == 100


def test_keyed_items_are_written_by_conditional_puts_and_timers_are_batched(
    api: Api,  # noqa: F811
) -> None:
    calls = Calls(api.engine)
    jobs = [job(schedule={"delay_seconds": 3600}, idempotency_key=f"k{n}") for n in range(30)]

    reply = batch(api, jobs)

    assert statuses(reply) == [201] * 30
    # Per key, a claim (the condition is the claim) and the job's conditional write (a retry
    # with the key may write the same id: test_idempotency_races); their 30 timers (an hour
    # away: beyond the sweep horizon) in 2 BatchWriteItem; nothing sent yet.
    assert calls.count["PutItem"] == 60
    assert calls.count["BatchWriteItem"] == 2
    assert calls.count["SendMessageBatch"] == calls.count["SendMessage"] == 0


# --- failures and resumed submissions ----------------------------------------------------------


def test_a_failed_send_is_a_500_cancelling_the_batch_and_a_retry_with_the_keys_revives_it(
    api: Api,  # noqa: F811
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    jobs = [job(payload=n, idempotency_key=f"k{n}") for n in range(3)]
    queue = api.engine.parts.queue

    def broken(*_: object) -> None:
        raise QueueError("SQS is unavailable")

    with monkeypatch.context() as patched:
        patched.setattr(queue, "send", broken)
        failed = api.call("POST", "/jobs/batch", {"jobs": jobs})

    assert failed.status == 500
    assert {api.item_status(i["id"]["S"]) for i in api.job_items()} == {"cancelled"}
    retried = batch(api, jobs)
    assert statuses(retried) == [201] * 3
    assert {i["job"]["status"] for i in retried.json["items"]} == {"scheduled"}
    assert len(api.job_items()) == 3  # revived, not created again
    assert api.engine.queue_messages(Runtime.LAMBDA, Priority.NORMAL) == 3


def test_a_run_sqs_does_not_take_becomes_a_timer_and_every_job_stands(
    api: Api,  # noqa: F811
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # The whole request was a 500 and every job withdrawn, those whose runs had gone out (and
    # might have run) too (an outside fault audit, round seven).
    jobs = [job(payload=n) for n in range(2)]
    jobs.append(job(payload=2, priority="high", schedule={"delay_seconds": 0}))
    queue = api.engine.parts.queue
    send = queue.send

    def high_queue_down(messages: Any) -> None:
        high = [m for m, _ in messages if m.priority == Priority.HIGH]
        send([(m, d) for m, d in messages if m.priority != Priority.HIGH])
        if high:
            raise QueueError("SQS did not take a batch", high)

    with monkeypatch.context() as patched:
        patched.setattr(queue, "send", high_queue_down)
        reply = batch(api, jobs)

    assert reply.status == 200
    assert statuses(reply) == [201, 201, 201]
    assert {api.item_status(i["id"]["S"]) for i in api.job_items()} == {"scheduled"}
    unsent = reply.json["items"][2]["job"]["id"]
    timers = api.engine.aws.dynamodb.scan(TableName=api.engine.parts.settings.timers_table)
    assert [t for t in timers["Items"] if unsent in t["sk"]["S"]]  # for the next sweep
    assert api.engine.queue_messages(Runtime.LAMBDA, Priority.HIGH) == 0


def test_a_key_whose_first_request_died_before_writing_its_job_gets_the_recorded_id(
    api: Api,  # noqa: F811
) -> None:
    body = job(payload="resumed")
    recorded = "01KAAAAAAAAAAAAAAAAAAAAAAB"
    fingerprint = _fingerprint(parse_job_spec(body))
    api.engine.parts.jobs.claim_key("tenant-a", "died", recorded, fingerprint, 2**31, 0)

    reply = batch(api, [{**body, "idempotency_key": "died"}, job()])

    assert statuses(reply) == [201, 201]
    assert reply.json["items"][0]["job"]["id"] == recorded
    assert recorded in {i["id"]["S"] for i in api.job_items()}


def test_batch_create_holds_its_sends_so_runs_become_visible_just_before_their_instant(
    api: Api,  # noqa: F811
) -> None:
    # Given jobs due at a whole second 10.9 s after a batch create (unheld: visible ~0.9 s
    # early, less the request's own time)
    due = (wall_ms() // 1000 + 20) * 1000
    api.engine.stand_at(due - 10_900)
    reply = batch(api, [job(schedule={"at": rfc3339_ms(due)}) for _ in range(12)])
    assert statuses(reply) == [201] * 12

    # Then none is visible 0.4 s before the instant; all are at the release margin
    api.engine.advance_to(due - 400)
    assert visible(api.engine) == 0
    assert due - 400 < due - RELEASE_LEAD_MS
    api.engine.advance_to(due - RELEASE_MARGIN_MS)
    assert visible(api.engine) == 12


def test_a_single_submission_is_sent_at_once_with_the_floor_delay(api: Api) -> None:  # noqa: F811
    # Given the same job through POST /jobs: not held (its answer would wait for one run)
    due = (wall_ms() // 1000 + 20) * 1000
    api.engine.stand_at(due - 10_600)
    assert api.call("POST", "/jobs", job(schedule={"at": rfc3339_ms(due)})).status == 201

    # Then it is visible 0.4 s before its instant already (0.6 s early)
    api.engine.advance_to(due - 400)
    assert visible(api.engine) == 1


def test_a_replay_of_a_job_expired_since_is_its_own_404_and_the_others_are_created(
    api: Api,  # noqa: F811
) -> None:
    # With a hot window under the key's day (`duetime local --hot-ttl-seconds`), a job's item
    # expires before its key: its replay's 404 was the whole batch's, the new job unwritten
    # (found by an outside audit).
    first = batch(api, [job(idempotency_key="x")]).json["items"][0]["job"]
    table = api.engine.aws.settings.jobs_table
    api.engine.aws.dynamodb.update_item(
        TableName=table,
        Key={"tenant": {"S": "tenant-a"}, "id": {"S": first["id"]}},
        UpdateExpression="SET expires_at = :past",
        ExpressionAttributeValues={":past": {"N": str(wall_ms() // 1000 - 1)}},
    )

    reply = batch(api, [job(idempotency_key="x"), job(name="new")])

    assert reply.status == 200
    replayed, created = reply.json["items"]
    assert (replayed["status"], replayed["error"]["code"]) == (404, "not_found")
    assert created["status"] == 201
    assert api.call("GET", f"/jobs/{created['job']['id']}").status == 200
