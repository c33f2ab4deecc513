"""`duetime history query "SQL"`: the same SQL on two engines.

- **Local** (`LocalEngine`): DuckDB over the archive's Parquet objects, read from S3 (the local
  stack's moto, or a real bucket) with boto3 and pyarrow: DuckDB 2.0 cannot load its S3
  extension offline. The objects become one Arrow table registered as `runs` (TABLE_NAME)
  with the file columns plus `dt`, as the Glue table shows them. The whole archive is read
  for each query: fine for a laptop's history, not for a year of production (use Athena).
- **Athena** (`AthenaEngine`): StartQueryExecution in the workgroup and Glue database of the
  deployment, poll until it ends, page through GetQueryResults.

DuckDB is in the `local` extra (`pip install 'duetime[local]'`), imported only by a local
query: Athena queries run without it.

The SQL dialects differ (DuckDB, Trino); the example queries of docs/history.md stick to what
both accept. The one function they spell differently, Trino's `approx_percentile(x, p)`, is
defined locally as a macro for DuckDB's `quantile_disc(x, p)` (exact, and like Trino's on
integers it returns a value of the column), so Athena's spelling works on both.
"""

from __future__ import annotations

import contextlib
import csv
import io
import json
import math
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import UTC, date, datetime
from decimal import Decimal
from typing import Any, cast

import pyarrow as pa
from botocore.exceptions import BotoCoreError, ClientError

from duetime.domain.text import clean
from duetime.history.archive import HistoryBucket
from duetime.history.schema import (
    HISTORY_SCHEMA,
    PARTITION_KEY,
    PREFIX,
    TABLE_NAME,
    conform,
    partition_from_key,
)

FORMATS = ("table", "json", "csv")
# Trino's spelling, for DuckDB: see the module's docstring.
LOCAL_MACROS = ("CREATE MACRO approx_percentile(x, p) AS quantile_disc(x, p)",)
READ_THREADS = 8
ATHENA_TIMEOUT_SECONDS = 600.0
ATHENA_PAGE_SIZE = 1000


class HistoryQueryError(RuntimeError):
    """The query could not run (bad SQL, engine failure, unreachable archive): a message."""


@dataclass(frozen=True)
class QueryResult:
    columns: tuple[str, ...]
    rows: tuple[tuple[Any, ...], ...]

    def records(self) -> list[dict[str, Any]]:
        return [dict(zip(self.columns, row, strict=True)) for row in self.rows]


# --- local: DuckDB over the Parquet objects --------------------------------------------------


def archive_schema() -> pa.Schema:
    """The table's columns as queries see them: the file columns and the `dt` partition."""
    return HISTORY_SCHEMA.append(pa.field(PARTITION_KEY, pa.string(), nullable=False))


def load_archive(bucket: HistoryBucket) -> pa.Table:
    """Every archived row, with its partition's `dt`, as one Arrow table."""
    try:
        objects = bucket.list(PREFIX)
        with ThreadPoolExecutor(max_workers=READ_THREADS) as pool:
            tables = list(pool.map(lambda o: bucket.read_table(o.key), objects))
    except (BotoCoreError, ClientError) as exc:
        raise HistoryQueryError(f"cannot read s3://{bucket.name}/{PREFIX}: {exc}") from None
    except ValueError as exc:  # an object that is not Parquet (named)
        raise HistoryQueryError(str(exc)) from None
    parts = []
    for obj, table in zip(objects, tables, strict=True):
        rows = conform(table)
        dt = partition_from_key(obj.key)
        parts.append(
            rows.append_column(
                archive_schema().field(PARTITION_KEY), pa.array([dt] * rows.num_rows, pa.string())
            )
        )
    if not parts:
        return archive_schema().empty_table()
    return pa.concat_tables(parts)


def duckdb_query(sql: str, tables: dict[str, pa.Table]) -> QueryResult:
    """Run `sql` on a fresh in-memory DuckDB that sees only `tables` (no file or network
    access, like Athena), in UTC."""
    import duckdb  # the local extra (see the module's docstring)

    con = duckdb.connect(":memory:")
    try:
        con.execute("SET TimeZone = 'UTC'")
        for statement in LOCAL_MACROS:
            con.execute(statement)
        for name, table in tables.items():
            con.register(name, table)
        con.execute("SET enable_external_access = false")
        con.execute("SET lock_configuration = true")
        _one_select(con, sql)
        result = _interruptible(con, sql)
    except duckdb.Error as exc:
        raise HistoryQueryError(str(exc)) from None
    finally:
        # A query Ctrl-C could not stop holds it: its error must not replace the interrupt.
        with contextlib.suppress(duckdb.Error):
            con.close()
    if result is None:
        return QueryResult((), ())
    columns = [column.to_pylist() for column in result.columns]
    return QueryResult(tuple(result.column_names), tuple(zip(*columns, strict=True)))


