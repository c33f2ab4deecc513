"""Identifiers: job ids, run ids and the SQS message group of a tenant.

The timers' keys (bucket minutes, shards, partition and sort keys) are in duetime.domain.timers.
"""

from __future__ import annotations

import hashlib
import re
import threading
from collections.abc import Callable

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


class JobIds:
    """New job ids that increase within a millisecond too (a monotonic ULID: the millisecond's
    first takes fresh entropy, each next one a random step more), so the jobs of one request
    (a batch) list newest first in the reverse of their order (until 2026-12-01 at random; a
    new user's round). `entropy(n)`: n random bytes."""

    def __init__(self, entropy: Callable[[int], bytes]) -> None:
        self._entropy = entropy
        self._lock = threading.Lock()
        self._last = (-1, 0)  # (milliseconds, entropy) of the last id

    def new(self, now_ms: int) -> str:
        with self._lock:
            ms, value = self._last
            value += 1 + int.from_bytes(self._entropy(2), "big")  # (not guessable from the last)
            if now_ms != ms or value >= 1 << 80:
                value = int.from_bytes(self._entropy(10), "big")
            self._last = (now_ms, value)
        return new_job_id(now_ms, value.to_bytes(10, "big"))


def run_id(job_id: str, scheduled_ms: int) -> str:
    """A run is one occurrence of a job: duplicates of one occurrence share this id."""
    return f"{job_id}-{scheduled_ms}"


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
