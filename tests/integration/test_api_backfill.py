"""Issue 14, item 6 through the API handler on moto: POST /jobs/{id}/backfill sends the past
occurrences of [from, to) that have no run record, with the schedule's run ids, and the real
worker runs them. Every reply is validated against the OpenAPI document."""

from __future__ import annotations

from typing import Any

import pytest

from duetime.clock import wall_ms
from duetime.domain.timeutil import rfc3339_ms
from duetime.ports import QueueError
from duetime.services.dependencies import TRIGGER_READS, Dependencies
from duetime.settings import QuotaEnv
from tests.integration import test_api
from tests.integration.conftest import START, Engine
from tests.integration.test_api import Api, at, to_ms_of

api = test_api.api  # the fixture: the API handler over the moto engine

MINUTE = 60_000
START_MS = int(START.timestamp() * 1000)


def backfill(api: Api, job_id: str, start: str, end: str, **kwargs: Any) -> test_api.Reply:
    return api.call("POST", f"/jobs/{job_id}/backfill", {"from": start, "to": end}, **kwargs)


def run_ids(api: Api, job_id: str) -> list[str]:
    reply = api.call("GET", f"/jobs/{job_id}/runs", query={"limit": "100"})
    return sorted(run["run_id"] for run in reply.json["items"])


def test_backfill_runs_the_occurrences_that_never_ran_once(api: Api) -> None:
    engine: Engine = api.engine
    # Given a 1-minute rate paused at once, whose first 3 occurrences passed while paused
    # (resumed, it goes on from now: those 3 never ran)
    job = api.create({"schedule": {"rate_seconds": 60}})
    first = to_ms_of(job["next_run_at"])
    paused_for(api, job["id"], 3 * 60 + 30)
    engine.drain()
    assert engine.recorder.runs_of(job["id"]) == []

    # When its past is backfilled
    reply = backfill(api, job["id"], at(0), rfc3339_ms(wall_ms()))

    # Then the 3 occurrences are sent, run by the worker, and listed with the schedule's run ids
    assert (reply.status, reply.json) == (202, {"occurrences": 3})
    engine.drain()
    expected = [first, first + MINUTE, first + 2 * MINUTE]
    assert sorted(engine.recorder.runs_of(job["id"])) == expected
    assert run_ids(api, job["id"]) == [f"{job['id']}-{ms}" for ms in expected]
    runs = api.call("GET", f"/jobs/{job['id']}/runs").json["items"]
    assert {run["status"] for run in runs} == {"succeeded"}
    assert sorted(run["scheduled_for"] for run in runs) == [rfc3339_ms(ms) for ms in expected]

    # And a second backfill of the same range sends none; a wider one only the new occurrences
    again = backfill(api, job["id"], at(0), rfc3339_ms(first + 2 * MINUTE + 1))
    assert (again.status, again.json) == (202, {"occurrences": 0})
    pause_and_skip_two_minutes(api, job["id"])
    wider = backfill(api, job["id"], at(0), rfc3339_ms(wall_ms()))
    assert wider.json == {"occurrences": 2}
    engine.drain()
    assert len(engine.recorder.runs_of(job["id"])) == 5
    assert len(run_ids(api, job["id"])) == 5


def test_each_run_a_backfill_sends_spends_a_submission_token(api: Api) -> None:
    # One token sent up to 1,000 runs, and a PATCH moving the grid made the same range
    # backfillable again: 1,999 runs for two tokens (found by an outside audit).
    api.configure(**{QuotaEnv.SUBMISSIONS_PER_SECOND: "0.01", QuotaEnv.SUBMISSION_BURST: "10"})
    job = api.create({"schedule": {"rate_seconds": 60}})  # a token
    api.call("POST", f"/jobs/{job['id']}/pause")  # pausing spends none
    api.engine.advance(5 * 60 + 30)
    assert api.call("POST", f"/jobs/{job['id']}/resume").status == 200  # resuming does: 8 left

    sent = backfill(api, job["id"], at(0), rfc3339_ms(wall_ms()))

    assert (sent.status, sent.json) == (202, {"occurrences": 5})  # 5 tokens: 3 left
    statuses = [api.call("POST", f"/jobs/{job['id']}/run").status for _ in range(4)]
    assert statuses == [202, 202, 202, 429]


