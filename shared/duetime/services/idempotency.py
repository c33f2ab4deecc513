"""What an Idempotency-Key is bound to, and how long: the request a key was first used for
(a job submission's body, or a run-now's run), so that a repeat is told from another request
with the same key. Also the records that reserve a run-now's instant, kept beside the keys.
"""

from __future__ import annotations

import hashlib
import json

from duetime.domain.jobs import JobSpec, spec_to_dict

IDEMPOTENCY_SECONDS = 86_400


def key_expires_at(now_ms: int) -> int:
    """The whole second (DynamoDB TTL's unit) at which a record made at `now_ms` expires:
    rounded up, so that a key holds at least its 24 hours."""
    return -(-now_ms // 1000) + IDEMPOTENCY_SECONDS


# A fingerprint's version prefix. Unprefixed: every field's value, defaults included (before
# 2026-11-28), so a field added with a default changed the fingerprint of every body.
_FINGERPRINT = "2:"


def fingerprint(spec: JobSpec) -> str:
    """What an Idempotency-Key is bound to: the canonical job body without the fields that have
    their default value (and the schedule's and target's empty ones), so a retry made across a
    deployment that added a field with such a default still replays."""
    defaults = spec_to_dict(JobSpec(schedule=spec.schedule, target=spec.target))
    fields = spec_to_dict(spec)
    canonical = {name: v for name, v in fields.items() if v != defaults[name]}
    for name in ("schedule", "target"):  # without their empty fields (`headers: {}`)
        canonical[name] = {k: v for k, v in fields[name].items() if v not in (None, {}, [])}
    return _FINGERPRINT + _digest(canonical)


def same_request(bound: str, spec: JobSpec) -> bool:
    """Whether a key bound to `bound` was claimed by a request for `spec` (a fingerprint of
    either version)."""
    if bound.startswith(_FINGERPRINT):
        return bound == fingerprint(spec)
    return bound == _digest(spec_to_dict(spec))


# What a key used with `POST /jobs/{id}/run` is bound to: the instant of the run it asked for.
_RUN_NOW = "run-now:"


def run_now_binding(instant: int, asked: int) -> str:
    """What a run-now's key is bound to: its run's instant and the moment it was asked for (the
    instant is that moment, or a few milliseconds after when another run had it; then only,
    both are written, so that code before 2026-11-29 reads the usual binding)."""
    return f"{_RUN_NOW}{instant}" if instant == asked else f"{_RUN_NOW}{instant}@{asked}"


# What a refused run-now's key holds for a moment (JobService._replay_refused): no
# binding (run_now_bound) and no fingerprint (a hex digest).
RUN_NOW_REFUSED = "run-now refused"


def run_now_slot(job_id: str, instant: int) -> str:
    """The record that reserves `instant` for one run-now of job `job_id`, kept with the
    Idempotency-Keys under a name no key can have (a key is visible ASCII: no spaces)."""
    return f" run-now {job_id} {instant}"


def run_now_bound(bound: str) -> tuple[int, int] | None:
    """The instant of the run a key bound by a run-now asked for, and the moment it was asked
    (the instant itself in a binding made before 2026-11-29, which had only that); None for a
    job submission."""
    if not bound.startswith(_RUN_NOW):
        return None
    instant, _, asked = bound[len(_RUN_NOW) :].partition("@")
    return int(instant), int(asked or instant)


def _digest(canonical: object) -> str:
    text = json.dumps(canonical, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()
