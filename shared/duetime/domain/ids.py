"""Identifiers and keys: job ids, run ids, timer buckets and shards."""

from __future__ import annotations

import hashlib
import re
import zlib
from datetime import UTC, datetime

from duetime.domain.timeutil import MINUTE_MS

_CROCKFORD = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"


def new_job_id(now_ms: int, entropy: bytes) -> str:
    """A ULID: 48 bits of milliseconds + 80 bits of entropy, so ids sort by creation time."""
    if len(entropy) != 10:
        raise ValueError("a ULID needs 10 bytes of entropy")
    value = (now_ms << 80) | int.from_bytes(entropy, "big")
    chars = []
    for _ in range(26):
        chars.append(_CROCKFORD[value & 31])
        value >>= 5
    return "".join(reversed(chars))


def run_id(job_id: str, scheduled_ms: int) -> str:
    """A run is one occurrence of a job: duplicates of one occurrence share this id."""
    return f"{job_id}-{scheduled_ms}"


def parse_run_id(value: str) -> tuple[str, int]:
    job_id, _, ms = value.rpartition("-")
    if not job_id or not ms.isdigit():
        raise ValueError(f"not a run id: {value!r}")
    return job_id, int(ms)


def shard_of(job_id: str, shards: int) -> int:
    return zlib.crc32(job_id.encode()) % shards


# SQS MessageGroupId: 1..128 characters of ASCII letters, digits and punctuation (no space).
_GROUP_ID = re.compile(r"[!-~]{1,128}", re.ASCII)
_HASHED_GROUP = "~"


def message_group_id(tenant: str) -> str:
    """The SQS message group of a tenant's runs: always a value SQS accepts, stable per tenant,
    and distinct for distinct tenants. A tenant that is already a valid group id is used as
    it is (readable in the console); any other (spaces, non-ASCII, over 128 characters) is
    `~` + the SHA-256 of its UTF-8 bytes (65 characters). Tenants starting with `~` are hashed
    too, so a hashed id never equals a tenant used as it is."""
    if _GROUP_ID.fullmatch(tenant) and not tenant.startswith(_HASHED_GROUP):
        return tenant
    return _HASHED_GROUP + hashlib.sha256(tenant.encode("utf-8", "surrogatepass")).hexdigest()


def valid_message_group_id(value: str) -> bool:
    return _GROUP_ID.fullmatch(value) is not None


def minute_of(ms: int) -> int:
    """The bucket minute (minutes since the epoch) an instant falls in."""
    return ms // MINUTE_MS


def bucket_name(minute: int) -> str:
    return datetime.fromtimestamp(minute * 60, UTC).strftime("%Y%m%d%H%M")


def timer_partition(minute: int, shard: int) -> str:
    """Timer partition key: `<yyyymmddHHMM>#<shard>`."""
    return f"{bucket_name(minute)}#{shard}"


def timer_sort_key(due_ms: int, job_id: str, generation: int) -> str:
    """Timer sort key: `<due epoch ms, 13 digits>#<job id>#<generation>`, so a range query is
    a time range. The generation is part of the key: a timer written for an older generation
    of a job (a chain from before a pause and resume) sits beside the newer one and is
    dropped when swept; it can never replace it."""
    return f"{due_ms:013d}#{job_id}#{generation}"


def parse_timer_sort_key(key: str) -> tuple[int, str, int | None]:
    """(due ms, job id, generation) of a timer sort key; generation None for a key written
    before the generation was part of it."""
    due, _, rest = key.partition("#")
    job_id, sep, generation = rest.partition("#")
    return int(due), job_id, int(generation) if sep else None
