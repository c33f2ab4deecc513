"""Conversions between domain objects and DynamoDB items (low-level attribute-value form)."""

from __future__ import annotations

import json
from decimal import Decimal
from typing import Any

from boto3.dynamodb.types import TypeDeserializer, TypeSerializer

from duetime.domain.jobs import (
    Catchup,
    CatchupMode,
    Job,
    JobSpec,
    JobStatus,
    Priority,
    RetryPolicy,
    Runtime,
)
from duetime.domain.overlap import Overlap
from duetime.domain.runs import Attempt, Lease, Run, RunStatus, UnreadableRun
from duetime.domain.schedule import parse_schedule, schedule_to_dict
from duetime.domain.targets import read_target, target_to_dict

_serializer = TypeSerializer()
_deserializer = TypeDeserializer()


def to_item(values: dict[str, Any]) -> dict[str, Any]:
    return {k: _serializer.serialize(v) for k, v in values.items() if v is not None}


def from_item(item: dict[str, Any]) -> dict[str, Any]:
    return {k: _plain(_deserializer.deserialize(v)) for k, v in item.items()}


def _plain(value: Any) -> Any:
    if isinstance(value, Decimal):
        return int(value) if value == value.to_integral_value() else float(value)
    if isinstance(value, list):
        return [_plain(v) for v in value]
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    return value


def job_to_values(job: Job) -> dict[str, Any]:
    spec = job.spec
    # The spec is stored as one compact JSON string: smaller than a nested map, and never
    # queried attribute by attribute.
    spec_json = json.dumps(
        {
            "schedule": schedule_to_dict(spec.schedule),
            "target": target_to_dict(spec.target),
            "payload": spec.payload,
            "name": spec.name,
            "priority": spec.priority.value,
            "runtime": spec.runtime.value,
            "retry": [
                spec.retry.max_attempts,
                spec.retry.backoff_seconds,
                spec.retry.max_backoff_seconds,
            ],
            "timeout": spec.timeout_seconds,
            "catchup": [spec.catchup.mode.value, spec.catchup.window_seconds],
            **({"jitter": spec.jitter_seconds} if spec.jitter_seconds else {}),
            **({"stage": spec.stage_seconds} if spec.stage_seconds else {}),
            # Absent on jobs stored before the overlap policy, and for `allow`.
            **({"overlap": spec.overlap.value} if spec.overlap != Overlap.ALLOW else {}),
            **({"description": spec.description} if spec.description is not None else {}),
            **({"tags": dict(spec.tags)} if spec.tags else {}),
        },
        separators=(",", ":"),
    )
    return {
        "tenant": job.tenant,
        "id": job.id,
        "spec": spec_json,
        "status": job.status.value,
        "created_ms": job.created_ms,
        "updated_ms": job.updated_ms,
        "gen": job.generation,
        "gen_ms": job.generation_ms,
        "next_due_ms": job.next_due_ms,
        "expires_at": job.expires_at,
        "cancel_reason": job.cancel_reason,
        "ver": job.version,
        "deps": job.has_dependents,  # absent (None) on items written before the mark
        "linked_ms": job.linked_ms,
        "resumed_ms": job.resumed_ms,
    }


def job_from_values(values: dict[str, Any]) -> Job:
    raw = json.loads(values["spec"])
    spec = JobSpec(
        schedule=parse_schedule(raw["schedule"]),
        target=read_target(raw["target"]),  # as stored: not refused by formats made stricter since
        payload=raw["payload"],
        name=raw["name"],
        priority=Priority(raw["priority"]),
        runtime=Runtime(raw["runtime"]),
        retry=RetryPolicy(raw["retry"][0], raw["retry"][1], raw["retry"][2]),
        timeout_seconds=raw["timeout"],
        catchup=Catchup(CatchupMode(raw["catchup"][0]), raw["catchup"][1]),
        jitter_seconds=raw.get("jitter", 0),
        stage_seconds=raw.get("stage", 0),
        overlap=Overlap(raw.get("overlap", Overlap.ALLOW.value)),
        description=raw.get("description"),
        tags=raw.get("tags", {}),
    )
    return Job(
        tenant=values["tenant"],
        id=values["id"],
        spec=spec,
        status=JobStatus(values["status"]),
        created_ms=values["created_ms"],
        updated_ms=values["updated_ms"],
        generation=values.get("gen", 0),
        generation_ms=values.get("gen_ms"),
        next_due_ms=values.get("next_due_ms"),
        expires_at=values.get("expires_at"),
        cancel_reason=values.get("cancel_reason"),
        version=values.get("ver", 1),
        has_dependents=values.get("deps"),
        linked_ms=values.get("linked_ms"),
        resumed_ms=values.get("resumed_ms"),
    )


def run_to_values(run: Run) -> dict[str, Any]:
    return {
        "job_id": run.job_id,
        "scheduled_ms": run.scheduled_ms,
        "tenant": run.tenant,
        "status": run.status.value,
        "attempt": run.attempt,
        # Attempts as short lists keep the record well under 1 KB (one write unit).
        "attempts": [
            [a.number, a.started_ms, a.lateness_ms, a.finished_ms, a.error, a.early_wait_ms]
            for a in run.attempts
        ],
        "lease": [run.lease.message_id, run.lease.receive_count, run.lease.until_ms]
        if run.lease
        else None,
        "expires_at": run.expires_at,
        "job_name": run.job_name,
        "target_type": run.target_type,
        "priority": run.priority,
        "runtime": run.runtime,
        "v": run.version,
        "due_ms": run.due_ms,  # left out when None (to_item)
        "asked_ms": run.asked_ms,
    }


def run_from_values(values: dict[str, Any]) -> Run:
    """A stored run record; UnreadableRun for one this version cannot read."""
    try:
        return _run(values)
    except (IndexError, KeyError, TypeError, ValueError) as exc:
        where = f"{values.get('job_id')}-{values.get('scheduled_ms')}"
        raise UnreadableRun(f"run record {where} does not decode: {exc!r}") from exc


def _run(values: dict[str, Any]) -> Run:
    lease = values.get("lease")
    return Run(
        tenant=values["tenant"],
        job_id=values["job_id"],
        scheduled_ms=values["scheduled_ms"],
        status=RunStatus(values["status"]),
        attempt=values["attempt"],
        # An attempt written before attempts carried their early wait has five entries.
        attempts=tuple(Attempt(*a[:6]) for a in values.get("attempts", [])),
        lease=Lease(lease[0], lease[1], lease[2]) if lease else None,
        expires_at=values.get("expires_at", 0),
        job_name=values.get("job_name"),
        target_type=values.get("target_type", ""),
        priority=values.get("priority", "normal"),
        runtime=values.get("runtime", "lambda"),
        version=values.get("v", 1),
        due_ms=values.get("due_ms"),
        asked_ms=values.get("asked_ms"),
    )
