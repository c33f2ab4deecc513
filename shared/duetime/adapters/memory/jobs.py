"""The in-memory JobStore (duetime.ports)."""

from __future__ import annotations

import threading
import zlib
from collections.abc import Callable, Iterator, Sequence
from dataclasses import replace

from duetime.domain.jobs import Job, JobStatus
from duetime.domain.overlap import Gate
from duetime.ports import ConditionFailed, CounterRead, KeyCount, KeyHold, Page


class MemoryJobStore:
    def __init__(self) -> None:
        self._jobs: dict[tuple[str, str], Job] = {}
        self._keys: dict[tuple[str, str], tuple[str, str]] = {}
        self._marks: dict[tuple[str, str], str] = {}  # a key's replay token (mark_key)
        self._key_expiry: dict[tuple[str, str], int] = {}
        self._counted_keys: set[tuple[str, str]] = set()  # keys a count was taken for
        self._recurring: dict[str, int] = {}  # active recurring jobs per tenant
        self._changes: dict[str, int] = {}  # how many times each tenant's count changed
        self._gates: dict[tuple[str, str], Gate] = {}  # overlap gates by (tenant, job id)
        self._dependents: dict[tuple[str, str], set[str]] = {}  # by (tenant, upstream id)
        self._lock = threading.Lock()

    def claim_key(
        self, tenant: str, key: str, job_id: str, fingerprint: str, expires_at: int, now: int
    ) -> tuple[str, str] | None:
        with self._lock:
            existing = self._keys.get((tenant, key))
            if existing is None or self._key_expiry[(tenant, key)] <= now:
                self._keys[(tenant, key)] = (job_id, fingerprint)
                self._key_expiry[(tenant, key)] = expires_at
                self._marks.pop((tenant, key), None)
                self._counted_keys.discard((tenant, key))
                return None
            return existing

    def release_key(self, tenant: str, key: str, job_id: str) -> bool:
        with self._lock:
            marked = (tenant, key) in self._marks
            if self._keys.get((tenant, key), ("",))[0] != job_id or marked:
                return False
            del self._keys[(tenant, key)]
            self._counted_keys.discard((tenant, key))
            return True

    def create(self, job: Job) -> None:
        with self._lock:
            if (job.tenant, job.id) in self._jobs:
                raise ConditionFailed(f"job {job.id} exists")
            self._jobs[(job.tenant, job.id)] = job

    def create_many(self, jobs: Sequence[Job]) -> None:
        with self._lock:
            for job in jobs:
                self._jobs[(job.tenant, job.id)] = job

    def get(self, tenant: str, job_id: str) -> Job | None:
        return self._jobs.get((tenant, job_id))

    def get_many(self, keys: Sequence[tuple[str, str]]) -> dict[str, Job]:
        return {job_id: self._jobs[(t, job_id)] for t, job_id in keys if (t, job_id) in self._jobs}

    def list(self, tenant: str, limit: int, cursor: str | None) -> Page[Job]:
        with self._lock:  # iterating while another thread inserts would raise
            ids = sorted((i for t, i in self._jobs if t == tenant), reverse=True)
        if cursor is not None:
            ids = [i for i in ids if i < cursor]
        page = ids[:limit]
        more = len(ids) > limit
        return Page([self._jobs[(tenant, i)] for i in page], page[-1] if more and page else None)

    def mark_key(self, tenant: str, key: str, token: str, job_id: str) -> bool:
        with self._lock:
            if self._keys.get((tenant, key), ("",))[0] != job_id:
                return False
            self._marks[(tenant, key)] = token
            return True

    def unmark_key(self, tenant: str, key: str, token: str) -> None:
        with self._lock:
            if self._marks.get((tenant, key)) == token:
                del self._marks[(tenant, key)]

    def replace(
        self,
        job: Job,
        *,
        expected: Job,
        unchanged: Sequence[Job] = (),
        hold: KeyHold | None = None,
        release: bool = False,
    ) -> None:
        with self._lock:
            if (
                hold is not None
                and self._marks.get((job.tenant, hold.key), hold.token) != hold.token
            ):
                raise ConditionFailed(f"job {job.id} was answered by a replay")
            current = self._jobs.get((job.tenant, job.id))
            if (
                current is None
                or current.status != expected.status
                or current.generation != expected.generation
                or current.created_ms != expected.created_ms
                or current.version != expected.version
            ):
                raise ConditionFailed(f"job {job.id} changed")
            for read in unchanged:
                now = self._jobs.get((read.tenant, read.id))
                if now is None or now.generation != read.generation:
                    raise ConditionFailed(f"job {read.id} changed")
            self._jobs[(job.tenant, job.id)] = job
            if release:
                self._release(job.tenant)

    def scan_active(
        self,
        segment: int,
        segments: int,
        counters: dict[str, CounterRead] | None = None,
        keys: Callable[[KeyCount], None] | None = None,
    ) -> Iterator[Job]:
        with self._lock:
            jobs = list(self._jobs.values())
            counted = {t: (n, self._changes.get(t, 0)) for t, n in self._recurring.items()}
            marked = [(t, k, self._keys[(t, k)][0]) for t, k in self._counted_keys]
            expiry = dict(self._key_expiry)
        if counters is not None:
            for tenant, read in counted.items():
                if zlib.crc32(tenant.encode()) % segments == segment:
                    counters[tenant] = read
        for tenant, key, job_id in marked:
            if keys is not None and zlib.crc32(key.encode()) % segments == segment:
                keys((tenant, job_id, expiry[(tenant, key)]))
        for job in jobs:
            active = job.status in (JobStatus.SCHEDULED, JobStatus.PAUSED)
            if active and zlib.crc32(job.id.encode()) % segments == segment:
                yield job

    def reserve_recurring(
        self, tenant: str, limit: int, key: tuple[str, str] | None = None
    ) -> bool | None:
        with self._lock:
            if key is not None and self._keys.get((tenant, key[0]), ("",))[0] != key[1]:
                key = None  # the key names another job now: counted without its mark
            if key is not None and (tenant, key[0]) in self._counted_keys:
                return None
            if self._recurring.get(tenant, 0) >= limit:
                return False
            self._recurring[tenant] = self._recurring.get(tenant, 0) + 1
            self._changes[tenant] = self._changes.get(tenant, 0) + 1
            if key is not None:
                self._counted_keys.add((tenant, key[0]))
            return True

    def release_recurring(self, tenant: str) -> None:
        with self._lock:
            self._release(tenant)

    def _release(self, tenant: str) -> None:
        """(The lock held.) Refused at zero: nothing to release."""
        if self._recurring.get(tenant, 0) > 0:
            self._recurring[tenant] -= 1
            self._changes[tenant] = self._changes.get(tenant, 0) + 1

    def set_recurring_count(
        self, tenant: str, count: int, *, expected: CounterRead | None = None
    ) -> None:
        with self._lock:
            now = (self._recurring.get(tenant, 0), self._changes.get(tenant, 0))
            if expected is None or now == expected:
                self._recurring[tenant] = count
                self._changes[tenant] = now[1] + 1

    def gate(self, tenant: str, job_id: str) -> Gate:
        return self._gates.get((tenant, job_id), Gate())

    def put_gate(self, tenant: str, job_id: str, gate: Gate, expires_at: int) -> bool:
        with self._lock:
            if self._gates.get((tenant, job_id), Gate()).version != gate.version:
                return False
            self._gates[(tenant, job_id)] = replace(gate, version=gate.version + 1)
            return True

    def add_dependent(
        self, tenant: str, upstream_id: str, dependent_id: str, *, at_most: int | None = None
    ) -> None:
        with self._lock:
            ids = self._dependents.get((tenant, upstream_id), set())
            if at_most is not None and dependent_id not in ids and len(ids) >= at_most:
                raise ConditionFailed(f"job {upstream_id} has {at_most} dependents")
            upstream = self._jobs.get((tenant, upstream_id))
            if upstream is not None and not upstream.has_dependents:
                self._jobs[(tenant, upstream_id)] = replace(
                    upstream, has_dependents=True, version=upstream.version + 1
                )
            self._dependents.setdefault((tenant, upstream_id), set()).add(dependent_id)

    def remove_dependent(self, tenant: str, upstream_id: str, dependent_id: str) -> None:
        with self._lock:
            self._dependents.get((tenant, upstream_id), set()).discard(dependent_id)

    def dependents(self, tenant: str, upstream_id: str) -> tuple[str, ...]:
        with self._lock:
            return tuple(sorted(self._dependents.get((tenant, upstream_id), set())))

    def get_with_dependents(
        self, keys: Sequence[tuple[str, str]]
    ) -> dict[tuple[str, str], tuple[Job, tuple[str, ...]]]:
        with self._lock:
            found = {key: self._jobs[key] for key in keys if key in self._jobs}
        return {
            key: (job, () if job.has_dependents is False else self.dependents(*key))
            for key, job in found.items()
        }

    def recurring_count(self, tenant: str) -> int:
        return self._recurring.get(tenant, 0)
