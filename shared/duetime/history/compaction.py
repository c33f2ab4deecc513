"""Compaction: rewrite one day's partition of the archive into few large Parquet objects.

The archiver writes one small object per stream batch and day, so a busy day holds thousands
of them; Athena (and every Parquet reader) pays per object opened. `compact_partition` merges
the small objects of `history/dt=D/` into objects of up to `target_bytes` each, without losing
or duplicating a row.

Each compacted object is self-describing: it is named after its inputs
(`compacted-<sha256 of their keys>.parquet`) and its Parquet footer lists them
(`duetime.compacted_from`) with their total row count (`duetime.input_rows`). The rule that
makes every step safe to repeat: **an object named in an existing compacted object's footer is
redundant** (its rows are in that compacted object) and may be deleted. It holds because
archive object names are derived from the stream batch, so an object that reappears under the
same name (a retried batch) holds the same rows.

Timeline of one merge, and what a re-run does after a crash at each point:

1. list the partition; finish any earlier merge (below); choose the inputs (objects smaller
   than `small_bytes`, by key) and read them.
   - crash: nothing changed; the re-run does the same.
2. PUT the compacted object C (S3 PUTs are atomic: C exists whole or not at all).
   - crash before: as 1 (the same inputs give the same name: C is overwritten, not doubled).
3. read C's footer back from S3 and check its row count equals the inputs' sum; on a
   mismatch delete C and stop, keeping the inputs.
4. DELETE the inputs.
   - crash after 2, 3 or during 4: C and some inputs coexist, so a query counts those rows
     twice until the re-run, which first reads every compacted object's footer and deletes
     the inputs still present (after checking the counts again if all of them are).
5. done: a re-run lists one object per merge and has nothing to do (idempotent).

The compactor must be the only one compacting a partition at a time (reserved concurrency 1
on AWS). The archiver may write during a compaction: a new object is not in the inputs and is
merged next time; a rewritten input (retried batch) holds rows already in C and is deleted.

Which day: archive objects land in the partition of the run's *scheduled* day, once its record
expires from the hot table, i.e. a hot window later plus DynamoDB's TTL lag (up to two days).
So "yesterday's partition" receives nothing yesterday; the daily job compacts the days that
have just stopped receiving writes (`settled_days`), and a few before them for stragglers, and
finishes the days an earlier run left unfinished (duetime.history.backlog). A merge reads at
most `target_bytes` of inputs, so `out_of_time` (checked before each merge) bounds a run.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import date, timedelta

import pyarrow as pa
import pyarrow.compute as pc

from duetime.history.archive import HistoryBucket, StoredObject
from duetime.history.schema import conform, partition_prefix

COMPACTED_PREFIX = "compacted-"
META_INPUTS = "duetime.compacted_from"
META_INPUT_ROWS = "duetime.input_rows"
META_MEMORY = "duetime.memory_bytes"  # what the merged table took in memory (Arrow's)
# Objects at least this large are left alone; inputs are grouped into outputs of about
# TARGET_BYTES (compressed). A 64 MB output holds a few million runs and needs well under
# 1 GB of memory to write.
SMALL_BYTES = 32 * 1024 * 1024
TARGET_BYTES = 64 * 1024 * 1024
# A merge stops taking inputs once those read take this much memory (Arrow's), whatever
# their stored size: a tenant's rows of long identical texts (a job name, its target's error)
# compress ~30 times better than most, and a 64 MB merge of them needed ~8 GB, twice the
# compactor's memory, every day (until 2026-12-01; an outside security audit). The merge holds
# its inputs, their concatenation and its sorted copy: about 3 times this at its peak. A
# compacted object holding half of it or more is not merged again, whatever its stored size: a
# day is compacted by three daily runs, and such outputs merged by twos doubled a merge's
# memory each run (until 2026-12-01; an outside security audit, round eleven).
MERGE_MEMORY_BYTES = 256 * 1024 * 1024
TTL_LAG_DAYS = 2  # DynamoDB deletes expired items within about two days
COMPACTION_DAYS = 3  # the settled day and the two before it (late stragglers)


class CompactionError(RuntimeError):
    """The compacted object does not hold exactly its inputs' rows: nothing was deleted."""


