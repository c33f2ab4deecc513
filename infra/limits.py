"""What the deployed code accepts of a setting, checked at synth by `SchedulerProps`: a value
the functions would refuse at cold start (duetime.settings reads their environment with
`from_env`) fails the synth instead of every invocation after the deploy (found by an outside
audit: a hot window of 4,000 days, or a quota of 0 submissions a second, synthesized cleanly).
No CDK import here."""

from __future__ import annotations

from dataclasses import fields
from datetime import date

from duetime.settings import QuotaEnv, Quotas

# Settings.from_env reads DUETIME_RUN_TTL_SECONDS (the hot window) as 1 s .. 3,650 days.
MAX_HOT_WINDOW_DAYS = 3650


def check_tenant_quotas(quotas: Quotas) -> None:
    """Each quota as the API function reads it back (`Quotas.from_env` of the environment the
    CDK app sets, `Quotas.to_env`): its own ranges, so the two cannot drift apart."""
    environment = quotas.to_env()
    for quota in fields(Quotas):
        name = getattr(QuotaEnv, quota.name.upper())  # QuotaEnv names them as the fields
        try:
            Quotas.from_env({name: environment[name]})
        except RuntimeError as refused:
            raise ValueError(
                f"tenant_quotas.{quota.name} ({getattr(quotas, quota.name)!r}): the API "
                f"function would refuse it at cold start: {refused}"
            ) from None


def check_calendar_date(name: str, text: str) -> None:
    """A real day written YYYY-MM-DD (Athena's date projection reads it so)."""
    try:
        valid = date.fromisoformat(text).isoformat() == text  # not 20250101, nor 2025-W01
    except (TypeError, ValueError):
        valid = False
    if not valid:
        raise ValueError(f"{name} must be a calendar date, YYYY-MM-DD: {text!r}")
