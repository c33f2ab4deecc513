"""Jobs and runs as the API's JSON. Pure: the current time is an argument.

The shapes are described in duetime.api.openapi; a test validates real responses against it.
"""

from __future__ import annotations

from typing import Any

from duetime.domain.ids import run_id
from duetime.domain.jobs import Job, JobStatus, spec_to_dict
from duetime.domain.runs import TERMINAL_RUN_STATUSES, Run
from duetime.domain.schedule import next_occurrence
from duetime.domain.signing import TenantSecrets
from duetime.domain.timeutil import from_ms, rfc3339, rfc3339_ms
from duetime.ports import Page
from duetime.services.jobs import JobView


def job_json(view: JobView, now_ms: int) -> dict[str, Any]:
    job = view.job
    return {
        "id": job.id,
        **spec_to_dict(job.spec),
        "status": view.status.value,
        "version": job.version,
        "next_run_at": next_run_at(job, view.status, now_ms),
        "created_at": rfc3339_ms(job.created_ms),
        "updated_at": rfc3339_ms(job.updated_ms),
        "last_run": run_json(view.last_run) if view.last_run is not None else None,
    }


def next_run_at(job: Job, status: JobStatus, now_ms: int) -> str | None:
    """When the job runs next: a recurring job's next occurrence at or after now (a completed
    one's too: its last occurrences are handed over before they are due), a one-off's instant
    until its run has finished (it can be in the past while that run is in progress or
    retrying); None once the job is paused or finished."""
    if status not in (JobStatus.SCHEDULED, JobStatus.COMPLETED):
        return None
    if not job.spec.recurring:
        return rfc3339_ms(job.next_due_ms) if job.next_due_ms is not None else None
    found = next_occurrence(
        job.spec.schedule, created_at=from_ms(job.created_ms), after=from_ms(now_ms - 1)
    )
    return rfc3339(found) if found is not None else None


def run_json(run: Run) -> dict[str, Any]:
    finished = run.status in TERMINAL_RUN_STATUSES
    return {
        "run_id": run.run_id,
        "scheduled_for": rfc3339_ms(run.scheduled_ms),
        "due_at": rfc3339_ms(run.due_ms if run.due_ms is not None else run.scheduled_ms),
        "status": run.status.value,
        "attempts": run.attempt,
        "started_at": _instant(run.started_ms),
        # The last attempt of a retrying run has finished, the run has not.
        "finished_at": _instant(run.finished_ms) if finished else None,
        "lateness_ms": run.lateness_ms,
        "early_wait_ms": run.early_wait_ms,
        "error": run.error,
    }


def jobs_page_json(items: list[JobView], cursor: str | None, now_ms: int) -> dict[str, Any]:
    return {"items": [job_json(view, now_ms) for view in items], "next_cursor": cursor}


def runs_page_json(page: Page[Run]) -> dict[str, Any]:
    return {"items": [run_json(run) for run in page.items], "next_cursor": page.cursor}


def run_now_json(job_id: str, scheduled_ms: int) -> dict[str, Any]:
    return {
        "job_id": job_id,
        "run_id": run_id(job_id, scheduled_ms),
        "scheduled_for": rfc3339_ms(scheduled_ms),
    }


def webhook_secret_json(secrets: TenantSecrets, now_ms: int) -> dict[str, Any]:
    """The tenant's signing secrets. The previous secret shows only while it still signs."""
    previous = secrets.previous_valid(now_ms)
    return {
        "secret": secrets.secret,
        "previous_secret": secrets.previous_secret if previous else None,
        "rotated_at": _instant(secrets.rotated_ms),
        "previous_expires_at": _instant(secrets.previous_expires_ms) if previous else None,
    }


def _instant(ms: int | None) -> str | None:
    return None if ms is None else rfc3339_ms(ms)
