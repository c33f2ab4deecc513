"""Shared fixtures: an in-process moto account with duetime's tables and queues."""

from __future__ import annotations

import functools
import io
import logging
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import boto3
import botocore.loaders
import botocore.session
import pytest
from hypothesis import Phase, settings
from moto import mock_aws

from duetime.local.moto_fixes import make_dynamodb_writes_atomic, make_sqs_strict
from duetime.observability import logger
from duetime.resources import create_resources
from duetime.settings import Settings

REGION = "us-east-1"

# scripts/mutation.sh runs the tests with --hypothesis-profile=mutation: the first failing
# example kills a mutant, and shrinking it to the smallest one would only cost time.
settings.register_profile(
    "mutation", phases=[Phase.explicit, Phase.reuse, Phase.generate], deadline=None
)
# No per-example deadline (Hypothesis' default is 200 ms): an example takes about a
# millisecond, and one stalled by a garbage collection or a busy 2-core CI machine would fail
# its test (or make it Flaky) for nothing the code did.
settings.register_profile("default", deadline=None)
settings.load_profile("default")

# Conditional writes must be atomic, as on DynamoDB (see duetime.local.moto_fixes).
make_dynamodb_writes_atomic()
make_sqs_strict()

# Every boto3.Session made by a test (and by the code under test) shares one botocore loader:
# each new session would otherwise parse the endpoint and service-model JSON again, about
# 0.2 s a session and most of a test's set-up. The models are read-only, as they are for the
# clients of one session.
botocore.session.create_loader = functools.lru_cache(maxsize=None)(botocore.loaders.create_loader)


@pytest.fixture
def aws_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for name, value in {
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
        "AWS_SESSION_TOKEN": "testing",
        "AWS_REGION": REGION,
        "AWS_DEFAULT_REGION": REGION,
        "POWERTOOLS_SERVICE_NAME": "duetime-tests",
        "POWERTOOLS_METRICS_NAMESPACE": "duetime-tests",
        "POWERTOOLS_TRACE_DISABLED": "true",
    }.items():
        monkeypatch.setenv(name, value)
    monkeypatch.delenv("AWS_ENDPOINT_URL", raising=False)
    monkeypatch.delenv("AWS_PROFILE", raising=False)


@dataclass
class Aws:
    """boto3 clients on the moto account and the Settings of the created resources."""

    session: boto3.Session
    dynamodb: Any
    sqs: Any
    settings: Settings


@pytest.fixture
def aws(aws_env: None) -> Iterator[Aws]:
    with mock_aws():
        session = boto3.Session(region_name=REGION)
        dynamodb = session.client("dynamodb")
        sqs = session.client("sqs")
        settings = create_resources(
            dynamodb,
            sqs,
            timer_shards=4,
            allow_private_targets=True,
            require_https=False,
        )
        yield Aws(session, dynamodb, sqs, settings)


@pytest.fixture
def logged() -> Iterator[io.StringIO]:
    """The functions' logger writing to a buffer, at its default level (INFO)."""
    handler = logger.registered_handler
    assert isinstance(handler, logging.StreamHandler)
    level = logger.log_level
    buffer = io.StringIO()
    stream = handler.setStream(buffer)
    logger.setLevel(logging.INFO)
    yield buffer
    logger.setLevel(level)
    if stream is not None:
        handler.setStream(stream)
