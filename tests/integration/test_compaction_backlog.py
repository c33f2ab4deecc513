"""The daily compactor, as AWS runs it (the real handler, S3 on moto, days of archive objects):
a day whose merges outlast an invocation is finished by the next runs, an invocation stops
before its timeout, and a day whose compaction fails does not stop the other days.

Found by an outside audit: each daily run compacted the settled day and the two before it,
newest first; a day not finished in its turn was never gone back to (the next run started
with a newer day, which took the whole time again), and one failing day ended the run.

Sizes are scaled down: an archiver object of 7 KB counts as small, four of them fill a
merged object (not small), so a busy day of 40 objects needs 10 merges and a quiet one of 8 needs 2.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, timedelta
from typing import Any

import pyarrow as pa
import pytest
from botocore.exceptions import ClientError

from duetime.entrypoints import compactor
from duetime.history import backlog, compaction
from duetime.history.archive import HistoryBucket, StoredObject, object_key, to_table
from duetime.history.compaction import is_compacted
from duetime.history.query import LocalEngine
from duetime.local.lambda_runtime import FakeContext
from duetime.settings import Env
from tests.conftest import Aws

HOT_WINDOW_DAYS = 30
FIRST_RUN = date(2027, 3, 1)
# The newest day the first run takes: today − hot window − TTL lag (2 days) − 1 day
FIRST_SETTLED = FIRST_RUN - timedelta(days=HOT_WINDOW_DAYS + 3)
ROWS = 100  # rows an archiver object holds
PER_MERGE = 4  # archiver objects a merged object holds
BUSY, QUIET = 40, 8  # archiver objects a day
KILLED_AFTER = 3  # merged objects an invocation writes before Lambda kills it at its timeout
TRIES = 3  # an invocation and Lambda's two retries of a failed asynchronous invocation


class Killed(BaseException):
    """Lambda ended the invocation at its timeout."""


@dataclass
class Archive:
    s3: Any
    bucket: HistoryBucket
    small: int = 0  # the scaled sizes: objects under `small` are merged, up to `target` each
    target: int = 0
    rows: int = 0
    sequence: int = 10**21
    days: list[str] = field(default_factory=list)

    def put_day(self, day: date, objects: int) -> None:
        start = int(datetime(day.year, day.month, day.day, tzinfo=UTC).timestamp() * 1000)
        for batch in range(objects):
            key = object_key(day.isoformat(), str(self.sequence), str(self.sequence + 9))
            self.bucket.put_table(key, to_table(_rows(start + batch * 600_000)))
            self.sequence += 10
            self.rows += ROWS
        self.days.append(day.isoformat())

    def merges_left(self, dt: str) -> int:
        return len(compaction.plan_merges(self.objects(dt)))  # (scaled by the fixture)

    def objects(self, dt: str) -> list[StoredObject]:
        return self.bucket.list(f"history/dt={dt}/")

    def counts(self) -> dict[str, Any]:
        sql = "SELECT count(*) AS n, count(DISTINCT run_id) AS runs FROM runs"
        (row,) = LocalEngine(self.bucket).query(sql).records()
        return row


def _rows(start_ms: int) -> list[dict[str, Any]]:
    """Runs of distinct jobs, their figures varied (so that, as in production, the data and
    not the Parquet footer makes most of an object)."""
    rows = []
    for i in range(ROWS):
        at = start_ms + i * 1_000
        job = f"01M7YRRZ79ZH4JE1SA{(at // 1_000) % 10**8:08d}"
        late, took = (at * 7919) % 997, (at * 104_729) % 99_991
        rows.append(
            {
                "run_id": f"{job}-{at}",
                "job_id": job,
                "tenant": "tenant-a",
                "job_name": None,
                "target_type": "http",
                "priority": "normal",
                "runtime": "lambda",
                "scheduled_for": at,
                "started_at": at + late,
                "finished_at": at + late + took,
                "lateness_ms": late,
                "duration_ms": took,
                "attempts": 1,
                "status": "succeeded",
                "error": None,
                "early_wait_ms": (at * 31) % 1_000,
                "due_at": at,
            }
        )
    return rows


@pytest.fixture
def archive(aws: Aws, monkeypatch: pytest.MonkeyPatch) -> Iterator[Archive]:
    s3 = aws.session.client("s3")
    s3.create_bucket(Bucket="duetime-history")
    found = Archive(s3, HistoryBucket(s3, "duetime-history"))
    found.put_day(date(2000, 1, 1), 2)  # two objects, to measure them
    sizes = [o.size for o in found.objects("2000-01-01")]
    # (a merged object is about twice an archiver object here: the footer weighs)
    found.small, found.target = int(max(sizes) * 1.5), int(max(sizes) * (PER_MERGE + 0.5))
    found.bucket.delete([o.key for o in found.objects("2000-01-01")])
    found.rows, found.days = 0, []
    real_plan = compaction.plan_merges

    def scaled_plan(objects: Sequence[StoredObject], **_: int) -> list[list[str]]:
        return real_plan(objects, small_bytes=found.small, target_bytes=found.target)

    monkeypatch.setattr(compaction, "plan_merges", scaled_plan)
    monkeypatch.setenv(Env.HISTORY_BUCKET, "duetime-history")
    monkeypatch.setenv(Env.RUN_TTL_SECONDS, str(HOT_WINDOW_DAYS * 86_400))
    compactor.settings.cache_clear()
    compactor.bucket.cache_clear()
    yield found
    compactor.settings.cache_clear()
    compactor.bucket.cache_clear()


def on_day(monkeypatch: pytest.MonkeyPatch, run: int) -> None:
    """The clock of the daily run `run` (the schedule's 01:30 UTC)."""
    today = FIRST_RUN + timedelta(days=run)
    at = datetime(today.year, today.month, today.day, 1, 30, tzinfo=UTC)
    monkeypatch.setattr(compactor, "wall_ms", lambda: int(at.timestamp() * 1000))


SCHEDULED = {"detail-type": "Scheduled Event", "source": "aws.events"}


def test_a_day_a_run_did_not_finish_is_finished_by_the_next_runs(
    archive: Archive, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given three busy days in a row, each more than a daily run can merge, among quiet days,
    # and invocations that Lambda kills at their timeout (retried twice each)
    runs = 8
    for n in range(-2, runs):
        day = FIRST_SETTLED + timedelta(days=n)
        archive.put_day(day, BUSY if 0 <= n <= 2 else QUIET)
    written = {"n": 0}
    real_put = HistoryBucket.put_table

    def put_until_killed(self: HistoryBucket, key: str, table: Any, metadata: Any = None) -> None:
        if is_compacted(key):
            if written["n"] >= KILLED_AFTER:
                raise Killed("Task timed out after 900.00 seconds")
            written["n"] += 1
        real_put(self, key, table, metadata)

    monkeypatch.setattr(HistoryBucket, "put_table", put_until_killed)

    # When the daily compaction runs on each of those days
    for n in range(runs):
        on_day(monkeypatch, n)
        for _ in range(TRIES):
            written["n"] = 0
            try:
                compactor.handler(SCHEDULED, FakeContext())
                break
            except Killed:
                continue

    # Then every day was compacted in the end, each run once
    left = {dt: archive.merges_left(dt) for dt in archive.days if archive.merges_left(dt)}
    assert left == {}, f"merges never made, by day: {left}"
    assert archive.counts() == {"n": archive.rows, "runs": archive.rows}


@dataclass
class Clock(FakeContext):
    """A Lambda context whose remaining time each merged object written takes 200 s of."""

    remaining_ms: int = 900_000

    def get_remaining_time_in_millis(self) -> int:
        return self.remaining_ms


def test_an_invocation_stops_before_its_timeout_and_the_next_run_goes_on(
    archive: Archive, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given a busy day (10 merges), and merges of 200 s each: 4 fit in 900 s, the margin kept
    archive.put_day(FIRST_SETTLED, BUSY)
    clock = Clock()
    real_put = HistoryBucket.put_table

    def slow_put(self: HistoryBucket, key: str, table: Any, metadata: Any = None) -> None:
        real_put(self, key, table, metadata)
        if is_compacted(key):
            clock.remaining_ms -= 200_000

    monkeypatch.setattr(HistoryBucket, "put_table", slow_put)

    # When the daily compaction runs three days in a row
    merged, backlogs = [], []
    for n in range(3):
        on_day(monkeypatch, n)
        clock.remaining_ms = 900_000
        result = compactor.handler(SCHEDULED, clock)  # returns: not killed
        merged.append({p["dt"]: p["merged"] for p in result["partitions"] if p["merged"]})
        backlogs.append(result["backlog"])

    # Then each invocation stopped after 4 merges, and the next run went on with that day
    # before the newer days
    dt = FIRST_SETTLED.isoformat()
    assert merged == [{dt: 16}, {dt: 16}, {dt: 8}]
    assert backlogs[0] == [dt]
    assert dt in backlogs[1]
    assert dt not in backlogs[2]
    assert archive.merges_left(dt) == 0
    assert archive.counts() == {"n": archive.rows, "runs": archive.rows}


def test_a_day_whose_compaction_fails_does_not_stop_the_others(
    archive: Archive, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given the three days a run takes, the middle one holding an object that is not Parquet
    days = [(FIRST_SETTLED - timedelta(days=n)).isoformat() for n in range(3)]
    for dt in days:
        archive.put_day(date.fromisoformat(dt), QUIET)
    bad = f"history/dt={days[1]}/notes.txt"
    archive.s3.put_object(Bucket=archive.bucket.name, Key=bad, Body=b"")
    on_day(monkeypatch, 0)

    # When the daily compaction runs, it fails naming that object (the function's alarm)
    with pytest.raises(RuntimeError, match=bad):
        compactor.handler(SCHEDULED, FakeContext())

    # Then the other two days were compacted all the same (that one up to the object)
    assert archive.merges_left(days[0]) == archive.merges_left(days[2]) == 0
    assert archive.merges_left(days[1]) == 1

    # And once the object is removed, the next day's run compacts that day (not among the
    # days it would take on its own)
    archive.s3.delete_object(Bucket=archive.bucket.name, Key=bad)
    on_day(monkeypatch, 1)
    result = compactor.handler(SCHEDULED, FakeContext())
    assert {p["dt"]: p["merged"] for p in result["partitions"]}[days[1]] == PER_MERGE
    assert archive.merges_left(days[1]) == 0
    assert archive.counts() == {"n": archive.rows, "runs": archive.rows}


def test_a_backlog_that_is_not_one_fails_the_run_naming_it(
    archive: Archive, monkeypatch: pytest.MonkeyPatch
) -> None:
    from duetime.history.backlog import BACKLOG_KEY

    archive.bucket.put_note(BACKLOG_KEY, json.dumps({"days": ["2027-02-30"]}).encode())
    on_day(monkeypatch, 0)
    with pytest.raises(ValueError, match=f"s3://duetime-history/{BACKLOG_KEY} is not a backlog"):
        compactor.handler(SCHEDULED, FakeContext())

    # Deleted, the settled days start it again; and it is no data to the queries
    archive.bucket.delete([BACKLOG_KEY])
    archive.put_day(FIRST_SETTLED, QUIET)
    assert compactor.handler(SCHEDULED, FakeContext())["backlog"] == []
    assert archive.bucket.get_note(BACKLOG_KEY) == b'{"days": [], "tries": {}}'
    assert archive.counts() == {"n": QUIET * ROWS, "runs": QUIET * ROWS}


@pytest.mark.parametrize("failure", ["foreign Parquet", "refused object", "S3 slowing down"])
def test_an_oldest_day_that_fails_holds_back_no_later_day(
    archive: Archive, monkeypatch: pytest.MonkeyPatch, failure: str
) -> None:
    # A Parquet object pyarrow cannot conform (a RuntimeError), or one S3 keeps refusing (a KMS
    # key the compactor may not use), in the oldest day: each run ended there, first in the
    # backlog, and no later day was ever compacted (a review of this change). A passing S3
    # failure (SlowDown) still ends the run: counted as that day's try, the day goes after
    # the others at its third run.
    days = [FIRST_SETTLED - timedelta(days=n) for n in (2, 1, 0)]
    for day in days:
        archive.put_day(day, QUIET)
    oldest = days[0].isoformat()
    if failure == "foreign Parquet":
        foreign = pa.table({"run_id": ["x-1"], "attempts": pa.array([[1]], pa.list_(pa.int64()))})
        archive.bucket.put_table(f"history/dt={oldest}/by-hand.parquet", foreign)
    else:
        code = "AccessDenied" if failure == "refused object" else "SlowDown"
        refused = archive.objects(oldest)[0].key
        read = HistoryBucket.read_table

        def refusing(self: HistoryBucket, key: str) -> Any:
            if key == refused:
                raise ClientError({"Error": {"Code": code, "Message": code}}, "GetObject")
            return read(self, key)

        monkeypatch.setattr(HistoryBucket, "read_table", refusing)
    for n in range(1, 4):
        archive.put_day(FIRST_SETTLED + timedelta(days=n), QUIET)

    for run in range(4):
        on_day(monkeypatch, run)
        with pytest.raises(
            Exception, match="dt=" + oldest if failure != "S3 slowing down" else code
        ):
            compactor.handler(SCHEDULED, FakeContext())

    assert [dt for dt in archive.days if dt != oldest and archive.merges_left(dt)] == []


def test_a_day_that_kills_its_runs_goes_after_the_others(
    archive: Archive, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A day whose compaction the function never returns from (out of memory, its timeout
    # mid-merge) stayed first in the backlog, and every run died on it (an outside security
    # audit). After KILLED_TRIES it goes after the others, and stays in the backlog.
    days = [(FIRST_SETTLED - timedelta(days=n)).isoformat() for n in (2, 1, 0)]
    for dt in days:
        archive.put_day(date.fromisoformat(dt), QUIET)
    real = backlog.compact_partition

    def killed_on_the_oldest(bucket: HistoryBucket, dt: str, **kwargs: Any) -> Any:
        if dt == days[0]:
            raise Killed("Runtime exited with error: signal: killed")
        return real(bucket, dt, **kwargs)

    monkeypatch.setattr(backlog, "compact_partition", killed_on_the_oldest)
    on_day(monkeypatch, 0)
    for _ in range(backlog.KILLED_TRIES + 1):
        with pytest.raises(Killed):
            compactor.handler(SCHEDULED, FakeContext())

    assert [archive.merges_left(dt) for dt in days[1:]] == [0, 0]
    assert backlog.read_backlog(archive.bucket) == ([days[0]], {days[0]: backlog.KILLED_TRIES + 1})
