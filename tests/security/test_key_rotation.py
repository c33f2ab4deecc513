"""Rotating the run messages' signing key as security.md says (put `new,old`, then, once every
function has restarted and no message signed before is left, `new`): a container started after
the put signs with `new`, and a worker warm from before it verifies those runs. Until
2026-12-01 a worker read its keys once for its life: it refused such runs as forged and parked
them unsigned, never redriven (5 of 7 in six minutes; an outside fault audit, round ten). Its
keys are now read again for a signature none of them made, and every 10 minutes.

On the real adapters on moto: a Secrets Manager secret, one component set per Lambda container
(duetime.wiring.build), the real sweeper and worker handlers."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, replace
from typing import Any

import boto3
import pytest
import time_machine
from moto import mock_aws

from duetime import wiring
from duetime.domain.jobs import Priority, Runtime
from duetime.domain.messages import RunMessage
from duetime.domain.timeutil import rfc3339_ms, to_ms
from duetime.entrypoints import sweeper as sweeper_handler
from duetime.entrypoints import worker as worker_handler
from duetime.resources import create_resources
from duetime.services.dead_letters import QUEUE_KEYS, DeadRuns
from duetime.settings import Settings
from duetime.wiring import Components, build
from tests.conftest import REGION, Aws
from tests.integration.conftest import RECORDER, START, Engine

START_MS = to_ms(START)
OLD, NEW = "o" * 64, "n" * 64


def probe() -> RunMessage:
    return RunMessage("t", "01JD2YV3K8QF3P5W2M7N0C9XAB", 0, 1, 0, Runtime.LAMBDA, Priority.NORMAL)


@dataclass
class Rotation:
    engine: Engine  # the API, and the worker containers: warm since before the rotation
    session: boto3.Session
    settings: Settings
    arn: str
    clock: Any

    def container(self) -> Components:
        """A function container started now (its keys read on its first message)."""
        return build(
            self.settings, self.session, jitter=lambda: 0.5, release_sleep=self.clock.shift
        )


@pytest.fixture
def rotation(aws_env: None, monkeypatch: pytest.MonkeyPatch) -> Iterator[Rotation]:
    with mock_aws():
        session = boto3.Session(region_name=REGION)
        dynamodb, sqs = session.client("dynamodb"), session.client("sqs")
        settings = create_resources(
            dynamodb, sqs, timer_shards=1, allow_private_targets=True, require_https=False
        )
        secrets = session.client("secretsmanager")
        arn = secrets.create_secret(Name="run-key", SecretString=OLD)["ARN"]
        settings = replace(settings, run_signing_key="", run_signing_secret_arn=arn)
        for name, value in settings.to_env().items():
            monkeypatch.setenv(name, value)
        wiring.components.cache_clear()
        RECORDER.calls.clear()
        with time_machine.travel(START, tick=False) as clock:
            warm = build(settings, session, jitter=lambda: 0.5, release_sleep=clock.shift)
            warm.auth.open(warm.auth.seal(probe()))  # it has run messages: its keys are read
            monkeypatch.setattr(worker_handler, "components", lambda: warm)
            monkeypatch.setattr(sweeper_handler, "components", lambda: warm)
            engine = Engine(Aws(session, dynamodb, sqs, settings), warm, clock, RECORDER)
            yield Rotation(engine, session, settings, arn, clock)
        wiring.components.cache_clear()


def test_a_rotation_as_documented_runs_what_a_new_container_signs_on_a_warm_worker(
    rotation: Rotation, monkeypatch: pytest.MonkeyPatch
) -> None:
    e = rotation.engine
    # Given a per-minute chain and a one-off in four minutes, armed before the rotation
    chain = e.submit({"schedule": {"cron": "* * * * *"}})
    one_off = e.submit({"schedule": {"at": rfc3339_ms(START_MS + 240_000)}})
    # When the operator puts `new,old` in the secret (security.md, step one), and the next
    # sweeps run on a sweeper container started after it, while the workers stay warm
    e.aws.session.client("secretsmanager").put_secret_value(
        SecretId=rotation.arn, SecretString=f"{NEW},{OLD}"
    )
    fresh = rotation.container()
    monkeypatch.setattr(sweeper_handler, "components", lambda: fresh)
    e.run_minutes(6)
    # Then every occurrence handed over meanwhile runs (the old containers are restarted
    # afterwards, as the procedure says: nothing signed in between may be lost)
    refused = [
        (d.run_id, d.letter.reason)
        for d in DeadRuns(
            fresh.jobs, fresh.runs, fresh.queue, fresh.queue.dead_letters(), fresh.auth
        ).read(QUEUE_KEYS, 100)[0]
    ]

    assert e.recorder.runs_of(one_off), f"the one-off was refused as forged: {refused}"
    assert len(e.recorder.runs_of(chain)) >= 5
    assert refused == []