@dataclass
class CompactionReport:
    dt: str
    merged: list[str] = field(default_factory=list)  # inputs merged by this run (deleted)
    written: list[str] = field(default_factory=list)  # compacted objects written
    rows: int = 0  # rows in the objects written
    recovered: list[str] = field(default_factory=list)  # leftovers of an interrupted run
    unfinished: int = 0  # merges left for a later run (it stopped when out of time)

    @property
    def changed(self) -> bool:
        return bool(self.written or self.recovered)

    @property
    def finished(self) -> bool:
        return self.unfinished == 0

    def summary(self) -> str:
        if not self.changed and self.finished:
            return f"dt={self.dt}: nothing to compact"
        parts = []
        if self.written:
            parts.append(
                f"merged {len(self.merged)} object(s) into {len(self.written)} ({self.rows} rows)"
            )
        if self.recovered:
            parts.append(f"deleted {len(self.recovered)} object(s) left by an interrupted run")
        if self.unfinished:
            parts.append(f"{self.unfinished} merge(s) left: out of time")
        return f"dt={self.dt}: " + "; ".join(parts)


def compacted_key(prefix: str, inputs: Sequence[str]) -> str:
    digest = hashlib.sha256("\n".join(sorted(inputs)).encode()).hexdigest()[:20]
    return f"{prefix}{COMPACTED_PREFIX}{digest}.parquet"


def is_compacted(key: str) -> bool:
    return key.rsplit("/", 1)[-1].startswith(COMPACTED_PREFIX)


def plan_merges(
    objects: Sequence[StoredObject],
    *,
    small_bytes: int = SMALL_BYTES,
    target_bytes: int = TARGET_BYTES,
) -> list[list[str]]:
    """Groups of small objects (by key) to merge, each of about `target_bytes`; a group of one
    object would gain nothing and is left out."""
    small = sorted((o for o in objects if o.size < small_bytes), key=lambda o: o.key)
    groups: list[list[str]] = []
    current: list[str] = []
    size = 0
    for obj in small:
        if current and size + obj.size > target_bytes:
            groups.append(current)
            current, size = [], 0
        current.append(obj.key)
        size += obj.size
    groups.append(current)
    return [g for g in groups if len(g) > 1]