def test_a_run_now_spends_a_token_for_each_run_its_after_jobs_make(api: Api) -> None:
    # One run-now of a job with 100 `after` jobs started 101 runs for one token, ten of them
    # 1,010 (found by an outside security audit): the whole tree below it is charged, each
    # job once, those that would run and the paused ones, which may be resumed before the
    # run ends (uncharged, a round-five audit ran 50 runs for one token).
    api.configure(**{QuotaEnv.SUBMISSIONS_PER_SECOND: "0.01", QuotaEnv.SUBMISSION_BURST: "12"})
    upstream = api.create({"schedule": {"rate_seconds": 3600}})  # a token
    middle = api.create({"schedule": {"after": {"job_id": upstream["id"]}}})  # a token
    below = [api.create({"schedule": {"after": {"job_id": middle["id"]}}}) for _ in range(3)]
    paused = api.create({"schedule": {"after": {"job_id": upstream["id"]}}})
    api.call("POST", f"/jobs/{paused['id']}/pause")  # 6 tokens spent, 6 left
    assert api.call("POST", f"/jobs/{below[0]['id']}/run").status == 202  # no dependents: 1

    ran = api.call("POST", f"/jobs/{upstream['id']}/run")  # 1 + middle + 3 below + paused

    assert ran.status == 202
    refused = api.call("POST", f"/jobs/{below[1]['id']}/run")
    assert (refused.status, refused.error["code"]) == (429, "quota_exceeded")
    api.engine.drain()
    assert len(api.engine.recorder.runs_of(below[2]["id"])) == 1  # the tree did run


def test_a_paused_dependent_is_charged_as_it_may_be_resumed_before_its_upstream_runs(
    api: Api,
) -> None:
    # Pausing the dependents, running the upstream, and resuming them (for free) while it ran
    # sent all their runs for one token (a security audit, round five).
    api.configure(**{QuotaEnv.SUBMISSIONS_PER_SECOND: "0.01", QuotaEnv.SUBMISSION_BURST: "8"})
    upstream = api.create({"schedule": {"rate_seconds": 3600}})  # a token
    below = [api.create({"schedule": {"after": {"job_id": upstream["id"]}}}) for _ in range(4)]
    for job in below:  # 5 spent, 3 left; pausing spends none
        assert api.call("POST", f"/jobs/{job['id']}/pause").status == 200

    ran = api.call("POST", f"/jobs/{upstream['id']}/run")  # 1 + 4 paused: -2

    assert ran.status == 202
    refused = api.call("POST", f"/jobs/{below[0]['id']}/resume")
    assert (refused.status, refused.error["code"]) == (429, "quota_exceeded")


def test_a_backfill_spends_a_token_for_each_run_its_after_jobs_make(api: Api) -> None:
    api.configure(**{QuotaEnv.SUBMISSIONS_PER_SECOND: "0.01", QuotaEnv.SUBMISSION_BURST: "12"})
    job = api.create({"schedule": {"rate_seconds": 60}})  # a token
    api.create({"schedule": {"after": {"job_id": job["id"]}}})  # a token: 10 left
    api.call("POST", f"/jobs/{job['id']}/pause")
    api.engine.advance(3 * 60 + 30)
    assert api.call("POST", f"/jobs/{job['id']}/resume").status == 200  # a token: 9 left

    sent = backfill(api, job["id"], at(0), rfc3339_ms(wall_ms()))

    assert (sent.status, sent.json) == (202, {"occurrences": 3})  # 3 × 2 tokens: 3 left
    statuses = [api.call("POST", f"/jobs/{job['id']}/run").status for _ in range(3)]
    assert statuses == [202, 202, 429]  # 2 tokens each (with a negative balance after)


def after(api: Api, upstream: str) -> dict[str, Any]:
    return api.create({"schedule": {"after": {"job_id": upstream}}})


