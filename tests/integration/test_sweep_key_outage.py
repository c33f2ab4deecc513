"""A sweeper that cannot read the run messages' signing key (Secrets Manager throttling, a 5xx,
no answer) on moto: no timer is to blame, so none is parked, as when SQS takes no request.

Found by an outside audit (round 29): the key is read on the first seal, and botocore's error
went through the SQS adapter raw. The hand-over took it for each timer's own failure, split
every group down to single timers (reading the key again for each) and parked them all with an
attempt counted; after two hours they were quarantined. A silent Secrets Manager held the
sweep past the function's 90 s, one ~28 s read per split group."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from dataclasses import dataclass, field, replace
from typing import Any

import boto3
import pytest
import time_machine
from botocore.exceptions import ClientError, EndpointConnectionError
from moto import mock_aws

from duetime import wiring
from duetime.domain.timeutil import rfc3339_ms, to_ms
from duetime.entrypoints import sweeper as sweeper_handler
from duetime.entrypoints import worker as worker_handler
from duetime.resources import create_resources
from duetime.wiring import Components, build
from tests.conftest import REGION, Aws
from tests.integration.conftest import RECORDER, START, Engine

START_MS = to_ms(START)
# A silent Secrets Manager: the engine's client gives up after 4 attempts of 2 s to connect and
# 5 s for an answer (duetime.wiring.aws_call_config).
SILENT_READ_SECONDS = 28


@dataclass
class Outage:
    """Secrets Manager's GetSecretValue failing (a botocore before-call hook) while `on`."""

    on: bool = False
    kind: str = "throttle"
    reads: int = 0
    wait: Any = None  # called before failing: the time a silent service holds a read

    def __call__(self, **_: Any) -> None:
        if not self.on:
            return
        self.reads += 1
        if self.wait is not None:
            self.wait()
        if self.kind == "throttle":
            answer: Any = {
                "Error": {"Code": "ThrottlingException", "Message": "Rate exceeded"},
                "ResponseMetadata": {"HTTPStatusCode": 400},
            }
            raise ClientError(answer, "GetSecretValue")
        raise EndpointConnectionError(endpoint_url="https://secretsmanager.us-east-1.amazonaws.com")


@dataclass
class Cold:
    """The API (its key read before the outage) and a sweeper container started during it:
    two functions, two component sets; one shard."""

    engine: Engine
    sweeper: Components
    outage: Outage = field(default_factory=Outage)


@pytest.fixture
def cold(aws_env: None, monkeypatch: pytest.MonkeyPatch) -> Iterator[Cold]:
    with mock_aws():
        session = boto3.Session(region_name=REGION)
        dynamodb, sqs = session.client("dynamodb"), session.client("sqs")
        settings = create_resources(
            dynamodb, sqs, timer_shards=1, allow_private_targets=True, require_https=False
        )
        secrets = session.client("secretsmanager")
        arn = secrets.create_secret(Name="run-key", SecretString="k" * 32)["ARN"]
        settings = replace(settings, run_signing_key="", run_signing_secret_arn=arn)
        outage = Outage()
        session.events.register("before-call.secrets-manager.GetSecretValue", outage)
        for name, value in settings.to_env().items():
            monkeypatch.setenv(name, value)
        wiring.components.cache_clear()
        RECORDER.calls.clear()
        with time_machine.travel(START, tick=False) as clock:
            api = build(settings, session, jitter=lambda: 0.5, release_sleep=clock.shift)
            api.auth.seal  # noqa: B018 - (a bound method: nothing read yet)
            swept = build(settings, session, jitter=lambda: 0.5, release_sleep=clock.shift)
            monkeypatch.setattr(sweeper_handler, "components", lambda: swept)
            monkeypatch.setattr(worker_handler, "components", lambda: api)
            engine = Engine(Aws(session, dynamodb, sqs, settings), api, clock, RECORDER)
            yield Cold(engine, swept, outage)
        wiring.components.cache_clear()


def minutes(cold: Cold, count: int) -> None:
    """One sweep a minute, then the workers drain the queues. A sweep stopped by the outage
    fails its invocation (the shard's sweep error alarm): so it should."""
    for _ in range(count):
        with contextlib.suppress(RuntimeError):
            cold.engine.tick()
        cold.engine.advance(60)
        cold.engine.drain()


@pytest.mark.parametrize("kind", ["throttle", "no_answer"])
def test_given_the_signing_key_unreadable_for_minutes_then_no_timer_is_parked_and_all_run_after(
    cold: Cold, kind: str
) -> None:
    # Given six one-offs due in four minutes and a per-minute chain, and a cold sweeper
    e = cold.engine
    one_offs = [
        e.submit({"schedule": {"at": rfc3339_ms(START_MS + 240_000 + i)}}) for i in range(6)
    ]
    chain = e.submit({"schedule": {"cron": "* * * * *"}})
    # When Secrets Manager fails every read for eight minutes, one sweep a minute
    cold.outage.kind, cold.outage.on = kind, True
    minutes(cold, 8)
    cold.outage.on = False
    # Then nothing was parked (no attempt counted: it is no timer's fault), the key was asked
    # for at most once a sweep, and the next sweep hands everything over
    assert cold.sweeper.sweeper.stuck() == []
    assert 1 <= cold.outage.reads <= 8
    minutes(cold, 1)
    ran = {c.job_id for c in e.recorder.calls}
    assert set(one_offs) <= ran
    back = START_MS + 8 * 60_000  # (its occurrences missed meanwhile: its catch-up policy's)
    assert any(ms >= back for ms in e.recorder.runs_of(chain))


def test_given_a_page_of_timers_and_the_key_unreadable_then_one_sweep_reads_it_once(
    cold: Cold,
) -> None:
    # Given a page of 40 one-offs due (four SendMessageBatch calls, sent in parallel)
    e = cold.engine
    for i in range(40):
        e.submit({"schedule": {"at": rfc3339_ms(START_MS + 240_000 + i * 100)}})
    e.advance(300)
    cold.outage.on = True
    # When one sweep meets them with the key unreadable
    report = cold.sweeper.sweeper.sweep_shard(0)
    # Then it reads the key once and parks none (until 2026-12-01: ~80 reads, 40 parked)
    assert (cold.outage.reads, report.parked, report.messages_sent) == (1, 0, 0)
    assert len(report.errors) == 1
    assert "signed" in report.errors[0]


def test_given_a_silent_secrets_manager_then_the_sweep_ends_inside_its_function_time(
    cold: Cold,
) -> None:
    # Given 20 one-offs due in one minute, and a Secrets Manager that never answers
    e = cold.engine
    for i in range(20):
        e.submit({"schedule": {"at": rfc3339_ms(START_MS + 330_000 + i * 500)}})
    cold.outage.kind, cold.outage.on = "no_answer", True
    cold.outage.wait = lambda: e.advance(SILENT_READ_SECONDS)
    e.advance(240)
    # When the shard is swept
    report = cold.sweeper.sweeper.sweep_shard(0)
    # Then one read is waited for, not one per group of a split, and the sweep stops within
    # the sweeper function's 90 s (until 2026-12-01: ~140 s, killed holding its partition)
    assert report.duration_ms <= 90_000
    assert cold.outage.reads == 1
    assert report.parked == 0
