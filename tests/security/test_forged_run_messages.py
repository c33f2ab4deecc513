"""Forged run messages: a message on a run queue that duetime did not sign never runs.

The attack (issue 12, item 7): anyone who can put a message on a run queue (a tenant's `sqs`
target pointed at it, a principal with SendMessage) writes a body naming another tenant's
job. The worker must refuse it before the claim (no run record, no execution, no webhook
signed with the victim's secret), park it in the DLQ with the reason, and `duetime dlq
redrive` must never send it back (which would sign it).
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json

import pytest

from duetime.cli.main import main
from duetime.domain.ids import run_id
from duetime.domain.jobs import Priority, Runtime
from duetime.domain.messages import MessageAuth, RunMessage, UnauthenticatedMessage
from duetime.observability import Metric
from tests.integration.conftest import Engine


def victim_job(engine: Engine) -> tuple[str, int]:
    """Tenant B's job, far in the future: nothing of duetime's own runs it during the test."""
    job_id = engine.submit(
        {"schedule": {"cron": "0 0 1 1 *"}, "payload": {"of": "tenant-b"}}, tenant="tenant-b"
    )
    job = engine.parts.jobs.get("tenant-b", job_id)
    assert job is not None
    return job_id, job.created_ms


def dead_letters(engine: Engine) -> list[dict[str, object]]:
    dlq = engine.aws.settings.queue(Runtime.LAMBDA, Priority.NORMAL).dlq_url
    messages = engine.aws.sqs.receive_message(
        QueueUrl=dlq, MaxNumberOfMessages=10, MessageAttributeNames=["All"], VisibilityTimeout=0
    ).get("Messages", [])
    return [
        {
            "body": json.loads(m["Body"]),
            "reason": m["MessageAttributes"]["duetime-reason"]["StringValue"],
        }
        for m in messages
    ]


@pytest.mark.parametrize(
    "forge",
    [
        pytest.param(lambda m: m.to_json(), id="unsigned"),
        pytest.param(lambda m: MessageAuth([b"a guessed key"]).seal(m), id="wrong-key"),
        pytest.param(
            lambda m: json.dumps({**json.loads(m.to_json()), "sig": "A" * 43}), id="made-up-sig"
        ),
        # A signature of non-ASCII text: hmac.compare_digest raised TypeError, and the message
        # went round until the redrive policy moved it, without a reason (an outside audit).
        pytest.param(
            lambda m: json.dumps({**json.loads(m.to_json()), "sig": "é" * 43}), id="non-ascii-sig"
        ),
    ],
)
def test_given_a_forged_message_naming_another_tenants_job_then_it_never_runs_and_is_parked(
    engine: Engine, forge: object, capsys: pytest.CaptureFixture[str]
) -> None:
    job_id, when = victim_job(engine)
    forged = RunMessage("tenant-b", job_id, when, 1, when)
    url = engine.aws.settings.queue(Runtime.LAMBDA, Priority.NORMAL).url
    engine.aws.sqs.send_message(QueueUrl=url, MessageBody=forge(forged))  # type: ignore[operator]

    capsys.readouterr()
    engine.drain()

    # Never ran, never claimed: no execution, no run record for the victim's job
    assert engine.recorder.runs_of(job_id) == []
    assert engine.parts.runs.get(job_id, when) is None
    # Parked with the reason, unsigned; counted
    (letter,) = dead_letters(engine)
    assert str(letter["reason"]).startswith("refused: the run message")
    assert "sig" not in letter["body"]  # type: ignore[operator]
    assert Metric.MESSAGES_REFUSED in capsys.readouterr().out
    # A redrive leaves it where it is
    code = main(["dlq", "redrive", "--run-id", run_id(job_id, when)])
    out = capsys.readouterr().out
    assert "the message is not signed by duetime: never sent back" in out
    assert code == 0
    engine.drain()
    assert engine.recorder.runs_of(job_id) == []
    assert engine.parts.runs.get(job_id, when) is None


def test_given_a_message_signed_by_duetime_then_tampering_with_any_field_voids_it(
    engine: Engine,
) -> None:
    job_id, when = victim_job(engine)
    own = RunMessage("tenant-a", "own-job", when, 1, when, generation=3)
    genuine = json.loads(engine.parts.auth.seal(own))
    # ... the generation too: dropping it would make a message sent before a pause run.
    tampered = (("tenant", "tenant-b"), ("job_id", job_id), ("attempt", 2), ("generation", None))
    for name, value in tampered:
        url = engine.aws.settings.queue(Runtime.LAMBDA, Priority.NORMAL).url
        engine.aws.sqs.send_message(QueueUrl=url, MessageBody=json.dumps({**genuine, name: value}))
    engine.drain()

    assert engine.recorder.calls == []
    assert engine.parts.runs.get(job_id, when) is None
    assert len(dead_letters(engine)) == 4


def test_given_rotated_keys_then_messages_signed_with_the_old_key_still_run() -> None:
    old = MessageAuth([b"old-key"])
    rotated = MessageAuth.from_text("new-key, old-key")
    message = RunMessage("tenant-a", "j1", 1_000, 1, 1_000)

    assert rotated.open(old.seal(message)) == message
    assert MessageAuth.from_text("new-key").open(rotated.seal(message)) == message


def test_given_a_field_a_newer_duetime_writes_then_its_signed_message_still_runs() -> None:
    # A worker checked the signature over the message as it parsed it again: one of the code
    # before a field was added (`asked_ms`) refused every message carrying it as forged, in a
    # rolling deploy or after a rollback (an audit of the fan-out fix, round one).
    key = b"the key"
    message = RunMessage("tenant-a", "j1", 1_000, 1, 1_000)
    written = message.to_json()[:-1] + ',"a_later_field":{"n":1}}'
    mac = hmac.new(key, written.encode(), hashlib.sha256).digest()
    signature = base64.urlsafe_b64encode(mac).decode().rstrip("=")
    body = written[:-1] + f',"sig":"{signature}"}}'

    assert MessageAuth([key]).open(body) == message
    with pytest.raises(UnauthenticatedMessage):  # the field is signed: not to be added
        MessageAuth([key]).open(body.replace('"n":1', '"n":2'))


@pytest.mark.parametrize(
    "body",
    [
        '{"tenant": "t", "job_id": "j", "scheduled_ms": 1e999, "attempt": 1, "due_ms": 1}',
        '{"tenant": "t", "job_id": "j", "scheduled_ms": Infinity, "attempt": 1, "due_ms": 1}',
        '{"tenant": "t", "job_id": "j", "scheduled_ms": 1, "attempt": 1, "due_ms": 1}',  # fields
        "[" * 100_000 + "]" * 100_000,
    ],
)
def test_given_a_hostile_body_then_the_dlq_tools_and_the_worker_go_on_past_it(
    engine: Engine, body: str, capsys: pytest.CaptureFixture[str]
) -> None:
    # Found by an outside audit: a number too large for an int, or nesting too deep, raised
    # what the worker and the DLQ reader did not catch: every `duetime dlq list` and
    # `redrive` failed, and the dead runs beside it were not redriven.
    queue = engine.aws.settings.queue(Runtime.LAMBDA, Priority.NORMAL)
    engine.aws.sqs.send_message(QueueUrl=queue.dlq_url, MessageBody=body)
    engine.aws.sqs.send_message(QueueUrl=queue.url, MessageBody=body)

    engine.drain()  # the worker parks the one on the run queue
    capsys.readouterr()
    assert main(["dlq", "list"]) == 0
    listed = capsys.readouterr().out
    assert listed.count("unreadable body") == 2
    assert main(["dlq", "redrive"]) == 0
    assert "2 skipped" in capsys.readouterr().out


def test_given_an_unsigned_body_with_terminal_escapes_then_the_dlq_tools_spell_them_out(
    engine: Engine, capsys: pytest.CaptureFixture[str]
) -> None:
    # Found by an outside audit: the ids an unsigned body claims were printed raw.
    hostile = "\x1b]0;owned\x07\x1b[2J\x1b[31mFAKE"
    body = RunMessage("t", hostile, 1, 1, 1).to_json()
    queue = engine.aws.settings.queue(Runtime.LAMBDA, Priority.NORMAL)
    engine.aws.sqs.send_message(QueueUrl=queue.dlq_url, MessageBody=body)

    capsys.readouterr()
    assert main(["dlq", "list"]) == 0
    assert main(["dlq", "redrive"]) == 0
    shown = capsys.readouterr().out
    assert "\x1b" not in shown
    assert "\x07" not in shown
    assert shown.count("\\u001b]0;owned\\u0007") == 3  # job id and run id listed, one skipped