def test_after_jobs_linked_once_a_backfill_was_asked_get_no_runs_of_it(api: Api) -> None:
    # The charge counts the `after` jobs there are when it is asked: those created (or
    # PATCHed onto the job) while its runs waited got 14 × 15 runs for nothing (a security
    # audit, round six). They run after the job's later runs, as any dependent.
    engine: Engine = api.engine
    job = api.create({"schedule": {"rate_seconds": 60}})
    early = after(api, job["id"])
    elsewhere = after(api, api.create({"schedule": {"rate_seconds": 3600}})["id"])
    paused_for(api, job["id"], 3 * 60 + 30)
    assert backfill(api, job["id"], at(0), rfc3339_ms(wall_ms())).json == {"occurrences": 3}
    engine.advance(1)

    late = after(api, job["id"])
    moved = api.call(
        "PATCH", f"/jobs/{elsewhere['id']}", {"schedule": {"after": {"job_id": job["id"]}}}
    )
    assert moved.status == 200
    engine.drain()

    assert len(engine.recorder.runs_of(job["id"])) == 3
    assert len(engine.recorder.runs_of(early["id"])) == 3
    assert engine.recorder.runs_of(late["id"]) == []
    assert engine.recorder.runs_of(elsewhere["id"]) == []
    engine.run_minutes(2)  # the job's next runs, from its schedule, run them all
    scheduled = len(engine.recorder.runs_of(job["id"])) - 3
    assert scheduled >= 1
    ran = [len(engine.recorder.runs_of(j["id"])) for j in (early, late, elsewhere)]
    assert ran == [3 + scheduled, scheduled, scheduled]


def test_a_run_now_s_runs_below_it_trigger_only_the_after_jobs_there_were_when_asked(
    api: Api,
) -> None:
    # Two levels: the dependent's run, triggered by the run-now's, is bounded by the same ask.
    engine: Engine = api.engine
    job = api.create({"schedule": {"rate_seconds": 3600}})
    middle = after(api, job["id"])
    assert api.call("POST", f"/jobs/{job['id']}/run").status == 202
    engine.advance(1)

    late_below = after(api, middle["id"])
    late = after(api, job["id"])
    engine.drain()

    assert len(engine.recorder.runs_of(middle["id"])) == 1
    assert engine.recorder.runs_of(late["id"]) == []
    assert engine.recorder.runs_of(late_below["id"]) == []
    assert api.call("POST", f"/jobs/{job['id']}/run").status == 202  # asked now: all three
    engine.drain()
    assert [len(engine.recorder.runs_of(j["id"])) for j in (middle, late, late_below)] == [2, 1, 1]


def paused_for(api: Api, job_id: str, seconds: float) -> None:
    """The job paused `seconds` and resumed: the occurrences meanwhile never ran."""
    assert api.call("POST", f"/jobs/{job_id}/pause").status == 200
    api.engine.advance(seconds)
    assert api.call("POST", f"/jobs/{job_id}/resume").status == 200


def pause_and_skip_two_minutes(api: Api, job_id: str) -> None:
    api.call("POST", f"/jobs/{job_id}/pause")
    api.engine.advance(2 * 60)
    api.call("POST", f"/jobs/{job_id}/resume")


def test_occurrences_the_sweeper_already_ran_are_not_repeated(api: Api) -> None:
    engine: Engine = api.engine
    # Given a job run by the engine for a few minutes
    job = api.create({"schedule": {"rate_seconds": 60}})
    engine.run_minutes(4)
    ran = sorted(engine.recorder.runs_of(job["id"]))
    assert ran

    # When the range they lie in is backfilled
    reply = backfill(api, job["id"], at(0), rfc3339_ms(ran[-1] + 1))

    # Then nothing is sent and nothing runs again
    assert reply.json == {"occurrences": 0}
    engine.drain()
    assert sorted(engine.recorder.runs_of(job["id"])) == ran


def test_a_cron_job_is_backfilled_on_its_expression(api: Api) -> None:
    engine: Engine = api.engine
    job = api.create({"schedule": {"cron": "*/2 * * * *", "timezone": "UTC"}})
    engine.advance(10 * 60)

    reply = backfill(api, job["id"], at(0), rfc3339_ms(wall_ms()))

    assert reply.json == {"occurrences": 5}
    engine.drain()
    assert all(ms % (2 * MINUTE) == 0 for ms in engine.recorder.runs_of(job["id"]))
    assert len(engine.recorder.runs_of(job["id"])) == 5


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"to": at(-60)}, "from"),
        ({"from": "yesterday", "to": at(-60)}, "from"),
        ({"from": at(-120), "to": at(3600)}, "to"),
        ({"from": at(-60), "to": at(-120)}, "from"),
        ({"from": at(-120), "to": at(-60), "extra": 1}, "extra"),
        ({"from": at(-40 * 86_400), "to": at(-60)}, "from"),  # before the hot window (30 days)
    ],
)
def test_a_bad_range_is_a_400_naming_the_field(api: Api, body: dict[str, Any], field: str) -> None:
    job = api.create({"schedule": {"rate_seconds": 60}})

    reply = api.call("POST", f"/jobs/{job['id']}/backfill", body)

    assert (reply.status, reply.error["code"], reply.error["field"]) == (400, "invalid", field)


