"""What every submission checks, alone or in a batch (duetime.services.jobs, .batch): the
request's fingerprint (for its Idempotency-Key) and the deployment's shortest rate."""

from __future__ import annotations

import hashlib
import json

from duetime.domain.errors import COUNT_QUOTA_RETRY_AFTER_SECONDS, QuotaExceeded
from duetime.domain.jobs import JobSpec, spec_to_dict
from duetime.domain.schedule import Rate
from duetime.settings import Quotas


def _fingerprint(spec: JobSpec) -> str:
    canonical = json.dumps(spec_to_dict(spec), sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(canonical.encode()).hexdigest()


def _check_min_rate(spec: JobSpec, quotas: Quotas) -> None:
    schedule = spec.schedule
    if isinstance(schedule, Rate) and schedule.seconds < quotas.min_rate_seconds:
        raise QuotaExceeded(
            f"rate_seconds must be at least {quotas.min_rate_seconds} for this deployment",
            COUNT_QUOTA_RETRY_AFTER_SECONDS,
            field="schedule.rate_seconds",
        )
