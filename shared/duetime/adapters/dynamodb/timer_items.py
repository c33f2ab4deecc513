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
    """The timer an item of bucket `minute` holds."""
    due, job_id, _ = parse_timer_sort_key(str(values["sk"]))
    runtime, _, priority = str(values.get("q", "")).partition("/")
    return Timer(
        values["tenant"],
        job_id,
        due,
        values.get("gen", 0),
        bucket_minute=None if due // 60_000 == minute else minute,
        job_bytes=values.get("bytes", 0),
        runtime=Runtime(runtime) if runtime else None,
        priority=Priority(priority) if priority else None,
        jitter_ms=values.get("jit", 0),
        stage_ms=values.get("stg", 0),
    )


def readable_timer(values: dict[str, Any], minute: int) -> Timer | None:
    """The timer an item holds, even when an attribute does not decode (found by an outside
    audit: one such item failed every read of its partition, for good). Its sort key then
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


def readable_stuck(values: dict[str, Any]) -> StuckTimer | None:
    """A stuck timer's item, or None (logged) for one that does not decode: it must not stop
    the retries of its shard's other stuck timers, or `duetime timers stuck` (an outside
    audit's suspicion)."""
    try:
        return stuck_from_values(values)
    except Exception:
        logger.exception(
            "a stuck timer item does not decode",
            extra={"pk": values.get("pk"), "sk": values.get("sk")},
        )
        return None


def stuck_from_values(values: dict[str, Any]) -> StuckTimer:
    sk = str(values["sk"])
    next_attempt = int(sk[len(RETRYING) :].partition("#")[0]) if sk.startswith(RETRYING) else None
    runtime, _, priority = str(values.get("q", "")).partition("/")
    return StuckTimer(
        timer=Timer(
            values["tenant"],
            values["job_id"],
            values["due"],
            values.get("gen", 0),
            job_bytes=values.get("bytes", 0),
            runtime=Runtime(runtime) if runtime else None,
            priority=Priority(priority) if priority else None,
            jitter_ms=values.get("jit", 0),
            stage_ms=values.get("stg", 0),
        ),
        shard=int(str(values["pk"]).rpartition("#")[2]),
        attempts=values["attempts"],
        reason=values.get("reason", ""),
        first_failed_ms=values["first_failed"],
        last_failed_ms=values["last_failed"],
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