def test_a_missing_or_malformed_body_is_a_400_on_body(api: Api) -> None:
    job = api.create({"schedule": {"rate_seconds": 60}})

    assert api.call("POST", f"/jobs/{job['id']}/backfill").error["field"] == "body"
    assert api.call("POST", f"/jobs/{job['id']}/backfill", [1]).error["field"] == "body"


def test_more_than_1000_occurrences_is_a_400_on_to_with_the_count(api: Api) -> None:
    engine: Engine = api.engine
    job = api.create({"schedule": {"rate_seconds": 60}})
    engine.advance(1100 * 60)
    engine.drain()  # what the job's creation sent

    reply = backfill(api, job["id"], at(0), at(1100 * 60))

    assert (reply.status, reply.error["field"]) == (400, "to")
    assert "holds 1,099 occurrences" in reply.error["message"]
    assert engine.drain() == 0


def test_a_one_off_paused_or_cancelled_job_is_a_409(api: Api) -> None:
    api.engine.advance(120)
    one_off = api.create({"schedule": {"at": at(3600)}})
    paused = api.create({"schedule": {"rate_seconds": 60}})
    api.call("POST", f"/jobs/{paused['id']}/pause")
    cancelled = api.create({"schedule": {"rate_seconds": 60}})
    api.call("DELETE", f"/jobs/{cancelled['id']}")

    dependent = api.create({"schedule": {"after": {"job_id": paused["id"]}}})

    for job in (one_off, paused, cancelled, dependent):
        reply = backfill(api, job["id"], at(0), at(60))
        assert (reply.status, reply.error["code"]) == (409, "conflict"), job["schedule"]
    # Each says what it is (an `after` job was called a one-off)
    assert "an after job" in backfill(api, dependent["id"], at(0), at(60)).error["message"]


def test_another_tenant_s_job_or_an_unknown_one_is_a_404(api: Api) -> None:
    job = api.create({"schedule": {"rate_seconds": 60}})
    api.engine.advance(120)
    api.engine.drain()  # what the job's creation sent

    other = backfill(api, job["id"], at(0), at(60), tenant="tenant-b")
    unknown = backfill(api, "01KAAAAAAAAAAAAAAAAAAAAAAA", at(0), at(60))

    assert (other.status, unknown.status) == (404, 404)
    assert api.engine.drain() == 0


def test_the_route_is_in_the_openapi_document(api: Api) -> None:
    document = api.call("GET", "/openapi.json", tenant=None).json
    operation = document["paths"]["/jobs/{id}/backfill"]["post"]

    assert set(operation["responses"]) >= {"202", "400", "404", "409"}
    assert START_MS > 0


def test_a_dependent_s_run_already_recorded_keeps_the_ask_of_the_run_that_triggered_it(
    api: Api,
) -> None:
    # B ran after OTHER at the minutes A is backfilled over, then was moved onto A: the
    # backfill's trigger of B finds B's runs finished, and their records (not asked) let B's
    # late dependents run for each, uncharged (an audit of the fix, round one). The stricter
    # ask of the two holds.
    engine: Engine = api.engine
    job = api.create({"schedule": {"cron": "* * * * *"}})
    other = api.create({"schedule": {"cron": "* * * * *"}})  # the same instants
    api.call("POST", f"/jobs/{job['id']}/pause")
    moved = after(api, other["id"])
    engine.run_minutes(3)
    assert api.call("POST", f"/jobs/{job['id']}/resume").status == 200
    patched = api.call(
        "PATCH", f"/jobs/{moved['id']}", {"schedule": {"after": {"job_id": job["id"]}}}
    )
    assert patched.status == 200
    early = after(api, moved["id"])
    sent = backfill(api, job["id"], at(0), rfc3339_ms(wall_ms())).json["occurrences"]
    assert sent >= 2
    engine.advance(1)

    late = after(api, moved["id"])
    engine.drain()

    assert engine.recorder.runs_of(late["id"]) == []
    assert len(engine.recorder.runs_of(early["id"])) == sent  # charged: one a backfilled run


