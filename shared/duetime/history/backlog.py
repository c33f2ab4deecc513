"""The daily compaction's backlog: the days it has still to finish, kept in the bucket, so a day
whose merges outlast one invocation is finished by the next runs instead of left behind.

Until 2026-12-01 each daily run compacted the settled day and the two before it, newest first,
within one invocation (900 s): a day it did not finish was never gone back to, as the next
run started with a newer day that took the whole time again, and the rest of that day stayed
small objects until its retention (found by an outside audit: in its model, 9 days of 10).
Now a run:

1. reads the backlog (`history/_compaction/backlog.json`: a name starting with `_`, which no
   reader takes for data), adds the settled days, and writes it back before each day it
   takes on, counting that day's try, so a run killed at its timeout (or out of memory)
   leaves every day it took on in it, and the try counted;
2. compacts those days oldest first, each until it is done or the time is nearly up (a merge
   reads at most 64 MB of inputs, and stops taking them at MERGE_MEMORY_BYTES in memory:
   `out_of_time` is asked before each), and drops a day from the backlog once its compaction
   finished: a day waits for the days before it, never for good; one that killed
   KILLED_TRIES runs goes after the others;
3. gives a day whose compaction fails no more of this run: it stays in the backlog, the other
   days go on, and the run reports the failed days (the function then fails, which its alarm
   shows). A failure is the day's whatever it is (a CompactionError, an object that is not
   Parquet or not of the schema, one S3 refuses), but for S3 itself failing (throttled, a
   5xx, no answer), which stops the run: the days stay in the backlog for the next (until
   2026-12-01 one failing day ended the run and skipped the days after it; then, until a
   review the same day, any failure but the first two did, at the oldest day, every day).

Only one compaction may run at a time (reserved concurrency 1): the backlog is read, changed
and written by one run.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import date

from duetime.adapters.aws_errors import is_transient
from duetime.history.archive import HistoryBucket
from duetime.history.compaction import CompactionError, CompactionReport, compact_partition
from duetime.history.schema import PREFIX, partition_prefix

BACKLOG_KEY = f"{PREFIX}_compaction/backlog.json"


@dataclass
class BacklogRun:
    """What one run of the backlog did."""

    reports: list[CompactionReport] = field(default_factory=list)  # the days it compacted
    failed: dict[str, str] = field(default_factory=dict)  # day → why its compaction failed
    left: list[str] = field(default_factory=list)  # the backlog after the run, oldest first


# A day whose compaction began this many times and never returned (the function killed: out
# of memory, or at its timeout mid-merge; or S3 failing under it) goes after the others, so it
# holds back no other day (until 2026-12-01 it stayed first, and every run died on it: an
# outside security audit).
KILLED_TRIES = 2


def read_backlog(bucket: HistoryBucket) -> tuple[list[str], dict[str, int]]:
    """The days in the backlog, oldest first ([] when there is none yet), and how many times
    each began without returning. A backlog that does not read as one is refused, naming it
    (delete it: the settled days start it again)."""
    body = bucket.get_note(BACKLOG_KEY)
    if body is None:
        return [], {}
    try:
        note = json.loads(body)
        days, tries = note["days"], {str(k): int(v) for k, v in note.get("tries", {}).items()}
        for day in days:
            partition_prefix(day)  # a day in the form YYYY-MM-DD, or ValueError
    except (ValueError, KeyError, TypeError, AttributeError) as exc:
        raise ValueError(f"s3://{bucket.name}/{BACKLOG_KEY} is not a backlog: {exc}") from None
    return sorted(set(days)), {day: n for day, n in tries.items() if day in days}


def write_backlog(bucket: HistoryBucket, days: Iterable[str], tries: dict[str, int]) -> None:
    days = sorted(set(days))
    kept = {day: n for day, n in sorted(tries.items()) if day in days and n}
    bucket.put_note(BACKLOG_KEY, json.dumps({"days": days, "tries": kept}).encode())


def compact_backlog(
    bucket: HistoryBucket,
    settled: Iterable[date],
    out_of_time: Callable[[], bool] = lambda: False,
) -> BacklogRun:
    """One daily run: the backlog and the `settled` days, oldest first, but for those that
    killed runs (see the docstring)."""
    known, tries = read_backlog(bucket)
    days = sorted(set(known) | {d.isoformat() for d in settled})
    run = BacklogRun(left=list(days))
    for dt in sorted(days, key=lambda day: (tries.get(day, 0) >= KILLED_TRIES, day)):
        if out_of_time():
            break
        tries[dt] = tries.get(dt, 0) + 1
        write_backlog(bucket, run.left, tries)  # (before: a run killed on it leaves the count)
        try:
            report = compact_partition(bucket, dt, out_of_time=out_of_time)
        except Exception as exc:  # this day's: the others go on, but for S3 itself failing
            if is_transient(exc):
                raise  # (counted as a try: twice, and the day goes after the others)
            tries[dt] -= 1
            run.failed[dt] = str(exc) if isinstance(exc, CompactionError) else repr(exc)
            continue
        tries[dt] -= 1
        run.reports.append(report)
        if report.finished:
            run.left.remove(dt)
    write_backlog(bucket, run.left, tries)
    return run
