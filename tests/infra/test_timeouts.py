"""The engine's SQS and DynamoDB clients give up on a service that accepts connections and never
answers before the sweeper function is stopped: the sweep then keeps its progress and its
partition moves on at the next sweep (docs/reliability.md "Stuck timers"). With botocore's
defaults (60 s to connect and 60 s for an answer, an attempt) the function was stopped first."""

from __future__ import annotations

import inspect
from types import SimpleNamespace
from typing import Any

import boto3
import pytest
from botocore.config import Config

from duetime.domain.messages import RunMessage
from duetime.entrypoints import api as api_handler
from duetime.services.sweep import Sweeper
from duetime.settings import Settings
from duetime.targets.clients import AwsClients
from duetime.wiring import (
    API_ATTEMPTS,
    aws_call_config,
    aws_figures,
    build,
    dynamodb_config,
    message_auth,
    sqs_config,
)
from infra.props import SchedulerProps
from tests.infra.conftest import ISSUER

BACKOFF_CAP_SECONDS = 20  # botocore's standard retry mode: at most 2**n s before attempt n + 2


def total_attempts(config: Config) -> int:
    """As botocore counts them: a client config's `max_attempts` is retries, one more in all
    (botocore.args; this test took it for the total until 2026-11-30, and the SQS client's
    worst call outlasted the budget it checked), `total_max_attempts` the total."""
    retries = dict(config.retries)  # (botocore rewrites a config's own dict in place)
    return int(retries.get("total_max_attempts") or retries["max_attempts"] + 1)


def worst_call_seconds(config: Config) -> float:
    attempts = total_attempts(config)
    per_attempt = config.connect_timeout + config.read_timeout  # a slow connect, then silence
    backoff = sum(min(2**n, BACKOFF_CAP_SECONDS) for n in range(attempts - 1))
    return float(attempts * per_attempt + backoff)


def test_a_call_to_a_silent_sqs_or_dynamodb_fails_before_the_sweeper_function_is_stopped() -> None:
    deadline_ms = inspect.signature(Sweeper).parameters["deadline_ms"].default
    props = SchedulerProps(jwt_issuer=ISSUER, jwt_audience=("duetime",))
    for config in (sqs_config(1), dynamodb_config(), aws_call_config(None)):
        # A sweep checks its deadline between groups; a group's call may start just before it.
        worst = deadline_ms / 1000 + worst_call_seconds(config)
        assert worst < props.sweeper_timeout_seconds, worst


def test_the_engine_on_aws_uses_these_timeouts_and_on_the_emulator_botocore_s() -> None:
    # On AWS a DynamoDB call waited botocore's 60 s for an answer, five times (a half-open
    # connection held a worker's claim or a sweep for minutes; until 2026-11-30). The local
    # stack's moto, on a loaded laptop, may take longer than AWS to answer: a timed-out call
    # would be tried again and add to its load.
    session = boto3.Session(
        aws_access_key_id="x", aws_secret_access_key="x", region_name="us-east-1"
    )
    settings = Settings(jobs_table="jobs", timers_table="timers", runs_table="runs", queues={})
    for endpoint_url, timeouts in ((None, (2, 3)), ("http://127.0.0.1:1", (60, 60))):
        for store in ("jobs", "timers", "runs"):
            parts = build(settings, session, endpoint_url=endpoint_url)
            config = getattr(parts, store)._client.meta.config
            assert (config.connect_timeout, config.read_timeout) == timeouts, (store, endpoint_url)


def test_the_attempts_are_those_the_docs_say() -> None:
    # reliability.md: four attempts for SQS, five for DynamoDB (on AWS).
    assert (total_attempts(sqs_config(1)), total_attempts(dynamodb_config())) == (4, 5)


def test_a_long_poll_is_not_cut_short() -> None:
    for wait in (1, 10, 20):
        assert sqs_config(wait).read_timeout > wait


def test_the_coordinator_s_and_the_signing_key_s_clients_give_up_in_time_too() -> None:
    # They kept botocore's 60 s timeouts: a silent Secrets Manager on a cold start held the
    # sweep, with its partition, past the function's timeout (an infrastructure audit).
    session = boto3.Session(
        aws_access_key_id="x", aws_secret_access_key="x", region_name="us-east-1"
    )
    settings = Settings(
        jobs_table="jobs",
        timers_table="timers",
        runs_table="runs",
        queues={},
        sweeper_function="duetime-sweeper",
    )
    parts = build(settings, session)
    launcher = parts.coordinator._launcher  # type: ignore[attr-defined]
    config = launcher._client.meta.config
    assert (config.connect_timeout, config.read_timeout) == (2, 5)
    assert aws_call_config("http://127.0.0.1:1").connect_timeout == 60  # the emulator's


def test_the_api_function_s_store_and_queue_calls_give_up_before_it_is_stopped(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # The API's clients made the engine's attempts: ~40 s at worst against the function's 29 s,
    # so a silent DynamoDB or SQS got the caller API Gateway's 5xx, not the app's 500 (an
    # outside infrastructure audit, round four).
    props = SchedulerProps(jwt_issuer=ISSUER, jwt_audience=("duetime",))
    settings = Settings(jobs_table="jobs", timers_table="timers", runs_table="runs", queues={})
    monkeypatch.setattr(Settings, "from_env", classmethod(lambda cls, environ=None: settings))
    for name, value in {"AWS_DEFAULT_REGION": "us-east-1", "AWS_ACCESS_KEY_ID": "x"}.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "x")
    api_handler.components.cache_clear()
    try:
        parts = api_handler.components()
    finally:
        api_handler.components.cache_clear()
    for client in (parts.jobs._client, parts.runs._client, parts.queue._client):
        worst = worst_call_seconds(client.meta.config)
        assert worst < props.api_timeout_seconds, (client.meta.service_model.service_name, worst)


def test_the_api_s_other_clients_give_up_before_it_is_stopped_too(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # The signing key's Secrets Manager read (~35 s), KMS (a webhook's secret: the targets'
    # bounds, ~140 s) and the operators' figures (botocore's 60 s) outlasted the API's 29 s
    # (a review of the fix above).
    props = SchedulerProps(jwt_issuer=ISSUER, jwt_audience=("duetime",))
    configs: dict[str, Config] = {}

    def client(self: boto3.Session, service: str, **kwargs: Any) -> Any:
        configs[service] = kwargs["config"]
        return SimpleNamespace(get_secret_value=lambda **_: {"SecretString": "k" * 32})

    monkeypatch.setattr(boto3.Session, "client", client)
    session = boto3.Session(region_name="us-east-1")
    arn = "arn:aws:secretsmanager:us-east-1:1:secret:key"
    settings = Settings("jobs", "timers", "runs", {}, run_signing_secret_arn=arn)
    auth = message_auth(settings, session, attempts=API_ATTEMPTS)
    auth.seal(RunMessage("t", "job", 1_795_255_200_000, 1, 1_795_255_200_000))
    AwsClients(session).kms  # noqa: B018 - built on first use
    aws_figures(settings, session)
    assert set(configs) == {"secretsmanager", "kms", "sqs"}
    for service, config in configs.items():
        assert worst_call_seconds(config) < props.api_timeout_seconds, service