@pytest.mark.parametrize("action", ["run", "backfill"])
def test_a_fan_out_that_cannot_be_counted_sends_no_run(
    api: Api, monkeypatch: pytest.MonkeyPatch, action: str
) -> None:
    # The runs went out first and the charge was counted after: an API container that died
    # counting (999 dependents of 64 KiB read at once) had sent them uncharged (a security
    # audit, round seven).
    engine: Engine = api.engine
    job = api.create({"schedule": {"rate_seconds": 60}})
    below = after(api, job["id"])
    paused_for(api, job["id"], 3 * 60 + 30)

    def dies(*args: object) -> int:
        raise MemoryError("out of memory (simulated)")

    with monkeypatch.context() as patched:
        patched.setattr(Dependencies, "fan_out", dies)
        if action == "run":
            reply = api.call("POST", f"/jobs/{job['id']}/run")
        else:
            reply = backfill(api, job["id"], at(0), rfc3339_ms(wall_ms()))
    assert reply.status == 500
    engine.drain()

    assert engine.recorder.runs_of(job["id"]) == []
    assert engine.recorder.runs_of(below["id"]) == []


def test_a_fan_out_is_counted_a_few_dependents_at_a_time(
    api: Api, monkeypatch: pytest.MonkeyPatch
) -> None:
    # All of them at once: 999 dependents of 64 KiB each held ~1.5 GiB in the 512 MiB API.
    job = api.create({"schedule": {"rate_seconds": 3600}})
    for _ in range(30):
        after(api, job["id"])
    reads: list[int] = []
    store = api.engine.parts.jobs
    read = store.get_with_dependents
    monkeypatch.setattr(
        store, "get_with_dependents", lambda keys: (reads.append(len(keys)), read(keys))[1]
    )

    assert api.engine.parts.service.fan_out("tenant-a", job["id"]) == 30
    assert max(reads) <= TRIGGER_READS


@pytest.mark.parametrize("action", ["run", "backfill"])
def test_an_after_job_created_while_the_fan_out_is_counted_gets_no_run_of_it(
    api: Api, monkeypatch: pytest.MonkeyPatch, action: str
) -> None:
    # The ask's instant was read after the count: a dependent created in between (a second,
    # with many to count) was triggered and never charged (a review of this session's fix).
    engine: Engine = api.engine
    job = api.create({"schedule": {"rate_seconds": 60}})
    paused_for(api, job["id"], 90)
    count = Dependencies.fan_out
    created: list[str] = []

    def counting_while_one_is_created(self: Dependencies, upstream: Any) -> int:
        engine.advance(0.5)
        counted = count(self, upstream)
        created.append(engine.submit({"schedule": {"after": {"job_id": job["id"]}}}))
        engine.advance(0.5)
        return counted

    monkeypatch.setattr(Dependencies, "fan_out", counting_while_one_is_created)
    if action == "run":
        assert api.call("POST", f"/jobs/{job['id']}/run").status == 202
    else:
        assert backfill(api, job["id"], at(0), rfc3339_ms(wall_ms())).json["occurrences"] >= 1
    engine.drain()

    assert engine.recorder.runs_of(job["id"])
    assert engine.recorder.runs_of(created[0]) == []


def test_a_backfill_part_partly_sent_is_charged_for_what_went_out(
    api: Api, monkeypatch: pytest.MonkeyPatch
) -> None:
    api.configure(**{QuotaEnv.SUBMISSIONS_PER_SECOND: "0.01", QuotaEnv.SUBMISSION_BURST: "10"})
    job = api.create({"schedule": {"rate_seconds": 60}})  # a token: 9 left
    api.call("POST", f"/jobs/{job['id']}/pause")
    api.engine.advance(5 * 60 + 30)
    assert api.call("POST", f"/jobs/{job['id']}/resume").status == 200  # 8 left
    queue = api.engine.parts.queue
    send = queue.send

    def three_refused(messages: Any) -> None:
        send(messages[:2])
        raise QueueError("3 message(s) were not accepted by SQS", [m for m, _ in messages[2:]])

    monkeypatch.setattr(queue, "send", three_refused)
    assert backfill(api, job["id"], at(0), rfc3339_ms(wall_ms())).status == 500
    monkeypatch.setattr(queue, "send", send)

    # 2 sent: 2 tokens (the one that let it in was one of them), 7 left, then 6
    statuses = [api.call("POST", f"/jobs/{job['id']}/run").status for _ in range(7)]
    assert statuses == [202] * 6 + [429]