def compact_partition(
    bucket: HistoryBucket,
    dt: str,
    *,
    small_bytes: int = SMALL_BYTES,
    target_bytes: int = TARGET_BYTES,
    memory_bytes: int = MERGE_MEMORY_BYTES,
    out_of_time: Callable[[], bool] = lambda: False,
) -> CompactionReport:
    """Merge the small objects of partition `dt` (see the module's docstring), stopping before
    a merge once `out_of_time()`: the report counts the merges left (`unfinished`)."""
    prefix = partition_prefix(dt)
    report = CompactionReport(dt)
    objects = bucket.list(prefix)
    gone, overlapping, memory = _finish_earlier_merges(bucket, objects, report)
    for group in overlapping:  # whatever their size: they hold some runs twice
        _merge(bucket, prefix, sorted(group), report, memory_bytes=None)
    merged = gone.union(*overlapping)
    full = {key for key, held in memory.items() if held >= memory_bytes // 2}
    remaining = [o for o in objects if o.key not in merged | full]
    planned = plan_merges(remaining, small_bytes=small_bytes, target_bytes=target_bytes)
    while planned:
        if out_of_time():
            report.unfinished = len(planned)
            break
        left = _merge(bucket, prefix, planned.pop(0), report, memory_bytes=memory_bytes)
        if len(left) > 1:  # the inputs past the memory bound: a merge of their own
            planned.insert(0, left)
    return report


def _finish_earlier_merges(
    bucket: HistoryBucket, objects: Sequence[StoredObject], report: CompactionReport
) -> tuple[set[str], list[set[str]], dict[str, int]]:
    """Delete the objects that an existing compacted object already holds (step 4 of an
    interrupted run, or a rewritten input); returns the keys deleted, the groups of
    compacted objects made from a shared input (two compactions that overlapped: each holds
    its rows), to merge again whatever their size (until 2026-11-30 objects of SMALL_BYTES
    or more were left alone, their shared rows twice: found by an outside audit), and the
    memory each compacted object's table took (META_MEMORY; 0 for one written before it)."""
    present = {o.key for o in objects}
    deleted: set[str] = set()
    made_from: dict[str, set[str]] = {}
    memory: dict[str, int] = {}
    for obj in objects:
        if not is_compacted(obj.key) or obj.key in deleted:
            continue
        footer = bucket.footer(obj.key)
        inputs = json.loads(footer.metadata.get(META_INPUTS, "[]"))
        made_from[obj.key] = set(inputs)
        memory[obj.key] = int(footer.metadata.get(META_MEMORY, 0))
        leftovers = [k for k in inputs if k in present and k not in deleted and k != obj.key]
        if not leftovers:
            continue
        if len(leftovers) == len(inputs):
            # Nothing was deleted yet, so step 3 may not have run: check the counts now (the
            # inputs' total as C recorded it: C itself holds each run once).
            rows = sum(bucket.footer(k).num_rows for k in leftovers)
            recorded = int(footer.metadata.get(META_INPUT_ROWS, footer.num_rows))
            if rows != recorded:
                raise CompactionError(
                    f"{obj.key} was made from {recorded} rows, its inputs hold {rows}: left as is"
                )
        bucket.delete(leftovers)
        deleted.update(leftovers)
        report.recovered.extend(leftovers)
    shared = _sharing_inputs({k: v for k, v in made_from.items() if k not in deleted})
    return deleted, shared, memory


def _sharing_inputs(made_from: dict[str, set[str]]) -> list[set[str]]:
    """The groups (two or more) of compacted objects linked by a shared input."""
    groups: list[tuple[set[str], set[str]]] = []  # (compacted keys, their inputs)
    for key, inputs in sorted(made_from.items()):
        linked = [g for g in groups if g[1] & inputs]
        keys, shared = {key}, set(inputs)
        for group in linked:
            groups.remove(group)
            keys |= group[0]
            shared |= group[1]
        groups.append((keys, shared))
    return [keys for keys, _ in groups if len(keys) > 1]


def _merge(
    bucket: HistoryBucket,
    prefix: str,
    inputs: list[str],
    report: CompactionReport,
    *,
    memory_bytes: int | None,
) -> list[str]:
    """Merge `inputs` into one object, those read before their tables took `memory_bytes`
    (two at least; None: all); returns the inputs left for another merge."""
    tables: list[pa.Table] = []
    held = 0  # the memory the tables read take
    for key in inputs:
        if memory_bytes is not None and len(tables) >= 2 and held >= memory_bytes:
            break
        tables.append(conform(bucket.read_table(key)))
        held += tables[-1].nbytes
    inputs, left = inputs[: len(tables)], inputs[len(tables) :]
    rows = sum(t.num_rows for t in tables)
    # A run's rows latest end first (nulls last), so the merge keeps its final state.
    order = [
        ("scheduled_for", "ascending"),
        ("run_id", "ascending"),
        ("finished_at", "descending", "at_end"),
    ]
    merged = _one_row_per_run(pa.concat_tables(tables).sort_by(order))
    key = compacted_key(prefix, inputs)
    about = {META_INPUTS: json.dumps(inputs), META_INPUT_ROWS: str(rows)}
    bucket.put_table(key, merged, about | {META_MEMORY: str(merged.nbytes)})
    written = bucket.footer(key).num_rows
    if written != merged.num_rows:
        bucket.delete([key])
        raise CompactionError(f"{key} was written with {written} rows, expected {merged.num_rows}")
    bucket.delete(inputs)
    report.merged.extend(inputs)
    report.written.append(key)
    report.rows += rows
    return left


def _one_row_per_run(table: pa.Table) -> pa.Table:
    """`table` (sorted by run, each run's latest end first) with one row a run: its first. A
    repeat comes from two compactions that overlapped (the CLI's beside the scheduled one), or
    from a run archived twice: run again after its record had expired (a DLQ redrive, a retry
    past the hot window) it gets a new record, archived in turn; the latest end is its final
    state (until 2026-11-30 the first row met was kept: a run that failed, then succeeded on
    its redrive, stayed `failed`; found by an outside audit)."""
    if table.num_rows < 2:
        return table
    ids = table.column("run_id")
    repeats = pc.equal(ids.slice(1), ids.slice(0, table.num_rows - 1))
    keep = pa.concat_arrays([pa.array([True]), pc.invert(repeats.combine_chunks())])
    return table.filter(keep)


def settled_days(today: date, run_ttl_seconds: int, days: int = COMPACTION_DAYS) -> list[date]:
    """The partitions the daily compaction handles: runs scheduled on day D expire from the
    hot table from D + hot window to (D + 1 day) + hot window + TTL lag, so the newest
    partition no longer written to is `today − hot window − TTL lag − 1 day`."""
    window_days = -(-run_ttl_seconds // 86_400)  # rounded up
    newest = today - timedelta(days=window_days + TTL_LAG_DAYS + 1)
    return [newest - timedelta(days=i) for i in range(days)]
