"""Settings from the environment: round trip, and clear errors for what is missing or wrong."""

from __future__ import annotations

import pytest

from duetime.domain.jobs import Priority, Runtime
from duetime.settings import Env, QueueUrls, Quotas, Settings, queue_key

SETTINGS = Settings(
    "j",
    "t",
    "r",
    {queue_key(r, p): QueueUrls(f"u/{r}/{p}", f"d/{r}/{p}") for r in Runtime for p in Priority},
    timer_shards=16,
    lookahead_minutes=2,
    claim_lead_ms=250,
)


def test_settings_round_trip_through_the_environment() -> None:
    assert Settings.from_env(SETTINGS.to_env()) == SETTINGS


@pytest.mark.parametrize(
    ("name", "value", "message"),
    [
        (Env.QUEUES, "{oops", "DUETIME_QUEUES is not valid queue JSON"),
        (Env.QUEUES, '{"lambda/high": {"url": "u", "dlq_url": "d"}}', "DUETIME_QUEUES lacks"),
        (Env.LOOKAHEAD_MINUTES, "14", "DUETIME_LOOKAHEAD_MINUTES must be a whole number"),
        (Env.TIMER_SHARDS, "eight", "DUETIME_TIMER_SHARDS must be a whole number"),
        (Env.TIMER_SHARDS, "0", "DUETIME_TIMER_SHARDS must be a whole number"),
        (Env.CLAIM_LEAD_MS, "2001", "DUETIME_CLAIM_LEAD_MS must be a whole number from 0 to 2000"),
        # digits to str.isdigit, not ASCII: a bare ValueError, or 60 (found by an outside audit)
        (Env.CLAIM_LEAD_MS, "²", "DUETIME_CLAIM_LEAD_MS must be a whole number"),
        (Env.CLAIM_LEAD_MS, "٦٠", "DUETIME_CLAIM_LEAD_MS must be a whole number"),
    ],
)
def test_a_bad_setting_is_named(name: str, value: str, message: str) -> None:
    with pytest.raises(RuntimeError, match=message):
        Settings.from_env({**SETTINGS.to_env(), name: value})


def test_every_missing_variable_is_named_at_once() -> None:
    env = SETTINGS.to_env()
    del env[Env.JOBS_TABLE], env[Env.RUNS_TABLE]
    with pytest.raises(RuntimeError, match="DUETIME_JOBS_TABLE, DUETIME_RUNS_TABLE"):
        Settings.from_env(env)


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("DUETIME_MIN_RATE_SECONDS", "\u0666\u0660"),  # Arabic-Indic 60
        ("DUETIME_SUBMISSION_BURST", "\uff11\uff10"),  # full-width 10
        ("DUETIME_MAX_ACTIVE_RECURRING_JOBS", "1_0"),
        ("DUETIME_SUBMISSIONS_PER_SECOND", "1_0.5"),
    ],
)
def test_a_quota_in_other_than_ascii_digits_is_refused_naming_it(name: str, value: str) -> None:
    # int() and float() read them (found by a review: the other settings refuse them).
    with pytest.raises(RuntimeError, match=name):
        Quotas.from_env({name: value})
