"""`duetime dlq list` and `duetime dlq redrive` against moto (docs/cli.md, docs/reliability.md)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from duetime import wiring
from duetime.adapters.sqs import SqsJobQueue
from duetime.cli.main import main
from duetime.clock import wall_ms
from duetime.domain.ids import run_id
from duetime.domain.jobs import Priority, Runtime
from duetime.domain.messages import run_message
from duetime.domain.runs import CLOCK_SKEW_ALLOWANCE_MS, Lease, RunClaim, RunStatus
from duetime.ports import QueueError
from duetime.services.dropped import ABANDONED_ERROR
from tests.integration.conftest import Engine


def failing_job(engine: Engine, *, succeed_on: int = 99, priority: str = "normal") -> str:
    """A one-off job whose two attempts fail (it succeeds from attempt `succeed_on`), driven
    until its run is in the DLQ."""
    job_id = engine.submit(
        {
            "schedule": {"delay_seconds": 0},
            "target": {"type": "handler", "name": "duetime.fail"},
            "payload": {"until_attempt": succeed_on},
            "retry": {"max_attempts": 2, "backoff_seconds": 2},
            "priority": priority,
        }
    )
    engine.drain()
    engine.advance(2)
    engine.drain()
    return job_id


def scheduled(engine: Engine, job_id: str) -> int:
    job = engine.parts.jobs.get("tenant-a", job_id)
    assert job is not None
    return job.created_ms


def dlq(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    capsys.readouterr()  # the functions' own log lines so far
    code = main(["dlq", *args])
    out, err = capsys.readouterr()
    return code, out, err


def test_given_empty_dlqs_when_listed_then_it_says_so(
    engine: Engine, capsys: pytest.CaptureFixture[str]
) -> None:
    assert dlq(capsys, "list") == (0, "no dead runs\n", "")


def test_given_a_failed_run_when_listed_then_it_shows_job_run_attempt_reason_and_time(
    engine: Engine, capsys: pytest.CaptureFixture[str]
) -> None:
    job_id = failing_job(engine, priority="high")
    rid = run_id(job_id, scheduled(engine, job_id))

    code, out, _ = dlq(capsys, "list")
    assert code == 0
    header, row = out.splitlines()
    assert [h.strip() for h in header.split("  ") if h.strip()] == [
        "QUEUE", "TENANT", "JOB ID", "RUN ID", "ATTEMPT", "DEAD SINCE", "REASON"
    ]  # fmt: skip
    # The tenant, whom an on-call tells of a failing target (only --json had it until
    # 2026-11-30; an outside SRE audit).
    assert row.split()[:5] == ["lambda/high", "tenant-a", job_id, rid, "2"]
    assert row.split()[5].startswith("2026-11-21T10:00:")
    assert row.endswith("attempt 2 of 2: duetime.fail: attempt 2")

    code, out, _ = dlq(capsys, "list", "--json")
    [item] = json.loads(out)
    assert item["run_id"] == rid
    assert item["attempt"] == 2
    assert item["reason"] == "attempt 2 of 2: duetime.fail: attempt 2"
    # Listing does not consume: the message is still there, and visible.
    assert dlq(capsys, "list", "--queue", "lambda/normal")[1] == "no dead runs\n"
    assert dlq(capsys, "list", "--queue", "lambda/high")[1].count(rid) == 1
    # A queue named twice is read once (each dead run was listed twice: an outside audit).
    repeated = dlq(capsys, "list", "--queue", "lambda/high", "--queue", "lambda/high")
    assert repeated[1].count(rid) == 1


def test_given_a_dead_run_when_redriven_then_it_runs_as_the_next_attempt_and_leaves_the_dlq(
    engine: Engine, capsys: pytest.CaptureFixture[str]
) -> None:
    job_id = failing_job(engine, succeed_on=3)
    when = scheduled(engine, job_id)
    rid = run_id(job_id, when)
    run = engine.parts.runs.get(job_id, when)
    assert run is not None
    assert run.status == RunStatus.FAILED

    code, out, _ = dlq(capsys, "redrive", "--run-id", rid)
    assert code == 0
    assert f"redriven  {rid}  attempt 3  to lambda/normal" in out
    assert dlq(capsys, "list")[1] == "no dead runs\n"
    engine.drain()

    run = engine.parts.runs.get(job_id, when)
    assert run is not None
    assert run.status == RunStatus.SUCCEEDED
    assert [a.number for a in run.attempts] == [1, 2, 3]
    assert engine.queue_messages(Runtime.LAMBDA, Priority.NORMAL) == 0
    assert engine.queue_messages(Runtime.LAMBDA, Priority.NORMAL, dead=True) == 0


def test_given_a_redriven_run_that_fails_again_then_it_returns_to_the_dlq_with_a_new_reason(
    engine: Engine, capsys: pytest.CaptureFixture[str]
) -> None:
    job_id = failing_job(engine)
    assert dlq(capsys, "redrive")[0] == 0
    engine.drain()
    _, out, _ = dlq(capsys, "list", "--json")
    [item] = json.loads(out)
    assert (item["job_id"], item["attempt"]) == (job_id, 3)
    assert item["reason"] == "attempt 3 of 2: duetime.fail: attempt 3"


def test_given_several_dead_runs_when_redriven_with_a_limit_then_only_that_many_move(
    engine: Engine, capsys: pytest.CaptureFixture[str]
) -> None:
    for _ in range(3):
        failing_job(engine)
    code, out, _ = dlq(capsys, "redrive", "--limit", "2")
    assert code == 0
    assert out.splitlines()[-1] == "2 redriven, 0 skipped"
    assert engine.queue_messages(Runtime.LAMBDA, Priority.NORMAL, dead=True) == 1
    assert engine.queue_messages(Runtime.LAMBDA, Priority.NORMAL) == 2


def test_given_an_unreadable_message_when_redriven_then_it_is_skipped_and_kept(
    engine: Engine, capsys: pytest.CaptureFixture[str]
) -> None:
    url = engine.aws.settings.queue(Runtime.FARGATE, Priority.LOW).dlq_url
    engine.aws.sqs.send_message(QueueUrl=url, MessageBody="not json")
    code, out, _ = dlq(capsys, "list", "--queue", "fargate/low")
    assert "unreadable body" in out
    code, out, _ = dlq(capsys, "redrive")
    assert code == 0
    assert "the body is not a run message  (left in the DLQ)" in out
    assert engine.queue_messages(Runtime.FARGATE, Priority.LOW, dead=True) == 1


def test_given_sqs_refuses_the_copy_when_redriving_then_the_message_stays_in_the_dlq(
    engine: Engine, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    job_id = failing_job(engine)

    def refuse(self: SqsJobQueue, messages: object) -> None:
        raise QueueError("1 message(s) were not accepted by SQS")

    send = SqsJobQueue.send
    monkeypatch.setattr(SqsJobQueue, "send", refuse)
    code, out, err = dlq(capsys, "redrive")
    assert code == 1
    assert err.startswith("duetime: redrive stopped: 1 message(s) were not accepted by SQS")
    assert "Traceback" not in err
    assert engine.queue_messages(Runtime.LAMBDA, Priority.NORMAL, dead=True) == 1
    assert engine.queue_messages(Runtime.LAMBDA, Priority.NORMAL) == 0
    # Afterwards a redrive succeeds (the run was reopened already; the attempt still follows).
    monkeypatch.setattr(SqsJobQueue, "send", send)
    code, out, _ = dlq(capsys, "redrive")
    assert code == 0
    assert f"redriven  {run_id(job_id, scheduled(engine, job_id))}  attempt 3" in out


def test_given_a_redrive_stopped_by_a_failed_send_then_the_runs_already_sent_are_named(
    engine: Engine, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    # (An outside audit: the runs sent back before the failure left the DLQ and ran again,
    # and the command said nothing of them.)
    first = failing_job(engine, priority="high")
    failing_job(engine, priority="low")
    send, sent = SqsJobQueue.send, []

    def once_then_refuse(self: SqsJobQueue, messages: Any) -> None:
        if sent:
            raise QueueError("1 message(s) were not accepted by SQS")
        sent.append(messages)
        send(self, messages)

    monkeypatch.setattr(SqsJobQueue, "send", once_then_refuse)
    code, out, err = dlq(capsys, "redrive", "--queue", "lambda/high", "--queue", "lambda/low")

    assert code == 1
    assert out == (
        f"redriven  {run_id(first, scheduled(engine, first))}  attempt 3  to lambda/high\n"
    )
    assert err.startswith("duetime: redrive stopped: 1 message(s) were not accepted by SQS")
    assert engine.queue_messages(Runtime.LAMBDA, Priority.LOW, dead=True) == 1  # `second`'s


def test_given_an_unknown_run_id_when_redriven_then_it_says_it_is_not_there(
    engine: Engine, capsys: pytest.CaptureFixture[str]
) -> None:
    code, _, err = dlq(capsys, "redrive", "--run-id", "nope-1")
    assert code == 1
    assert err == "duetime: not in the DLQs: nope-1\n"


def test_given_no_configuration_then_it_explains_instead_of_a_traceback(
    aws_env: None,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
) -> None:
    monkeypatch.delenv("DUETIME_QUEUES", raising=False)
    code, out, err = dlq(capsys, "list", "--state-dir", str(tmp_path))
    assert code == 2
    assert err.startswith("duetime: no queues to read: set the DUETIME_* environment")
    assert out == ""


def test_given_an_unknown_queue_then_argparse_refuses_it(
    capsys: pytest.CaptureFixture[str],
) -> None:
    with pytest.raises(SystemExit) as exit_:
        main(["dlq", "list", "--queue", "lambda/urgent"])
    assert exit_.value.code == 2
    assert "invalid choice: 'lambda/urgent'" in capsys.readouterr().err


def test_given_a_run_left_running_by_a_dead_worker_when_redriven_then_it_runs_once_more(
    engine: Engine, capsys: pytest.CaptureFixture[str]
) -> None:
    # A worker claimed attempt 1 of 1, died, and the redrive policy moved its message
    job_id = engine.submit({"schedule": {"delay_seconds": 0}, "retry": {"max_attempts": 1}})
    when = scheduled(engine, job_id)
    url = engine.aws.settings.queue(Runtime.LAMBDA, Priority.NORMAL).url
    (message,) = engine.aws.sqs.receive_message(QueueUrl=url)["Messages"]
    engine.parts.runs.claim(
        RunClaim(
            "tenant-a", job_id, when, 1, Lease(message["MessageId"], 1, when + 60_000), when, 0, 0
        )
    )
    engine.aws.sqs.delete_message(QueueUrl=url, ReceiptHandle=message["ReceiptHandle"])
    dead = engine.aws.settings.queue(Runtime.LAMBDA, Priority.NORMAL).dlq_url
    engine.aws.sqs.send_message(QueueUrl=dead, MessageBody=message["Body"])
    rid = run_id(job_id, when)

    # While its lease is live, the run is someone's: left in the DLQ
    code, out, _ = dlq(capsys, "redrive", "--run-id", rid)
    assert "the run is running now" in out
    engine.advance(60 + CLOCK_SKEW_ALLOWANCE_MS / 1000)
    code, out, _ = dlq(capsys, "redrive", "--run-id", rid)
    assert (code, f"redriven  {rid}  attempt 2  to lambda/normal" in out) == (0, True)
    engine.drain()

    run = engine.parts.runs.get(job_id, when)
    assert run is not None
    assert run.status == RunStatus.SUCCEEDED
    assert [(a.number, a.error) for a in run.attempts] == [(1, ABANDONED_ERROR), (2, None)]
    assert engine.recorder.runs_of(job_id) == [when]


def test_given_a_succeeded_run_whose_after_jobs_were_never_sent_then_a_redrive_sends_them(
    engine: Engine, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    # An upstream run succeeded, its dependents' runs could not be sent for ~17 minutes, and
    # its message went to the DLQ; the redrive skipped it ("the run already succeeded") and
    # the dependents never ran (found by an outside audit).
    up = engine.submit({"schedule": {"delay_seconds": 5}})
    down = engine.submit({"schedule": {"after": {"job_id": up}}})
    queue = engine.parts.queue
    send = queue.send

    def refused(messages: Any) -> Any:
        if any(m.job_id == down for m, _ in messages):
            raise QueueError("SQS did not take the batch: throttled", [m for m, _ in messages])
        return send(messages)

    monkeypatch.setattr(queue, "send", refused)
    engine.advance(5)
    for _ in range(80):  # past the redrive policy's 10 receives
        engine.drain()
        engine.advance(30)
    assert engine.recorder.runs_of(up)
    assert engine.queue_messages(Runtime.LAMBDA, Priority.NORMAL, dead=True) == 1
    monkeypatch.setattr(queue, "send", send)  # mended

    code, out, _ = dlq(capsys, "redrive")
    assert code == 0
    assert "redriven" in out
    engine.drain()

    assert len(engine.recorder.runs_of(up)) == 1  # not run again
    assert len(engine.recorder.runs_of(down)) == 1
    assert engine.queue_messages(Runtime.LAMBDA, Priority.NORMAL, dead=True) == 0


def test_given_a_first_attempt_that_never_reached_a_claim_when_redriven_then_it_is_attempt_1(
    engine: Engine,
) -> None:
    # A message the redrive policy moved before any claim (an outage of the runs table) has no
    # run record: the redrive numbered it attempt 2, "attempt 2 of 1" when it failed (found by
    # an outside audit).
    job_id = engine.submit(
        {
            "schedule": {"delay_seconds": 3600},
            "target": {"type": "handler", "name": "duetime.fail"},
            "payload": {"until_attempt": 9},
            "retry": {"max_attempts": 1},
        }
    )
    job = engine.parts.jobs.get("tenant-a", job_id)
    assert job is not None
    message = run_message(job, job.next_due_ms or 0, jittered=False)
    urls = engine.aws.settings.queue(Runtime.LAMBDA, Priority.NORMAL)
    engine.aws.sqs.send_message(QueueUrl=urls.dlq_url, MessageBody=engine.parts.auth.seal(message))

    report = wiring.dead_runs(engine.parts).redrive(
        ["lambda/normal"], run_ids=None, limit=None, now_ms=wall_ms()
    )
    engine.drain()

    assert [attempt for _, attempt, _ in report.redriven] == [1]
    run = engine.parts.runs.get(job_id, message.scheduled_ms)
    assert run is not None
    assert [a.number for a in run.attempts] == [1]


def test_given_dead_runs_when_one_is_deleted_then_it_leaves_for_good_and_keeps_its_record(
    engine: Engine, capsys: pytest.CaptureFixture[str]
) -> None:
    # A dead run redrive skips (its job gone) could be removed only with raw `aws sqs` calls
    # (a new user's walk, 2026-11-30).
    gone, kept = failing_job(engine), failing_job(engine)
    gone_run = run_id(gone, scheduled(engine, gone))
    url = engine.aws.settings.queue(Runtime.FARGATE, Priority.LOW).dlq_url
    engine.aws.sqs.send_message(QueueUrl=url, MessageBody="not json")
    code, out, _ = dlq(capsys, "list", "--json")
    (unreadable,) = [d["message_id"] for d in json.loads(out) if d["run_id"] is None]

    code, out, err = dlq(capsys, "delete", gone_run, unreadable)

    assert (code, err) == (0, "")
    assert out.splitlines() == [
        f"deleted   {gone_run}  from lambda/normal  (a run record it has stays)",
        f"deleted   {unreadable}  from fargate/low  (a run record it has stays)",
        "2 deleted",
    ]
    left = json.loads(dlq(capsys, "list", "--json")[1])
    assert [d["run_id"] for d in left] == [run_id(kept, scheduled(engine, kept))]
    record = engine.parts.runs.get(gone, scheduled(engine, gone))
    assert record is not None
    assert record.status == RunStatus.FAILED


def test_given_an_unknown_id_when_deleted_then_it_says_it_is_not_there_and_deletes_nothing(
    engine: Engine, capsys: pytest.CaptureFixture[str]
) -> None:
    failing_job(engine)
    code, out, err = dlq(capsys, "delete", "nope-1")
    assert (code, out, err) == (1, "0 deleted\n", "duetime: not in the DLQs: nope-1\n")
    assert engine.queue_messages(Runtime.LAMBDA, Priority.NORMAL, dead=True) == 1


def test_given_no_id_then_delete_is_a_usage_error(
    engine: Engine, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exited:
        dlq(capsys, "delete")
    assert exited.value.code == 2
    assert "ID" in capsys.readouterr().err


@pytest.mark.parametrize("action", [["list"], ["delete", "any-id"]])
def test_given_the_signing_key_cannot_be_read_then_dlq_fails_with_its_own_message(
    engine: Engine,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    action: list[str],
) -> None:
    # A refused key read is AWS refusing a call of `dlq` (exit 1, the command's message), not a
    # configuration problem (exit 2, until a review the day it became KeysUnavailable).
    failing_job(engine)  # one dead run: listing it opens (verifies) its body
    monkeypatch.setenv("DUETIME_RUN_SIGNING_KEY", "")
    missing = "arn:aws:secretsmanager:us-east-1:123456789012:secret:no-such-key-AbCdEf"
    monkeypatch.setenv("DUETIME_RUN_SIGNING_SECRET_ARN", missing)
    capsys.readouterr()

    code = main(["dlq", *action])

    err = capsys.readouterr().err
    assert code == 1
    assert err.startswith(
        "duetime: cannot read the DLQs" if action == ["list"] else "duetime: delete stopped"
    )