def _one_select(con: Any, sql: str) -> None:
    """A query is one SELECT (or WITH … SELECT), as Athena takes it: DuckDB ran each of
    several and answered the last, and ran DDL (until 2026-11-30; an outside audit)."""
    import duckdb

    statements = con.extract_statements(sql)
    if len(statements) != 1:
        raise HistoryQueryError(f"give one statement, not {len(statements)}: Athena takes one")
    if statements[0].type != duckdb.StatementType.SELECT:
        kind = str(statements[0].type).rsplit(".", 1)[-1]
        raise HistoryQueryError(f"a query must be a SELECT (or WITH … SELECT), not {kind}")


def _interruptible(con: Any, sql: str) -> pa.Table | None:
    """`sql`'s result on its own thread, so that Ctrl-C stops it: DuckDB did not always see
    the signal (a query ran on for a minute), or answered "Query interrupted" as an error of
    the SQL (exit 2, not 130; found by an outside audit). (An Event, not Thread.join: a join
    that Ctrl-C interrupts may take the thread for ended, on Python 3.11.)"""
    done: list[pa.Table | BaseException | None] = []
    finished = threading.Event()

    def run() -> None:
        try:
            # None for a statement without a result (the stubs do not say so).
            relation = cast("Any", con.sql(sql))
            done.append(None if relation is None else relation.to_arrow_table())
        except BaseException as exc:  # raised again in the caller's thread
            done.append(exc)
        finally:
            finished.set()

    threading.Thread(target=run, name="duetime-history-query", daemon=True).start()
    try:
        while not finished.wait(0.1):
            pass
    except KeyboardInterrupt:
        con.interrupt()
        finished.wait(5)
        raise
    if isinstance(done[0], BaseException):
        raise done[0]
    return done[0]


class LocalEngine:
    """DuckDB over the archive in `bucket`."""

    def __init__(self, bucket: HistoryBucket) -> None:
        self._bucket = bucket

    def query(self, sql: str) -> QueryResult:
        return duckdb_query(sql, {TABLE_NAME: load_archive(self._bucket)})


# --- Athena ----------------------------------------------------------------------------------

_INTEGER_TYPES = frozenset({"tinyint", "smallint", "integer", "int", "bigint"})
_FLOAT_TYPES = frozenset({"double", "float", "real"})


