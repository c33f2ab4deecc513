"""The items of the timers table, keys and values: a timer, a stuck timer, and the sweep's
progress (a partition's state, a shard's state, the shard count)."""

from __future__ import annotations

from typing import Any

from duetime.domain.jobs import Priority, Runtime
from duetime.domain.timers import (
    PartitionState,
    StuckTimer,
    Timer,
    parse_timer_sort_key,
    timer_partition,
)
from duetime.observability import logger
from duetime.settings import queue_key


def timer_values(timer: Timer, shard: int, ttl_seconds: int) -> dict[str, Any]:
    """A timer's item: `pk = <bucket>#<shard>`, `sk = <due>#<job id>#<generation>`, the job's
    size and a one-off's queue when known, and a TTL of `ttl_seconds` after it is due."""
    values: dict[str, Any] = {
        "pk": timer_partition(timer.bucket, shard),
        "sk": timer.sort_key,
        "tenant": timer.tenant,
        "gen": timer.generation,
        "expires_at": max(timer.due_ms // 1000, timer.bucket * 60) + ttl_seconds,
    }
    if timer.job_bytes:
        values["bytes"] = timer.job_bytes
    if timer.runtime is not None and timer.priority is not None:
        values["q"] = queue_key(timer.runtime, timer.priority)
    if timer.jitter_ms:
        values["jit"] = timer.jitter_ms
    if timer.stage_ms:
        values["stg"] = timer.stage_ms
    return values


def timer_from_values(values: dict[str, Any], minute: int) -> Timer:
    """The timer an item of bucket `minute` holds. Its sort key names it (due, job and
    generation: the attributes are copies); an attribute of the wrong type raises, so the item
    is read as one that does not decode (`readable_timer`; until 2026-12-01 a string `bytes`
    or `jit` went through, and raised at every sweep of its partition, before the hand-over
    could park it: an outside audit)."""
    due, job_id, generation = parse_timer_sort_key(str(values["sk"]))
    if generation is None:  # a key from before the generation was part of it
        generation = _number(values, "gen", None)
    runtime, _, priority = _text(values, "q").partition("/")
    return Timer(
        _text(values, "tenant", None),
        job_id,
        due,
        generation,
        bucket_minute=None if due // 60_000 == minute else minute,
        job_bytes=_number(values, "bytes"),
        runtime=Runtime(runtime) if runtime else None,
        priority=Priority(priority) if priority else None,
        jitter_ms=_number(values, "jit"),
        stage_ms=_number(values, "stg"),
    )


def _number(values: dict[str, Any], name: str, default: int | None = 0) -> int:
    """An item's whole-number attribute; `default` when it has none (None: it must have it).
    TypeError for another type (a string, a bool, a fraction), KeyError when it must and has
    none."""
    value = values.get(name, default)
    if value is None:
        raise KeyError(name)
    if type(value) is not int:
        raise TypeError(f"the item's {name!r} is not a whole number: {value!r}")
    return value


def _text(values: dict[str, Any], name: str, default: str | None = "") -> str:
    """An item's string attribute, as `_number` reads a number."""
    value = values.get(name, default)
    if value is None:
        raise KeyError(name)
    if not isinstance(value, str):
        raise TypeError(f"the item's {name!r} is not a string: {value!r}")
    return value


def readable_timer(values: dict[str, Any], minute: int) -> Timer | None:
    """The timer an item holds, even when an attribute does not decode or has the wrong type
    (found by an outside audit: one such item failed every read of its partition, for good;
    the wrong type since 2026-12-01). Its sort key then
    names it, with no queue: its hand-over reads the job (a timer's other attributes are
    copies of the job's), and one whose job cannot be read that way either (no tenant) is
    parked like any timer whose hand-over fails. None: not even its sort key reads (logged;
    the partition goes on without it)."""
    try:
        return timer_from_values(values, minute)
    except Exception:
        logger.exception("a timer item does not decode", extra={"sk": values.get("sk")})
    try:
        due, job_id, generation = parse_timer_sort_key(str(values["sk"]))
    except (KeyError, ValueError):
        return None
    tenant = values.get("tenant")
    return Timer(
        tenant if isinstance(tenant, str) else "",
        job_id,
        due,
        generation or 0,
        bucket_minute=None if due // 60_000 == minute else minute,
    )


# Stuck timers: pk `stuck#<shard>`; sk `r#<next attempt ms>#<timer sort key>` while they are
# retried (a range query finds those due), `q#<timer sort key>` once quarantined.
RETRYING = "r#"
QUARANTINED = "q#"
MAX_STUCK_REASON_CHARS = 1000


def stuck_partition(shard: int) -> str:
    return f"stuck#{shard}"


def stuck_key(stuck: StuckTimer) -> dict[str, Any]:
    if stuck.next_attempt_ms is None:
        sk = QUARANTINED + stuck.timer.sort_key
    else:
        sk = f"{RETRYING}{stuck.next_attempt_ms:013d}#{stuck.timer.sort_key}"
    return {"pk": stuck_partition(stuck.shard), "sk": sk}


def stuck_to_values(stuck: StuckTimer) -> dict[str, Any]:
    timer = stuck.timer
    return stuck_key(stuck) | {
        "tenant": timer.tenant,
        "job_id": timer.job_id,
        "due": timer.due_ms,
        "gen": timer.generation,
        "bytes": timer.job_bytes,
        "q": queue_key(timer.runtime, timer.priority) if timer.runtime and timer.priority else "",
        "jit": timer.jitter_ms,
        "stg": timer.stage_ms,
        "attempts": stuck.attempts,
        "reason": stuck.reason[:MAX_STUCK_REASON_CHARS],
        "first_failed": stuck.first_failed_ms,
        "last_failed": stuck.last_failed_ms,
    }


def _job_copies(values: dict[str, Any]) -> dict[str, Any]:
    """A parked timer's copies of its job's settings, or none when one has the wrong type: its
    retry's hand-over then reads the job, as for a live timer (`readable_timer`; a review the
    day the types were checked: such an entry was dropped, never retried nor listed)."""
    try:
        runtime, _, priority = _text(values, "q").partition("/")
        return {
            "job_bytes": _number(values, "bytes"),
            "runtime": Runtime(runtime) if runtime else None,
            "priority": Priority(priority) if priority else None,
            "jitter_ms": _number(values, "jit"),
            "stage_ms": _number(values, "stg"),
        }
    except (TypeError, ValueError):
        logger.warning("a stuck timer's copies of its job do not decode: read from the job")
        return {}


def readable_stuck(values: dict[str, Any]) -> StuckTimer | None:
    """A stuck timer's item, or None (logged) for one that does not decode (an attribute of
    the wrong type too): it must not stop the retries of its shard's other stuck timers, or
    `duetime timers stuck` (an outside audit's suspicion)."""
    try:
        return stuck_from_values(values)
    except Exception:
        logger.exception(
            "a stuck timer item does not decode",
            extra={"pk": values.get("pk"), "sk": values.get("sk")},
        )
        return None


def stuck_from_values(values: dict[str, Any]) -> StuckTimer:
    """A stuck timer's item. Its timer is named by the timer's sort key inside its own (the
    key it is parked, retried and unparked by); an attribute of the wrong type raises (see
    `timer_from_values`: until 2026-12-01 a string `due` raised out of the shard's retries,
    at every sweep, and its other parked timers were never retried)."""
    sk = _text(values, "sk", None)
    if sk.startswith(RETRYING):
        when, _, timer_key = sk[len(RETRYING) :].partition("#")
        next_attempt: int | None = int(when)
    else:
        timer_key, next_attempt = sk.removeprefix(QUARANTINED), None
    due, job_id, generation = parse_timer_sort_key(timer_key)
    if generation is None:
        generation = _number(values, "gen", None)
    return StuckTimer(
        timer=Timer(_text(values, "tenant", None), job_id, due, generation, **_job_copies(values)),
        shard=int(_text(values, "pk", None).rpartition("#")[2]),
        attempts=_number(values, "attempts", None),
        reason=_text(values, "reason"),
        first_failed_ms=_number(values, "first_failed", None),
        last_failed_ms=_number(values, "last_failed", None),
        next_attempt_ms=next_attempt,
    )


# Sweep progress: one `~sweep` item per partition, one state item per shard, one shard count.
SWEEP_SK = "~sweep"  # sorts after every `<13 digits>#...` timer key in the same partition
# How many shards the sweeps cover (the most ever configured): one item for the deployment.
CONFIG_KEY = {"pk": {"S": "sweeper"}, "sk": {"S": "shards"}}


def shard_state_key(shard: int) -> dict[str, Any]:
    return {"pk": {"S": f"sweeper#{shard}"}, "sk": {"S": "state"}}


def partition_state_from_values(minute: int, shard: int, values: dict[str, Any]) -> PartitionState:
    return PartitionState(
        minute=minute,
        shard=shard,
        watermark=values.get("watermark"),
        complete=bool(values.get("complete", False)),
        owner=values.get("owner"),
        lease_until_ms=values.get("lease_until", 0),
        stalls=values.get("stalls", 0),
    )
