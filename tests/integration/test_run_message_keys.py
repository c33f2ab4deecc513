"""The run-message keys (duetime.wiring.message_auth) are read when a message is first signed
or verified: the coordinator, which does neither, runs without the key or a grant to it (an
outside audit found it granted the key it never used)."""

from __future__ import annotations

from dataclasses import replace

import pytest

from duetime import wiring
from duetime.domain.messages import MessageAuth, RunMessage
from duetime.services.coordinator import Coordinator
from tests.conftest import Aws

MESSAGE = RunMessage("tenant-a", "01JOB", 1_000, 1, 1_000)


def test_without_a_key_the_engine_builds_and_only_signing_says_what_is_missing(aws: Aws) -> None:
    settings = replace(aws.settings, run_signing_key="", run_signing_secret_arn="")
    parts = wiring.build(settings, aws.session)

    assert isinstance(parts.coordinator, Coordinator)
    parts.coordinator.tick()  # it signs nothing
    with pytest.raises(RuntimeError, match="no key for run messages"):
        parts.auth.seal(MESSAGE)


def test_a_key_in_secrets_manager_is_read_on_first_use_and_kept(aws: Aws) -> None:
    secrets = aws.session.client("secretsmanager")
    arn = secrets.create_secret(Name="run-key", SecretString="at-build")["ARN"]
    settings = replace(aws.settings, run_signing_key="", run_signing_secret_arn=arn)
    auth = wiring.message_auth(settings, aws.session)
    secrets.put_secret_value(SecretId=arn, SecretString="at-first-use, older")

    sealed = auth.seal(MESSAGE)
    secrets.put_secret_value(SecretId=arn, SecretString="later")

    assert MessageAuth.from_text("at-first-use").open(sealed) == MESSAGE  # read then
    assert auth.open(sealed) == MESSAGE  # and kept
    assert auth.open(MessageAuth.from_text("older").seal(MESSAGE)) == MESSAGE