class AthenaEngine:
    """The same SQL on Athena: start, poll (backing off to 2 s), page through the results."""

    def __init__(
        self,
        athena: Any,  # boto3 Athena client
        workgroup: str,
        database: str,
        *,
        timeout_seconds: float = ATHENA_TIMEOUT_SECONDS,
        sleep: Callable[[float], None] = time.sleep,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._athena = athena
        self._workgroup = workgroup
        self._database = database
        self._timeout = timeout_seconds
        self._sleep = sleep
        self._clock = clock

    def query(self, sql: str) -> QueryResult:
        try:
            query_id: str = self._athena.start_query_execution(
                QueryString=sql,
                WorkGroup=self._workgroup,
                QueryExecutionContext={"Database": self._database},
            )["QueryExecutionId"]
            try:
                execution = self._wait(query_id)
            except KeyboardInterrupt:  # do not leave it running (and billing) behind
                self._athena.stop_query_execution(QueryExecutionId=query_id)
                raise
            return self._results(query_id, execution)
        except (BotoCoreError, ClientError) as exc:
            raise HistoryQueryError(f"Athena: {exc}") from None

    def _wait(self, query_id: str) -> dict[str, Any]:
        deadline = self._clock() + self._timeout
        delay = 0.2
        while True:
            execution: dict[str, Any] = self._athena.get_query_execution(QueryExecutionId=query_id)[
                "QueryExecution"
            ]
            status = execution.get("Status", {})
            state = status.get("State")
            if state == "SUCCEEDED":
                return execution
            if state in ("FAILED", "CANCELLED"):
                reason = status.get("StateChangeReason") or "no reason given"
                raise HistoryQueryError(f"Athena query {query_id} {state.lower()}: {reason}")
            if self._clock() >= deadline:
                self._athena.stop_query_execution(QueryExecutionId=query_id)
                raise HistoryQueryError(
                    f"Athena query {query_id} still {state} after {self._timeout:g} s: stopped"
                )
            self._sleep(delay)
            delay = min(delay * 1.5, 2.0)

    def _results(self, query_id: str, execution: dict[str, Any]) -> QueryResult:
        columns: list[tuple[str, str]] = []
        rows: list[tuple[Any, ...]] = []
        token: str | None = None
        first_page = True
        while True:
            kwargs: dict[str, Any] = {"QueryExecutionId": query_id, "MaxResults": ATHENA_PAGE_SIZE}
            if token:
                kwargs["NextToken"] = token
            page = self._athena.get_query_results(**kwargs)
            result_set = page.get("ResultSet", {})
            if first_page:
                info = result_set.get("ResultSetMetadata", {}).get("ColumnInfo", [])
                columns = [(c.get("Label") or c["Name"], c.get("Type", "varchar")) for c in info]
            page_rows = [
                tuple(d.get("VarCharValue") for d in row.get("Data", []))
                for row in result_set.get("Rows", [])
            ]
            if first_page and page_rows and _is_header(page_rows[0], columns, execution):
                page_rows = page_rows[1:]
            rows.extend(
                tuple(_athena_value(v, t) for v, (_, t) in zip(r, columns, strict=False))
                for r in page_rows
            )
            first_page = False
            token = page.get("NextToken")
            if not token:
                break
        return QueryResult(tuple(name for name, _ in columns), tuple(rows))


def _is_header(
    row: tuple[str | None, ...], columns: list[tuple[str, str]], execution: dict[str, Any]
) -> bool:
    """Athena repeats the column labels as the first row of a SELECT's (DML) results."""
    statement = execution.get("StatementType")
    if statement is not None:
        return bool(statement == "DML")
    return list(row) == [name for name, _ in columns]


def _athena_value(value: str | None, kind: str) -> Any:
    if value is None:
        return None
    kind = kind.lower()
    try:
        if kind in _INTEGER_TYPES:
            return int(value)
        if kind in _FLOAT_TYPES:
            return float(value)
    except ValueError:
        return value
    if kind == "boolean":
        return value == "true"
    return value


# --- output ----------------------------------------------------------------------------------


def plain(value: Any) -> Any:
    """A JSON-ready value; timestamps as `YYYY-MM-DD HH:MM:SS.fff` in UTC, as Athena prints
    them."""
    if isinstance(value, datetime):
        if value.tzinfo is not None:
            value = value.astimezone(UTC).replace(tzinfo=None)
        return value.isoformat(sep=" ", timespec="milliseconds")
    if isinstance(value, date):
        return value.isoformat()
    if isinstance(value, Decimal):
        # A whole number of scale 0 (DuckDB's count_if and sum of integers are 128-bit
        # integers, given as Decimal) is a number, as Athena's bigint; a decimal stays text,
        # as Athena prints it.
        exponent = value.as_tuple().exponent
        return int(value) if isinstance(exponent, int) and exponent == 0 else str(value)
    if isinstance(value, bytes):
        return value.hex()
    if isinstance(value, list | tuple):
        return [plain(v) for v in value]
    if isinstance(value, dict):
        return {str(k): plain(v) for k, v in value.items()}
    if isinstance(value, float) and not math.isfinite(value):
        return "NaN" if math.isnan(value) else "Infinity" if value > 0 else "-Infinity"  # as Athena
    if value is None or isinstance(value, bool | int | float | str):
        return value
    return str(value)


def _text(value: Any) -> str:
    """A cell of a table or of CSV, safe for a terminal (a run's error holds what its target
    answered: an escape sequence must not drive the terminal of whoever queries history)."""
    value = plain(value)
    if value is None:
        return ""
    if isinstance(value, list | dict):
        return json.dumps(value)  # (it escapes control characters itself)
    return str(value).lower() if isinstance(value, bool) else clean(str(value))


def _csv_cell(value: Any) -> str:
    """A CSV cell; text a spreadsheet would run as a formula (a tenant's job name, a target's
    answer) starts with `'`, as OWASP advises (since 2026-11-30; an outside audit)."""
    text = _text(value)
    formula = isinstance(plain(value), str) and text.startswith(("=", "+", "-", "@", "\t", "\r"))
    return f"'{text}" if formula else text


def render(result: QueryResult, fmt: str = "table") -> str:
    """The result as an aligned text table, a JSON array of objects, or CSV with a header."""
    if fmt == "json":
        twice = sorted({c for c in result.columns if result.columns.count(c) > 1})
        if twice:  # an object keeps one of them: the other would be lost without a word
            raise HistoryQueryError(
                f"columns share a name ({', '.join(twice)}): name them apart with AS for JSON"
            )
        records = [{k: plain(v) for k, v in r.items()} for r in result.records()]
        return json.dumps(records, indent=2, allow_nan=False) + "\n"
    if fmt == "csv":
        out = io.StringIO()
        writer = csv.writer(out, lineterminator="\n")
        writer.writerow(result.columns)
        writer.writerows([_csv_cell(v) for v in row] for row in result.rows)
        return out.getvalue()
    if fmt != "table":
        raise ValueError(f"unknown format {fmt!r}: one of {', '.join(FORMATS)}")
    return _table(result.columns, result.rows)


def _table(columns: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    cells = [[_text(v) for v in row] for row in rows]
    numeric = [  # (a Decimal count or sum is a number too: left-aligned until 2026-11-30)
        all(
            isinstance(plain(row[i]), int | float) and not isinstance(row[i], bool)
            for row in rows
            if row[i] is not None
        )
        for i in range(len(columns))
    ]
    widths = [max([len(name), *(len(row[i]) for row in cells)]) for i, name in enumerate(columns)]

    def line(values: Sequence[str]) -> str:
        return "  ".join(
            v.rjust(w) if numeric[i] else v.ljust(w)
            for i, (v, w) in enumerate(zip(values, widths, strict=True))
        ).rstrip()

    out = [line(columns), "  ".join("-" * w for w in widths)] if columns else []
    out += [line(row) for row in cells]
    out.append(f"({len(rows)} row{'' if len(rows) == 1 else 's'})")
    return "\n".join(out) + "\n"
