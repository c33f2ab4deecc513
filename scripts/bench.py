"""`scripts/bench.py`: duetime's benchmark on the local stack (moto on loopback).

    .venv/bin/python scripts/bench.py [--quick] [--out bench-results/<timestamp>]

Starts `duetime.local.stack.LocalStack` (ThreadedMotoServer with both moto fixes, the real
sweeper and worker handlers driven by the stack's pollers), submits `duetime.noop` jobs
through `JobService`, and records every executed run by wrapping `RunExecutor.handle` (as the
stack's own figures do). AWS requests are counted with botocore hooks on every client that
serves a run. Scenarios: raw (the emulator's own rate for the minimal calls of a run),
steady, burst (one by one, batch create, and batch create with staged jobs), cron
top-of-minute, due-vs-stored, and load (concurrent HTTP clients through the
local gateway, scripts/bench_load.py); each is compared with a model of the naive design (sweep
once a minute, enqueue due jobs with no delay). Writes results.json, summary.md and one PNG
per scenario under --out. See docs/performance.md.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import os
import platform
import random
import sys
import tempfile
import threading
import time
import uuid
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT / "shared"), str(ROOT)]

from duetime.clock import wall_ms  # noqa: E402 - from the path just set
from duetime.domain.jobs import MAX_STAGE_SECONDS  # noqa: E402
from duetime.domain.schedule import next_occurrence  # noqa: E402
from duetime.domain.timeutil import from_ms, to_ms  # noqa: E402
from duetime.local.lambda_runtime import LAMBDA_MAX_POLLERS  # noqa: E402
from scripts.bench_load import run_load  # noqa: E402

TENANT = "bench"
NOOP_TARGET = {"type": "handler", "name": "duetime.noop"}
READ_OPERATIONS = {"GetItem", "BatchGetItem", "Query", "Scan"}
WRITE_OPERATIONS = {"PutItem", "UpdateItem", "DeleteItem", "BatchWriteItem", "TransactWriteItems"}
SQS_BILLED = {
    "SendMessage",
    "SendMessageBatch",
    "ReceiveMessage",
    "DeleteMessage",
    "DeleteMessageBatch",
    "ChangeMessageVisibility",
    "ChangeMessageVisibilityBatch",
}
# us-east-1 list prices, November 2026 (the same table as docs/cost.md and performance.md).
PRICES = {
    "dynamodb_write_request_unit": 0.625e-6,
    "dynamodb_read_request_unit": 0.125e-6,
    "dynamodb_wcu_hour": 0.00065,
    "dynamodb_rcu_hour": 0.00013,
    "sqs_request": 0.40e-6,
}
HOURS_PER_MONTH = 730
# Provisioned capacity is bought for this share of use, like scripts/scale_model.py's
# `provisioned_utilisation` (an auto scaling target of 70 %).
PROVISIONED_UTILISATION = 0.7
# A read request unit reads up to 4 KB strongly consistent (half a unit eventually
# consistent); a read of an item that is not there still costs the minimum.
READ_UNIT_BYTES = 4096
SCENARIOS = (
    "steady",
    "burst",
    "burst_batch",
    "burst_staged",
    "cron_top_of_minute",
    "due_vs_stored",
    "load",
)
# `burst_staged`: its jobs' stage_seconds unless --stage-seconds says otherwise.
STAGE_SECONDS = 3
# Batches of 10 in the raw measurements taken just before and just after each burst's drain.
RAW_BATCHES_BESIDE_A_DRAIN = 50
# steady: its `delay_seconds` jobs are submitted this long before their instant.
DELAY_SECONDS = 2
SUBMIT_RATE = 60  # jobs/s the bench assumes it can submit (8 threads; ~120/s measured, 2 cores)
# A run not started when a scenario's wait ends is looked for until every queue is empty and
# nothing has started for QUIET_SECONDS (at most SETTLE_SECONDS): late, or lost.
SETTLE_SECONDS = 300
QUIET_SECONDS = 70  # longer than a sweep tick: a timer still in the table gets its sweep


# --- pure parts (tested in tests/unit/test_bench.py) ----------------------------------------


def percentile(ordered: Sequence[float], q: float) -> float | None:
    """Nearest-rank percentile of an ascending sequence (None when empty)."""
    if not ordered:
        return None
    return ordered[max(0, math.ceil(q * len(ordered)) - 1)]


def summarize(values: Iterable[float]) -> dict[str, float | int | None]:
    ordered = sorted(values)
    return {
        "count": len(ordered),
        "p50": percentile(ordered, 0.50),
        "p95": percentile(ordered, 0.95),
        "p99": percentile(ordered, 0.99),
        "max": ordered[-1] if ordered else None,
        "mean": sum(ordered) / len(ordered) if ordered else None,
    }


def dollars_per_million(
    writes_per_run: float,
    reads_per_run: float,
    sqs_per_run: float,
    runs_per_second: float = 100,
    sqs_billed_per_run: float | None = None,
) -> dict[str, float]:
    """$ per million runs. `writes_per_run` and `reads_per_run` are request *units* (what on
    demand bills), `sqs_per_run` the SQS requests that move runs (sends, non-empty receives,
    deletes). On demand: units at list price. Provisioned: the capacity that sustains
    `runs_per_second` for a month at PROVISIONED_UTILISATION (units per second = per-run ×
    rate ÷ 0.7, as scripts/scale_model.py), spread over the runs of that month.
    `sqs_billed_per_run`: every billed SQS request (empty receives and GetQueueAttributes
    too), priced apart as `sqs_billed` and `total_on_demand_billed_sqs`: the local pollers'
    1 s long polls make their empty receives scale with the time a scenario waits."""
    on_demand = (
        writes_per_run * PRICES["dynamodb_write_request_unit"]
        + reads_per_run * PRICES["dynamodb_read_request_unit"]
    ) * 1e6
    sqs = sqs_per_run * PRICES["sqs_request"] * 1e6
    month_runs = runs_per_second * 3600 * HOURS_PER_MONTH
    capacity = (
        (
            writes_per_run * runs_per_second * PRICES["dynamodb_wcu_hour"]
            + reads_per_run * runs_per_second * PRICES["dynamodb_rcu_hour"]
        )
        / PROVISIONED_UTILISATION
        * HOURS_PER_MONTH
    )
    provisioned = capacity / month_runs * 1e6 if month_runs else 0.0
    out = {
        "dynamodb_on_demand": round(on_demand, 4),
        "dynamodb_provisioned": round(provisioned, 4),
        "sqs": round(sqs, 4),
        "total_on_demand": round(on_demand + sqs, 4),
        "total_provisioned": round(provisioned + sqs, 4),
    }
    if sqs_billed_per_run is not None:
        billed = sqs_billed_per_run * PRICES["sqs_request"] * 1e6
        out["sqs_billed"] = round(billed, 4)
        out["total_on_demand_billed_sqs"] = round(on_demand + billed, 4)
    return out


def account(
    expected: Iterable[tuple[str, int]], executed: Iterable[tuple[str, int]]
) -> dict[str, int]:
    """Lost and duplicate runs: `expected` occurrences (job id, scheduled ms) against the
    executions recorded (one entry per execution of the target)."""
    want = Counter(expected)
    got = Counter(executed)
    lost = sum(max(0, n - got[k]) for k, n in want.items())
    duplicates = sum(max(0, n - max(want[k], 1)) for k, n in got.items())
    unexpected = sum(1 for k in got if k not in want)
    return {
        "expected": sum(want.values()),
        "executed": sum(got.values()),
        "lost": lost,
        "duplicates": duplicates,
        "unexpected": unexpected,
    }


def recurring_occurrences(
    job_id: str, schedule: Any, created_ms: int, until_ms: int
) -> list[tuple[str, int]]:
    """Every occurrence (job id, scheduled ms) of a recurring job by its own schedule, from
    its creation to `until_ms` (inclusive) or its `end_at`, whichever comes first: the runs
    the bench expects, whether or not any of them ran. The first is the one the job service
    plans at creation (`first_due`: not before the creation), the next ones follow with
    `duetime.domain.schedule.next_occurrence`, as the worker and sweeper chain them."""
    created = from_ms(created_ms)
    out: list[tuple[str, int]] = []
    found = next_occurrence(schedule, created_at=created, after=from_ms(created_ms - 1))
    while found is not None and to_ms(found) <= until_ms:
        out.append((job_id, to_ms(found)))
        found = next_occurrence(schedule, created_at=created, after=found)
    return out


def expected_runs(
    one_offs: Iterable[tuple[Any, int]], recurring: Iterable[Any], until_ms: int
) -> tuple[list[tuple[str, int]], list[tuple[str, int, int | None]]]:
    """The runs a scenario expects, and what it asked for against what was scheduled.

    `one_offs`: (job, the instant the bench asked for): one run each, at that instant (not at
    the job's `next_due_ms`: a due the scheduler shifted is then a lost run and an unexpected
    one). `recurring`: jobs whose every occurrence by schedule, from creation to `until_ms` or
    their `end_at`, is expected (`recurring_occurrences`), whether or not any ran; the first
    is checked against the job's `next_due_ms`. Returns (expected, asked), asked being
    (job id, requested, scheduled) for `due_mismatches`."""
    expected: list[tuple[str, int]] = []
    asked: list[tuple[str, int, int | None]] = []
    for job, want in one_offs:
        expected.append((job.id, want))
        asked.append((job.id, want, job.next_due_ms))
    for job in recurring:
        occurrences = recurring_occurrences(job.id, job.spec.schedule, job.created_ms, until_ms)
        expected += occurrences
        asked.append((job.id, occurrences[0][1] if occurrences else -1, job.next_due_ms))
    return expected, asked


def due_mismatches(requested: Iterable[tuple[str, int, int | None]]) -> list[dict[str, Any]]:
    """(job id, the instant the bench asked for, the scheduler's due) whose two instants
    differ: lateness is measured against the scheduler's own due, so a due it shifted would
    not show there. Each one is an accounting error (`accounting.due_mismatches`)."""
    return [
        {"job_id": job_id, "requested_ms": want, "scheduled_ms": got}
        for job_id, want, got in requested
        if want != got
    ]


def drain_figures(
    starts: Sequence[int], first_due_ms: int, last_due_ms: int, raw: float
) -> dict[str, Any]:
    """A burst's drain: N runs whose due instants span [first_due_ms, last_due_ms], started
    at `starts` (wall ms). `drain_ratio_to_raw` (the targets' definition) counts from the
    first due instant, so it includes the due second itself; `drain_ratio_from_last_due`
    counts from the last due instant (None when every run had started by then)."""
    ordered = sorted(starts)
    n = len(ordered)
    drain_seconds = (ordered[-1] - first_due_ms) / 1000 if ordered else None
    rate = n / max(drain_seconds or 0, 1e-3)
    after_last = (ordered[-1] - last_due_ms) / 1000 if ordered else None
    rate_after_last = n / after_last if after_last is not None and after_last > 0 else None
    return {
        "time_to_start_all_seconds": drain_seconds,
        "first_to_last_start_seconds": (ordered[-1] - ordered[0]) / 1000 if n > 1 else None,
        "drain_runs_per_second": round(rate, 1),
        "drain_ratio_to_raw": round(rate / raw, 3) if raw else None,
        "time_to_start_all_from_last_due_seconds": after_last,
        "drain_runs_per_second_from_last_due": (
            round(rate_after_last, 1) if rate_after_last is not None else None
        ),
        "drain_ratio_from_last_due": (
            round(rate_after_last / raw, 3) if rate_after_last is not None and raw else None
        ),
    }


def handover_tick(
    ticks: Sequence[int], due_ms: int, lookahead_minutes: int
) -> dict[str, Any] | None:
    """The sweep tick that handed a swept occurrence over: the first tick before `due_ms`
    whose minute plus the lookahead reaches the due's minute (services/sweep.py sweeps up to
    `minute_of(now) + lookahead_minutes`). Its phase is where in the minute the local stack
    ticks (it keeps the phase the stack started with, like a rate rule); the due is handed
    over `seconds_before_due` ahead. None when no recorded tick did it."""
    minute = due_ms // 60_000
    for tick in sorted(ticks):
        if tick < due_ms and tick // 60_000 + lookahead_minutes >= minute:
            return {
                "tick_utc": datetime.fromtimestamp(tick / 1000, UTC).isoformat(),
                "phase_seconds": round(tick % 60_000 / 1000, 3),
                "seconds_before_due": round((due_ms - tick) / 1000, 3),
            }
    return None


def naive_lateness(due_ms: Iterable[int], tick_phase_ms: int, period_ms: int = 60_000) -> list[int]:
    """The naive design: a sweep every `period_ms` (at phase + k·period) enqueues what is due
    with no delay, so each run starts at the first tick at or after its due instant."""
    out = []
    for due in due_ms:
        k = math.ceil((due - tick_phase_ms) / period_ms)
        out.append(tick_phase_ms + k * period_ms - due)
    return out


@dataclass(frozen=True)
class SteadyPlan:
    """The steady scenario's bodies: `raws[i]` due at `dues[i]` (one-offs), `one_off` and
    `recurring` (index, "rate" | "cron") index them; the window is [start_ms, end_ms]."""

    start_ms: int
    end_ms: int
    raws: list[dict[str, Any]]
    dues: list[int]
    one_off: list[int]
    recurring: list[tuple[int, str]]
    # The last `end_at` of the recurring bodies: every occurrence up to it is expected.
    recurring_end_ms: int = 0


def ceil_minute(ms: int) -> int:
    return -(-ms // 60_000) * 60_000


def steady_plan(now_ms: int, rate: int, seconds: int, lead_ms: int) -> SteadyPlan:
    """R jobs/s over `seconds` from `now_ms + lead_ms`: 70 % `at`, 20 % `at` submitted just in
    time as `delay_seconds`, 5 % `rate_seconds: 10`, 5 % `* * * * *`.

    Whatever the clock's phase, and even when a busy machine submits a body after the window
    has begun, every body has an occurrence: submission never answers "has no occurrence in
    the future". A recurring job's `end_at` is the window's end pushed to its first occurrence
    for a submission at that end: + 10 s for the rate job (first run = submission + 10 s), the
    next minute boundary for the cron job (a short window need not cross one). Every
    occurrence of a recurring job up to its `end_at` (`recurring_end_ms` the last) is expected
    and accounted for; those after the window are left out of its lateness. So the cron share
    runs at least once (at the first minute boundary at or after the window's end when the
    window crosses none), whatever the clock's phase."""
    start = now_ms + lead_ms
    end = start + seconds * 1000
    rate_end, cron_end = end + 10_000, ceil_minute(end)
    until_rate = {"end_at": rfc3339(rate_end)}
    until_cron = {"end_at": rfc3339(cron_end)}
    raws: list[dict[str, Any]] = []
    dues: list[int] = []
    one_off: list[int] = []
    recurring: list[tuple[int, str]] = []
    for i in range(rate * seconds):
        due = start + i * 1000 // rate
        kind = i % 20
        if kind == 0:  # 5%: a rate job whose next occurrences land in the window
            raws.append({"schedule": {"rate_seconds": 10, **until_rate}, "target": NOOP_TARGET})
            recurring.append((i, "rate"))
        elif kind == 1:  # 5%: a cron job (every minute)
            raws.append({"schedule": {"cron": "* * * * *", **until_cron}, "target": NOOP_TARGET})
            recurring.append((i, "cron"))
        else:  # 20% delay_seconds (kinds 2-5: submitted just in time), 70% at
            raws.append({"schedule": {"at": rfc3339(due)}, "target": NOOP_TARGET})
            one_off.append(i)
        dues.append(due)
    return SteadyPlan(start, end, raws, dues, one_off, recurring, max(rate_end, cron_end))


def burst_instants(due_ms: int, n: int) -> list[int]:
    """The instants (ms) a burst of N asks for: spread over the second from `due_ms`."""
    return [due_ms + (i * 997) % 1000 for i in range(n)]


def burst_bodies(due_ms: int, n: int, stage_seconds: int = 0) -> list[dict[str, Any]]:
    """N one-offs spread over the second from `due_ms`: an `at` always has its occurrence;
    staged `stage_seconds` when not 0."""
    staged = {"stage_seconds": stage_seconds} if stage_seconds else {}
    return [
        {"schedule": {"at": rfc3339(at)}, "target": NOOP_TARGET} | staged
        for at in burst_instants(due_ms, n)
    ]


def cron_top_plan(now_ms: int, lead_ms: int) -> tuple[int, dict[str, Any]]:
    """The cron top-of-minute scenario's due :00 (the first minute boundary after `now_ms +
    lead_ms`) and its body: `MM HH * * *` (daily, UTC) ending a minute after that :00, so a
    job submitted within the lead has exactly one occurrence, at that :00."""
    due = (now_ms + lead_ms) // 60_000 * 60_000 + 60_000
    when = datetime.fromtimestamp(due / 1000, UTC)
    raw = {
        "schedule": {
            "cron": f"{when.minute} {when.hour} * * *",
            "timezone": "UTC",
            "end_at": rfc3339(due + 60_000),
        },
        "target": NOOP_TARGET,
    }
    return due, raw


# Request units per one-off run of the naive design (a model, see docs/performance.md): the
# job is written once (PutItem into a table with a due-time global secondary index: 1 unit for
# the table, 1 for the index), the per-minute Query of the index reads it (one 4 KB page
# serves many jobs: ~0.05 units per run), the run is recorded (PutItem, 1) and the job marked
# done (UpdateItem, 1, which takes it out of the due-time index: 1 more); SQS sends, receives
# and deletes in batches of 10. 5 write units in all: an index's writes are billed as writes.
NAIVE_PER_RUN = {"dynamodb_writes": 5.0, "dynamodb_reads": 0.05, "sqs_requests": 0.3}


# --- request counting -----------------------------------------------------------------------


def attribute_bytes(value: dict[str, Any]) -> int:
    """About the size DynamoDB bills for one attribute value (wire format: {"S": ...})."""
    (kind, inner), *_ = value.items()
    if kind == "S":
        return len(inner.encode())
    if kind == "N":
        return (len(inner.lstrip("-").replace(".", "")) + 1) // 2 + 1
    if kind == "B":
        return len(inner)
    if kind in ("SS", "BS"):
        return sum(len(x.encode() if isinstance(x, str) else x) for x in inner)
    if kind == "NS":
        return sum(attribute_bytes({"N": x}) for x in inner)
    if kind == "L":
        return 3 + sum(1 + attribute_bytes(x) for x in inner)
    if kind == "M":
        return 3 + sum(1 + len(k.encode()) + attribute_bytes(v) for k, v in inner.items())
    return 1  # BOOL, NULL


def item_bytes(item: dict[str, Any]) -> int:
    """About an item's billed size: its attribute names plus their values."""
    return sum(len(name.encode()) + attribute_bytes(value) for name, value in item.items())


def read_units(item_sizes: Iterable[int], consistent: bool) -> float:
    """Read request units of a GetItem/BatchGetItem: each item (or absent key, size 0) rounded
    up to 4 KB, at least one unit; half for an eventually consistent read."""
    units = sum(max(1, -(-size // READ_UNIT_BYTES)) for size in item_sizes)
    return units if consistent else units / 2


def query_read_units(total_bytes: int, consistent: bool) -> float:
    """Read request units of one Query/Scan page: its items' bytes together, rounded up to
    4 KB, at least one unit; half for an eventually consistent read."""
    units = max(1, -(-total_bytes // READ_UNIT_BYTES))
    return units if consistent else units / 2


@dataclass
class RequestLog:
    calls: Counter[str] = field(default_factory=Counter)  # "service.Operation"
    write_units: int = 0  # items written (each under 1 KB: one unit each)
    read_items: int = 0
    read_units: float = 0.0  # read request units, from the items' sizes (priced)
    sqs_requests: int = 0  # SQS requests that move runs, empty receives excluded
    empty_receives: int = 0
    received_messages: int = 0  # messages returned by the non-empty receives
    enabled: bool = True
    lock: threading.Lock = field(default_factory=threading.Lock)

    def attach(self, client: Any) -> None:
        client.meta.events.register("before-parameter-build", self._before)
        client.meta.events.register("after-call", self._after)

    def reset(self) -> None:
        with self.lock:
            self.calls.clear()
            self.write_units = self.read_items = self.sqs_requests = self.empty_receives = 0
            self.received_messages = 0
            self.read_units = 0.0

    def _before(
        self,
        event_name: str,
        params: dict[str, Any],
        context: dict[str, Any] | None = None,
        **_: Any,
    ) -> None:
        if not self.enabled:
            return
        parts = event_name.split(".")
        service, operation = parts[-2], parts[-1]
        if context is not None and operation in READ_OPERATIONS:
            # Read back by _after (the same request's context): the consistency of each table.
            if operation == "BatchGetItem":
                asked = params.get("RequestItems", {})
                context["bench_consistent"] = {
                    table: bool(spec.get("ConsistentRead")) for table, spec in asked.items()
                }
                context["bench_keys"] = {
                    table: len(spec.get("Keys", [])) for table, spec in asked.items()
                }
            else:
                context["bench_consistent"] = bool(params.get("ConsistentRead"))
        with self.lock:
            self.calls[f"{service}.{operation}"] += 1
            if operation in WRITE_OPERATIONS:
                if operation == "BatchWriteItem":
                    self.write_units += sum(len(v) for v in params["RequestItems"].values())
                elif operation == "TransactWriteItems":
                    self.write_units += 2 * len(params["TransactItems"])
                else:
                    self.write_units += 1
            if operation in SQS_BILLED and operation != "ReceiveMessage":
                self.sqs_requests += 1

    def _after(
        self,
        event_name: str,
        parsed: dict[str, Any],
        context: dict[str, Any] | None = None,
        **_: Any,
    ) -> None:
        if not self.enabled:
            return
        operation = event_name.rsplit(".", maxsplit=1)[-1]
        consistent = (context or {}).get("bench_consistent", True)
        if "Error" in parsed:
            return  # a refused request: no items (its units are not known here)
        with self.lock:
            if operation == "ReceiveMessage":
                if messages := parsed.get("Messages"):
                    self.sqs_requests += 1
                    self.received_messages += len(messages)
                else:
                    self.empty_receives += 1
            elif operation in ("Query", "Scan"):
                count = int(parsed.get("Count", 0))
                self.read_items += count
                items = parsed.get("Items", [])
                size = sum(item_bytes(i) for i in items)
                # Filtered out items are read (and billed) too: scale by what was scanned.
                scanned = int(parsed.get("ScannedCount", count))
                if items and scanned > len(items):
                    size = size * scanned // len(items)
                self.read_units += query_read_units(size, consistent is not False)
            elif operation == "GetItem":
                item = parsed.get("Item")
                self.read_items += 1 if item else 0
                self.read_units += read_units(
                    [item_bytes(item) if item else 0], consistent is not False
                )
            elif operation == "BatchGetItem":
                for table, items in parsed.get("Responses", {}).items():
                    self.read_items += len(items)
                    strong = consistent.get(table, True) if isinstance(consistent, dict) else True
                    self.read_units += read_units([item_bytes(i) for i in items], strong)
                # Keys asked for and not found cost the minimum each; the unprocessed ones
                # are asked for again (and counted then).
                asked = (context or {}).get("bench_keys", {})
                for table, keys in asked.items():
                    found = len(parsed.get("Responses", {}).get(table, []))
                    left = len(parsed.get("UnprocessedKeys", {}).get(table, {}).get("Keys", []))
                    absent = max(0, keys - found - left)
                    strong = consistent.get(table, True) if isinstance(consistent, dict) else True
                    self.read_units += read_units([0] * absent, strong)

    def per_run(self, runs: int) -> dict[str, Any]:
        with self.lock:
            calls = dict(sorted(self.calls.items()))
            reads = sum(n for k, n in calls.items() if k.split(".")[-1] in READ_OPERATIONS)
            writes, sqs = self.write_units, self.sqs_requests
            empty, items, units = self.empty_receives, self.read_items, self.read_units
            received = self.received_messages
        n = max(runs, 1)
        # Every SQS request is billed: empty receives and GetQueueAttributes included.
        billed = sum(v for k, v in calls.items() if k.split(".")[0] == "sqs")
        non_empty = calls.get("sqs.ReceiveMessage", 0) - empty
        return {
            "runs": runs,
            "calls": calls,
            "calls_per_run": {k: round(v / n, 3) for k, v in calls.items()},
            "dynamodb_write_units_per_run": round(writes / n, 3),
            "dynamodb_read_requests_per_run": round(reads / n, 3),
            "dynamodb_read_items_per_run": round(items / n, 3),
            # What on demand bills, from the sizes of the items read (priced below).
            "dynamodb_read_units_per_run": round(units / n, 3),
            "sqs_requests_per_run": round(sqs / n, 3),
            "sqs_billed_requests_per_run": round(billed / n, 3),
            "empty_receives": empty,
            "non_empty_receives": non_empty,
            # Batch fill: messages per receive that returned any (a Lambda invocation's records).
            "records_per_receive": round(received / non_empty, 2) if non_empty > 0 else None,
            "dollars_per_million_runs": dollars_per_million(
                writes / n, units / n, sqs / n, sqs_billed_per_run=billed / n
            ),
        }


# --- recording runs -------------------------------------------------------------------------


class Recorder:
    """Every execution of a target, recorded at the target (the side effect itself, after
    the claim): (job id, scheduled ms, lateness ms, started wall ms). A delivery that finds
    its run already claimed or finished never reaches the target, so it is not counted."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.executions: list[tuple[str, int, int, int]] = []
        # (job id, scheduled ms) -> the early wait its run recorded (Run.early_wait_ms)
        self.early_waits: dict[tuple[str, int], int] = {}

    def wrap_handle(self, handle: Callable[..., Any]) -> Callable[..., Any]:
        """Keep the early wait of every run a delivery claimed (the run record's field)."""

        def observed(*args: Any, **kwargs: Any) -> Any:
            result = handle(*args, **kwargs)
            run = result.run
            if run is not None and run.early_wait_ms is not None:
                with self.lock:
                    self.early_waits[(run.job_id, run.scheduled_ms)] = run.early_wait_ms
            return result

        return observed

    def wrap(self, execute: Callable[[Any, Any], None]) -> Callable[[Any, Any], None]:
        def observed(target: Any, invocation: Any) -> None:
            started = wall_ms()
            with self.lock:
                self.executions.append(
                    (
                        invocation.job_id,
                        invocation.scheduled_ms,
                        started - invocation.scheduled_ms,
                        started,
                    )
                )
            execute(target, invocation)

        return observed

    def take(self) -> list[tuple[str, int, int, int]]:
        with self.lock:
            out, self.executions = self.executions, []
        return out

    def count(self) -> int:
        with self.lock:
            return len(self.executions)


class TickLog:
    """When the local stack's sweep ticks come (wall ms): a wrapper around `LocalStack.tick`."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.ticks: list[int] = []

    def wrap(self, tick: Callable[[], Any]) -> Callable[[], Any]:
        def observed() -> Any:
            with self.lock:
                self.ticks.append(wall_ms())
            return tick()

        return observed


@dataclass
class ManualClock:
    """The due-vs-stored scenario's clock (ms), moved by hand between sweeps."""

    now: int

    def __call__(self) -> int:
        return self.now


def say(text: str) -> None:
    """Progress on stderr: the local stack sends stdout to the functions' log stream."""
    print(text, file=sys.stderr, flush=True)


def rfc3339(ms: int) -> str:
    return datetime.fromtimestamp(ms / 1000, UTC).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"


# --- the bench ------------------------------------------------------------------------------


class Bench:
    def __init__(
        self,
        out: Path,
        quick: bool,
        pollers: int = LAMBDA_MAX_POLLERS,
        sizes: dict[str, int] | None = None,
        scenarios: Sequence[str] = SCENARIOS,
        claim_lead_ms: int = 1_000,
        stage_seconds: int = STAGE_SECONDS,
    ) -> None:
        self.scenarios = scenarios
        self.claim_lead_ms = claim_lead_ms
        self.stage_seconds = stage_seconds
        self.out = out
        self.quick = quick
        self.pollers = pollers
        defaults = (
            {
                "rate": 20,
                "seconds": 10,
                "burst": 200,
                "cron": 200,
                "clients": 16,
                "load_seconds": 15,
            }
            if quick
            else {
                "rate": 100,
                "seconds": 30,
                "burst": 2000,
                "cron": 1000,
                "clients": 16,
                "load_seconds": 40,
            }
        )
        self.sizes = defaults | {k: v for k, v in (sizes or {}).items() if v}
        self.results: dict[str, Any] = {"scenarios": {}}
        self.recorder = Recorder()
        self.ticks = TickLog()
        self.log = RequestLog()
        self.tenant_of: dict[str, str] = {}  # the load scenario's jobs: one tenant per client
        self.raw = 0.0  # the run's raw rate (runs/s), measured before the scenarios
        self.raw_target: tuple[Any, Any, str, str] | None = None  # its clients, table, queue

    def run(self) -> None:
        from duetime.local.stack import LocalOptions, LocalStack

        state = self.state = Path(tempfile.mkdtemp(prefix="duetime-bench-"))
        options = LocalOptions(
            port=0,
            tick_seconds=60.0,
            state_dir=state,
            figures_seconds=3600,
            lambda_pollers=self.pollers,
            claim_lead_ms=self.claim_lead_ms,
        )
        with open(os.devnull, "w") as devnull, LocalStack(options, log_stream=devnull) as stack:
            self.stack = stack
            parts = stack.components
            self.parts = parts
            targets = parts.executor._targets
            targets.execute = self.recorder.wrap(targets.execute)  # type: ignore[method-assign]
            executor = parts.executor
            executor.handle = self.recorder.wrap_handle(executor.handle)  # type: ignore[method-assign]
            for client in (parts.timers._client, parts.queue._client, stack._sqs):
                self.log.attach(client)
            # The tick loop calls `stack.tick()` each minute: record when (its phase).
            stack.tick = self.ticks.wrap(stack.tick)  # type: ignore[method-assign]
            self.results["machine"] = machine()
            self.results["pollers_per_lambda_queue"] = self.pollers
            self.results["claim_lead_ms"] = self.claim_lead_ms
            self.results["stage_seconds"] = self.stage_seconds
            self.results["started"] = datetime.now(UTC).isoformat()
            self.raw_rate()
            for name in self.scenarios:
                getattr(self, name)()
        with self.ticks.lock:
            # The sweep ticks seen (the stack's first, at its start, comes before the wrapper).
            self.results["sweep_ticks"] = {
                "count": len(self.ticks.ticks),
                "phase_seconds": sorted({round(t % 60_000 / 1000, 1) for t in self.ticks.ticks}),
            }
        self.results["finished"] = datetime.now(UTC).isoformat()
        self.write()

    def client(self, service: str) -> Any:
        """A boto3 client of the local stack's moto server."""
        assert self.stack.session is not None
        return self.stack.session.client(service, endpoint_url=self.stack.moto_url)

    # --- the emulator's raw rate ---------------------------------------------------------

    def raw_rate(self) -> None:
        """The run's raw rate, measured once before the scenarios."""
        runs, seconds = self.measure_raw(20 if self.quick else 100)
        self.raw = runs / seconds
        self.results["raw"] = {
            "runs": runs,
            "seconds": round(seconds, 3),
            "runs_per_second": round(self.raw, 1),
            "calls": "per 10 runs: SendMessageBatch + ReceiveMessage + DeleteMessageBatch "
            "+ 10 PutItem, one thread",
        }
        say(f"raw emulator rate: {self.raw:.1f} runs/s")

    def measure_raw(self, batches: int) -> tuple[int, float]:
        """(runs, seconds) of a run's minimal calls, `batches` batches of 10, on a queue and
        a table of their own (created once)."""
        if self.raw_target is None:
            sqs, ddb = self.client("sqs"), self.client("dynamodb")
            name = f"bench-raw-{uuid.uuid4().hex[:6]}"
            url = sqs.create_queue(QueueName=name)["QueueUrl"]
            ddb.create_table(
                TableName=name,
                KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}],
                AttributeDefinitions=[{"AttributeName": "pk", "AttributeType": "S"}],
                BillingMode="PAY_PER_REQUEST",
            )
            self.raw_target = (sqs, ddb, name, url)
        sqs, ddb, name, url = self.raw_target
        started = time.perf_counter()
        runs = 0
        for b in range(batches):
            sqs.send_message_batch(
                QueueUrl=url,
                Entries=[{"Id": str(i), "MessageBody": f"{b}-{i}"} for i in range(10)],
            )
            got = sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10).get("Messages", [])
            for m in got:
                ddb.put_item(TableName=name, Item={"pk": {"S": m["MessageId"]}})
            if got:
                sqs.delete_message_batch(
                    QueueUrl=url,
                    Entries=[
                        {"Id": str(i), "ReceiptHandle": m["ReceiptHandle"]}
                        for i, m in enumerate(got)
                    ],
                )
            runs += len(got)
        return runs, time.perf_counter() - started

    # --- helpers -------------------------------------------------------------------------

    def submit(self, raws: Sequence[dict[str, Any]]) -> list[Any]:
        from duetime.domain.jobs import parse_job_spec

        service = self.parts.service

        def one(raw: dict[str, Any]) -> Any:
            return service.create(TENANT, parse_job_spec(raw))

        with ThreadPoolExecutor(8) as pool:
            return list(pool.map(one, raws))

    def submit_batches(self, raws: Sequence[dict[str, Any]]) -> list[Any]:
        """Through batch create (`POST /jobs/batch`'s service), 100 jobs a request."""
        from duetime.domain.jobs import parse_job_spec
        from duetime.services.batch import MAX_BATCH_JOBS, BatchJob, BatchSubmitter

        submitter = BatchSubmitter(self.parts.service)
        chunks = [raws[i : i + MAX_BATCH_JOBS] for i in range(0, len(raws), MAX_BATCH_JOBS)]

        def one(chunk: Sequence[dict[str, Any]]) -> list[Any]:
            results = submitter.create(TENANT, [BatchJob(parse_job_spec(r)) for r in chunk])
            refused = [r for r in results if isinstance(r, Exception)]
            if refused:
                raise RuntimeError(f"batch create refused {len(refused)} jobs: {refused[0]}")
            return [r.job for r in results]

        with ThreadPoolExecutor(8) as pool:
            return [job for jobs in pool.map(one, chunks) for job in jobs]

    def wait_for(self, count: int, timeout: float) -> float:
        """Wait until `count` executions are recorded; returns when the last one landed."""
        deadline = time.monotonic() + timeout
        while self.recorder.count() < count and time.monotonic() < deadline:
            time.sleep(0.05)
        return time.monotonic()

    def queued(self) -> int:
        """Messages in every queue and DLQ (visible, in flight or delayed)."""
        from duetime.local.figures import queue_depth

        if not hasattr(self, "_depth_sqs"):
            self._depth_sqs = self.client("sqs")  # not counted: not the scheduler's calls
        settings = self.stack.settings
        urls = [u for q in settings.queues.values() for u in (*q.lanes, q.dlq_url)]
        return sum(queue_depth(self._depth_sqs, url) for url in urls)

    def settle(
        self, expected: list[tuple[str, int]], executions: list[tuple[str, int, int, int]]
    ) -> dict[str, Any]:
        """Late or lost? Runs still missing when the wait ended: keep recording until every
        queue is empty and nothing has started for QUIET_SECONDS (at most SETTLE_SECONDS),
        then look each run still missing up in the stores. Adds late starts of the expected
        jobs to `executions`: a run of another job (an earlier scenario's recurring job) that
        starts meanwhile is left out, as the scenario left it out of what it recorded before.
        """
        ran = Counter((e[0], e[1]) for e in executions)
        missing = Counter(expected) - ran
        report: dict[str, Any] = {"missing_when_wait_ended": sum(missing.values())}
        if not missing:
            return report
        say(f"{report['missing_when_wait_ended']} runs not started yet: waiting for a quiet system")
        ids = {job_id for job_id, _ in expected}
        started = time.monotonic()
        quiet_since = time.monotonic()
        while time.monotonic() - started < SETTLE_SECONDS:
            time.sleep(1)
            late = self.recorder.take()
            executions += [e for e in late if e[0] in ids]
            if late or self.queued():
                quiet_since = time.monotonic()
            elif time.monotonic() - quiet_since >= QUIET_SECONDS:
                break
        still = Counter(expected) - Counter((e[0], e[1]) for e in executions)
        report["settled_seconds"] = round(time.monotonic() - started, 1)
        report["late_after_wait"] = report["missing_when_wait_ended"] - sum(still.values())
        report["still_missing"] = [
            {"job_id": job_id, "scheduled_ms": ms, "found": self.inspect(job_id, ms)}
            for job_id, ms in still
        ][:50]
        return report

    def inspect(self, job_id: str, scheduled_ms: int) -> str:
        """Where a missing run is: its run record's status, else its job's."""
        run = self.parts.runs.get(job_id, scheduled_ms)
        if run is not None:
            return f"run record {run.status}"
        job = self.parts.jobs.get(self.tenant_of.get(job_id, TENANT), job_id)
        return f"no run record; job {job.status if job else 'missing'}"

    def scenario(
        self,
        name: str,
        executions: list[tuple[str, int, int, int]],
        expected: list[tuple[str, int]],
        extra: dict[str, Any],
        naive_due: list[int],
        request_runs: int | None = None,
        *,
        accounted: list[tuple[str, int, int, int]] | None = None,
        requests: dict[str, Any] | None = None,
        mismatches: list[dict[str, Any]] | None = None,
    ) -> dict[str, Any]:
        """`executions`: the runs whose lateness is reported; `accounted` (default the same):
        the runs checked against `expected` (steady: recurring occurrences after the window
        too). `request_runs`: the runs the counted requests served, when more than
        `executions`; `requests`: the request figures when taken earlier (steady: at the
        window's end, before the wait for the recurring occurrences after it). `mismatches`:
        jobs whose scheduled instant is not the one the bench asked for (due_mismatches)."""
        lateness = [e[2] for e in executions]
        phase = random.Random(name).randrange(60_000) + (min(naive_due) if naive_due else 0)
        naive = naive_lateness(naive_due, phase)
        runs = len(executions)
        with self.recorder.lock:
            early = [
                w
                for e in executions
                if (w := self.recorder.early_waits.get((e[0], e[1]))) is not None
            ]
        if requests is None:
            requests = self.log.per_run(request_runs or runs)
        checked = executions if accounted is None else accounted
        accounting = account(expected, [(e[0], e[1]) for e in checked])
        # A run scheduled at another instant than the bench asked for is an error too.
        accounting["due_mismatches"] = len(mismatches or [])
        result = {
            "lateness_ms": summarize(lateness),
            # How long deliveries waited for their instants (paid time on Lambda).
            "early_wait_ms": summarize(early),
            "accounting": accounting,
            "requests": requests,
            # Every call the scheduler made to the emulator (empty receives included).
            "emulator_calls_per_run": round(
                sum(requests["calls"].values()) / max(requests["runs"], 1), 2
            ),
            # Batch fill: messages per receive that returned any (docs/cost.md's model
            # assumes 10 records a Lambda invocation).
            "records_per_receive": requests.get("records_per_receive"),
            "baseline_naive": {
                "lateness_ms": summarize(naive),
                "per_run": NAIVE_PER_RUN,
                "dollars_per_million_runs": dollars_per_million(
                    NAIVE_PER_RUN["dynamodb_writes"],
                    NAIVE_PER_RUN["dynamodb_reads"],
                    NAIVE_PER_RUN["sqs_requests"],
                ),
            },
            **extra,
        }
        if mismatches:
            result["due_mismatch_samples"] = mismatches[:10]
        self.results["scenarios"][name] = result
        self.plot(name, lateness, naive)
        lat, wait = result["lateness_ms"], result["early_wait_ms"]
        say(
            f"{name}: runs {runs}, lateness p50 {lat['p50']} p99 {lat['p99']} max {lat['max']} ms, "
            f"early wait p50 {wait['p50']} p99 {wait['p99']} ms, "
            f"accounting {result['accounting']}, per run "
            f"{requests['dynamodb_write_units_per_run']} writes, "
            f"{requests['dynamodb_read_units_per_run']} read units, "
            f"{requests['sqs_requests_per_run']} SQS ({requests['sqs_billed_requests_per_run']} "
            f"billed), {result['records_per_receive']} records a receive, "
            f"${requests['dollars_per_million_runs']['total_on_demand']}/M on demand"
        )
        return result

    # --- steady --------------------------------------------------------------------------

    def steady(self) -> None:
        rate, seconds = self.sizes["rate"], self.sizes["seconds"]
        n = rate * seconds
        # Time to submit them all before the first is due: a job submitted after its instant
        # would measure the bench, not the scheduler.
        lead_ms = int(n / SUBMIT_RATE * 1000) + 5000
        self.recorder.take()
        self.log.reset()
        plan = steady_plan(wall_ms(), rate, seconds, lead_ms)
        start, raws, dues = plan.start_ms, plan.raws, plan.dues
        one_off_index, recurring = plan.one_off, plan.recurring
        # delay_seconds jobs are submitted just in time with a whole-second delay
        delay_idx = [i for i in one_off_index if 2 <= i % 20 < 6]
        submit_started = time.monotonic()
        early = [i for i in range(n) if i not in set(delay_idx)]
        jobs: dict[int, Any] = dict(zip(early, self.submit([raws[i] for i in early]), strict=True))
        submit_seconds = time.monotonic() - submit_started
        # submit the delay jobs: each when its due instant is a whole number of seconds away
        delay_jobs = self._submit_delays(delay_idx, dues)
        jobs.update(delay_jobs)
        end = plan.end_ms
        # Expected: each one-off at the instant the bench asked for (an `at`; a delay counted
        # from the job's creation), each recurring job's every occurrence by its schedule from
        # its creation to its end_at, whether or not any ran.
        delay_set = set(delay_idx)
        rec_ids = {jobs[i].id: jobs[i] for i, _ in recurring}
        expected, asked = expected_runs(
            (
                (jobs[i], jobs[i].created_ms + DELAY_SECONDS * 1000 if i in delay_set else dues[i])
                for i in one_off_index
                if i in jobs
            ),
            rec_ids.values(),
            plan.recurring_end_ms,
        )
        mismatches = due_mismatches(asked)
        in_window = [(j, s) for j, s in expected if s <= end or j not in rec_ids]
        time.sleep(max(0.0, (end - wall_ms()) / 1000) + 3)
        # A run that has not started when the wait ends counts as lost: give a backlog time.
        self.wait_for(len(in_window), max(20.0, n / 20))
        # The requests per run are taken here, over every run served so far (as before the
        # recurring occurrences after the window were awaited): the wait below is idle time,
        # whose empty receives would be divided by a few runs.
        served = self.recorder.count()
        requests = self.log.per_run(served)
        if plan.recurring_end_ms > end:
            # The recurring occurrences after the window: up to its first minute boundary.
            time.sleep(max(0.0, (plan.recurring_end_ms - wall_ms()) / 1000) + 3)
            self.wait_for(len(expected), 20.0)
        ids = {job.id for job in jobs.values()}
        executions = [e for e in self.recorder.take() if e[0] in ids]
        settled = self.settle(expected, executions)
        # Lateness is the window's: recurring occurrences after `end` are accounted for above
        # (every one expected) and reported apart; one-offs all count.
        window = [e for e in executions if e[1] <= end or e[0] not in rec_ids]
        after = [e for e in executions if e[1] > end and e[0] in rec_ids]
        kinds = {jobs[i].id: "at" for i in one_off_index if i in jobs}
        kinds |= {jobs[i].id: "delay_seconds" for i in delay_idx if i in jobs}
        kinds |= {jobs[i].id: kind for i, kind in recurring}
        by_kind = {
            kind: summarize(e[2] for e in window if kinds.get(e[0]) == kind)
            for kind in ("at", "delay_seconds", "rate", "cron")
        }
        occurrences = {
            kind: {
                "expected": sum(1 for j, _ in expected if kinds.get(j) == kind),
                "expected_in_window": sum(1 for j, _ in in_window if kinds.get(j) == kind),
                "executed": sum(1 for e in executions if kinds.get(e[0]) == kind),
                "lateness_after_window_ms": summarize(
                    e[2] for e in after if kinds.get(e[0]) == kind
                ),
            }
            for kind in ("rate", "cron")
        }
        self.scenario(
            "steady",
            window,
            expected,
            {
                "rate_per_second": rate,
                "seconds": seconds,
                "jobs": n,
                "mix": "70% at, 20% delay_seconds, 5% rate_seconds=10, 5% cron * * * * *",
                "submit_seconds": round(submit_seconds, 2),
                "submitted_before_first_due": submit_seconds * 1000 < lead_ms,
                "window_utc": [
                    datetime.fromtimestamp(start / 1000, UTC).isoformat(),
                    datetime.fromtimestamp(end / 1000, UTC).isoformat(),
                ],
                "recurring_end_utc": datetime.fromtimestamp(
                    plan.recurring_end_ms / 1000, UTC
                ).isoformat(),
                "lateness_by_kind_ms": by_kind,
                # Every recurring occurrence by schedule up to its end_at: how many, how many
                # in the window (a short window may cross no minute: then the cron share's
                # runs all come after it, at its end_at), how many ran, and their lateness.
                "recurring_occurrences": occurrences,
                "settle": settled,
            },
            [d for _, d in in_window],
            requests=requests,
            accounted=executions,
            mismatches=mismatches,
        )

    def _submit_delays(self, idx: list[int], dues: list[int]) -> dict[int, Any]:
        """Each job `DELAY_SECONDS` before its instant, as `delay_seconds`."""
        from duetime.domain.jobs import parse_job_spec

        out: dict[int, Any] = {}
        pending = sorted(idx, key=lambda i: dues[i])
        pool = ThreadPoolExecutor(4)

        def submit(i: int, delay: int) -> None:
            spec = parse_job_spec({"schedule": {"delay_seconds": delay}, "target": NOOP_TARGET})
            out[i] = self.parts.service.create(TENANT, spec)

        for i in pending:
            delay = DELAY_SECONDS
            wait = (dues[i] - delay * 1000 - wall_ms()) / 1000
            if wait > 0:
                time.sleep(wait)
            pool.submit(submit, i, delay)
        pool.shutdown(wait=True)
        return out

    # --- burst ---------------------------------------------------------------------------

    def burst(self, name: str = "burst") -> None:
        """N one-offs due in the same second, submitted one by one (`burst`) or with batch
        create, 100 a request (`burst_batch`: each request's runs are sent 10 a message
        batch, so they become visible together; `burst_staged`: the same, the jobs staged
        `stage_seconds`, docs/performance.md "Staged runs")."""
        n = self.sizes["burst"]
        stage = self.stage_seconds if name == "burst_staged" else 0
        # The drain is compared with the raw rate measured just before and just after it: the
        # machine's speed swings over minutes, so the run's first measurement can be stale.
        runs, seconds = self.measure_raw(RAW_BATCHES_BESIDE_A_DRAIN)
        raw_before = runs / seconds
        lead_ms = int(n / SUBMIT_RATE * 1000) + 5000 + stage * 1000
        self.recorder.take()
        self.log.reset()
        due = (wall_ms() + lead_ms) // 1000 * 1000
        bodies = burst_bodies(due, n, stage)
        instants = burst_instants(due, n)
        batched = name in ("burst_batch", "burst_staged")
        jobs = self.submit_batches(bodies) if batched else self.submit(bodies)
        # Expected at the instants the bench asked for (jobs come back in the bodies' order).
        expected = [(j.id, at) for j, at in zip(jobs, instants, strict=True)]
        mismatches = due_mismatches(
            (j.id, at, j.next_due_ms) for j, at in zip(jobs, instants, strict=True)
        )
        time.sleep(max(0.0, (due - wall_ms()) / 1000))
        t0 = time.monotonic()
        last = self.wait_for(n, max(60.0, n / 5))
        executions = self.recorder.take()
        time.sleep(2)  # late duplicates would land here
        executions += self.recorder.take()
        runs, seconds = self.measure_raw(RAW_BATCHES_BESIDE_A_DRAIN)
        raw_after = runs / seconds
        raw = (raw_before + raw_after) / 2
        # An earlier scenario's recurring job may still run one occurrence past its window.
        ids = {j.id for j in jobs}
        executions = [e for e in executions if e[0] in ids]
        settled = self.settle(expected, executions)
        drain = drain_figures([e[3] for e in executions], due, max(instants), raw)
        self.scenario(
            name,
            executions,
            expected,
            {
                "jobs": n,
                "stage_seconds": stage,
                "time_to_start_all_seconds": drain["time_to_start_all_seconds"],
                "first_to_last_start_seconds": drain["first_to_last_start_seconds"],
                "drain_runs_per_second": drain["drain_runs_per_second"],
                "raw_runs_per_second": round(raw, 1),
                # The targets' definition: N ÷ (last start − the due second's start).
                "drain_ratio_to_raw": drain["drain_ratio_to_raw"],
                "raw_runs_per_second_before": round(raw_before, 1),
                "raw_runs_per_second_after": round(raw_after, 1),
                "drain_ratio_to_run_raw": round(drain["drain_runs_per_second"] / self.raw, 3),
                # N ÷ (last start − the last due instant): the due second itself left out.
                "last_due_utc": datetime.fromtimestamp(max(instants) / 1000, UTC).isoformat(),
                "time_to_start_all_from_last_due_seconds": drain[
                    "time_to_start_all_from_last_due_seconds"
                ],
                "drain_runs_per_second_from_last_due": drain["drain_runs_per_second_from_last_due"],
                "drain_ratio_from_last_due": drain["drain_ratio_from_last_due"],
                "waited_seconds": round(last - t0, 2),
                "settle": settled,
            },
            [d for _, d in expected],
            mismatches=mismatches,
        )

    def burst_batch(self) -> None:
        self.burst("burst_batch")

    def burst_staged(self) -> None:
        self.burst("burst_staged")

    # --- cron top-of-minute --------------------------------------------------------------

    def cron_top_of_minute(self) -> None:
        """M cron jobs all due at the same :00. Each is `MM HH * * *` (daily, UTC) for one
        minute far enough ahead that every job is stored as a timer first: the occurrence is
        handed over by the sweeper (the swept path), not sent at submission."""
        from duetime.domain.timeutil import MINUTE_MS

        m = self.sizes["cron"]
        lookahead = self.stack.settings.lookahead_minutes
        lead_ms = int(m / SUBMIT_RATE * 1000) + (lookahead + 1) * MINUTE_MS
        self.recorder.take()
        self.log.reset()
        due, raw = cron_top_plan(wall_ms(), lead_ms)
        when = datetime.fromtimestamp(due / 1000, UTC)
        jobs = self.submit([raw] * m)
        submission = self.log.per_run(m)
        self.log.reset()
        expected = [(j.id, due) for j in jobs]
        wrong = [j.id for j in jobs if j.next_due_ms != due]
        say(f"cron: {m} jobs due at {when:%H:%M}:00 UTC ({(due - wall_ms()) / 1000:.0f} s ahead)")
        time.sleep(max(0.0, (due - wall_ms()) / 1000))
        t0 = time.monotonic()
        last = self.wait_for(m, max(60.0, m / 5))
        time.sleep(2)
        # Every run of these jobs (one at another instant than `due` is an error: unexpected).
        ids = {j.id for j in jobs}
        executions = [e for e in self.recorder.take() if e[0] in ids]
        settled = self.settle(expected, executions)
        starts = sorted(e[3] for e in executions)
        drain_seconds = (starts[-1] - due) / 1000 if starts else None
        with self.ticks.lock:
            ticks = list(self.ticks.ticks)
        handover = handover_tick(ticks, due, lookahead)
        self.scenario(
            "cron_top_of_minute",
            executions,
            expected,
            {
                "jobs": m,
                "due_utc": when.isoformat(),
                "jobs_with_another_first_due": len(wrong),
                "time_to_start_all_seconds": drain_seconds,
                "drain_runs_per_second": round(len(starts) / max(drain_seconds or 0, 1e-3), 1),
                "waited_seconds": round(last - t0, 2),
                "settle": settled,
                "requests_note": "per occurrence, from the jobs' creation to their runs; the "
                "creation itself is in submission_requests",
                "submission_requests": submission,
                # The local stack's sweep ticks keep the phase it started with (a rate rule's
                # rhythm): the tick that handed the :00 over, its seconds after the minute, and
                # how long before the :00 it came. The lateness depends on it.
                "sweep_tick_phase_seconds": handover["phase_seconds"] if handover else None,
                "sweep_handover": handover,
            },
            [d for _, d in expected],
            mismatches=due_mismatches((j.id, due, j.next_due_ms) for j in jobs),
        )

    # --- due vs stored -------------------------------------------------------------------

    def due_vs_stored(self) -> None:
        """D due jobs among S stored future ones, on a separate set of tables nobody polls,
        with a controlled clock: the sweeper's reads per due job as S grows."""
        from duetime.domain.jobs import parse_job_spec
        from duetime.domain.timers import Timer
        from duetime.domain.timeutil import MINUTE_MS
        from duetime.resources import create_resources
        from duetime.wiring import build

        due_count = 50 if self.quick else 200
        sizes = [100, 1000] if self.quick else [100, 10_000]
        rows = []
        for stored in sizes:
            ddb, sqs = self.client("dynamodb"), self.client("sqs")
            prefix = f"bench{stored}x{uuid.uuid4().hex[:4]}"
            settings = create_resources(ddb, sqs, prefix)
            clock = ManualClock((wall_ms() // MINUTE_MS) * MINUTE_MS + 1000)
            parts = build(
                settings, self.stack.session, clock=clock, endpoint_url=self.stack.moto_url
            )
            log = RequestLog()
            log.attach(parts.timers._client)
            log.attach(parts.queue._client)
            log.enabled = False
            lookahead = settings.lookahead_minutes
            due_at = clock.now + (lookahead + 4) * MINUTE_MS
            for i in range(due_count):
                spec = parse_job_spec(
                    {"schedule": {"at": rfc3339(due_at + i * 100)}, "target": NOOP_TARGET}
                )
                parts.service.create(TENANT, spec)
            # S stored future timers, 200 per minute bucket from 30 minutes on
            future = [
                Timer(TENANT, f"stored-{k:06d}", due_at + (30 + k // 200) * MINUTE_MS + k % 200)
                for k in range(stored)
            ]
            put_started = time.monotonic()
            for k in range(0, len(future), 500):
                parts.timers.put(future[k : k + 500])
            put_seconds = time.monotonic() - put_started
            parts.sweeper.sweep()  # the first sweep: up to now + lookahead, before the due
            log.enabled = True
            sent = 0
            sweeps = 0
            clock.now = due_at - 30_000
            wall = time.perf_counter()
            while sent < due_count and sweeps < 10:
                report = parts.sweeper.sweep()
                sent += report.messages_sent
                sweeps += 1
                clock.now += MINUTE_MS
            sweep_ms = round((time.perf_counter() - wall) * 1000)
            log.enabled = False
            stats = log.per_run(due_count)
            reads = stats["dynamodb_read_requests_per_run"]
            rows.append(
                {
                    "stored": stored,
                    "due": due_count,
                    "messages_sent": sent,
                    "sweeps": sweeps,
                    "sweep_wall_ms": sweep_ms,
                    "read_requests_per_due_job": reads,
                    "read_units_per_due_job": stats["dynamodb_read_units_per_run"],
                    "items_read_per_due_job": round(log.read_items / due_count, 3),
                    "calls": stats["calls"],
                    "stored_put_seconds": round(put_seconds, 2),
                }
            )
            say(f"due-vs-stored S={stored}: {rows[-1]}")
        base = rows[0]["read_requests_per_due_job"] or 1e-9
        spread = max(abs(r["read_requests_per_due_job"] - base) / base for r in rows)
        self.results["scenarios"]["due_vs_stored"] = {
            "rows": rows,
            "max_relative_change": round(spread, 4),
            "independent_within_10_percent": spread <= 0.10,
        }

    # --- load through the front door ----------------------------------------------------

    def load(self) -> None:
        """N concurrent HTTP clients post one-offs to the local gateway for a bounded time
        (scripts/bench_load.py); then every accepted job must run exactly once. One tenant
        per client: the per-tenant submission quota (50/s) is not what is measured."""
        from duetime.local.keys import issue_token, load_or_create_key

        clients, seconds = self.sizes["clients"], self.sizes["load_seconds"]
        key, _ = load_or_create_key(self.state)
        tenants = [f"{TENANT}-load-{k}" for k in range(clients)]
        tokens = [(t, issue_token(t, 3600, key)) for t in tenants]
        self.recorder.take()
        self.log.reset()
        say(f"load: {clients} clients posting to {self.stack.api_url} for {seconds} s")
        result = run_load(self.stack.api_url, tokens, seconds)
        self.tenant_of = result.tenant_of
        expected = list(result.accepted)
        ids = {job_id for job_id, _ in expected}
        last_due = max((due for _, due in expected), default=wall_ms())
        time.sleep(max(0.0, (last_due - wall_ms()) / 1000))
        self.wait_for(len(expected), 60.0)
        time.sleep(2)  # late duplicates would land here
        # An earlier scenario's recurring job may still run one occurrence past its window.
        executions = [e for e in self.recorder.take() if e[0] in ids]
        settled = self.settle(expected, executions)
        answered = len(result.latencies_ms)
        self.scenario(
            "load",
            executions,
            expected,
            {
                "clients": clients,
                "seconds": seconds,
                "elapsed_seconds": result.seconds,
                "http_requests": answered + len(result.connection_errors),
                "accepted": len(expected),
                "accepted_per_second": round(len(expected) / max(result.seconds, 1e-3), 1),
                "statuses": {str(k): n for k, n in sorted(result.statuses.items())},
                "connection_errors": len(result.connection_errors),
                "connection_error_samples": result.connection_errors[:5],
                "submission_latency_ms": summarize(result.latencies_ms),
                "body": "delay_seconds 1-3, duetime.noop target, one tenant per client",
                "settle": settled,
            },
            [d for _, d in expected],
            mismatches=due_mismatches(result.requested),
        )
        say(
            f"load: {len(expected)} accepted, {len(result.connection_errors)} connection "
            f"errors, statuses {dict(result.statuses)}, submission "
            f"{self.results['scenarios']['load']['submission_latency_ms']}"
        )

    # --- output --------------------------------------------------------------------------

    def plot(self, name: str, lateness: list[int], naive: list[int]) -> None:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt

        fig, (hist, cdf) = plt.subplots(1, 2, figsize=(11, 4))
        if lateness:
            hist.hist(lateness, bins=50, color="tab:blue")
        hist.set_title(f"{name}: duetime start lateness")
        hist.set_xlabel("lateness (ms)")
        hist.set_ylabel("runs")
        for label, values, color in (
            ("duetime", lateness, "tab:blue"),
            ("naive (1-min sweep)", naive, "tab:red"),
        ):
            if values:
                xs = sorted(values)
                ys = [(i + 1) / len(xs) for i in range(len(xs))]
                cdf.plot(xs, ys, label=label, color=color)
        cdf.set_xscale("symlog", linthresh=10)
        cdf.set_title("CDF of lateness vs the naive baseline")
        cdf.set_xlabel("lateness (ms, symlog)")
        cdf.set_ylabel("fraction of runs")
        cdf.legend()
        fig.tight_layout()
        self.out.mkdir(parents=True, exist_ok=True)
        fig.savefig(self.out / f"{name}.png", dpi=100)
        plt.close(fig)

    def write(self) -> None:
        self.out.mkdir(parents=True, exist_ok=True)
        (self.out / "results.json").write_text(json.dumps(self.results, indent=2) + "\n")
        (self.out / "summary.md").write_text(markdown(self.results))
        say(f"wrote {self.out}/results.json, summary.md and the PNGs")


def markdown(results: dict[str, Any]) -> str:
    m = results["machine"]
    lines = [
        f"# duetime bench ({results['started']})",
        "",
        f"Machine: {m['nproc']} x {m['cpu']}, Python {m['python']}, moto {m['moto']}, "
        f"boto3 {m['boto3']}. Pollers per lambda queue: {results['pollers_per_lambda_queue']}; "
        f"claim lead: {results.get('claim_lead_ms', 0)} ms; burst_staged's stage: "
        f"{results.get('stage_seconds', 0)} s.",
        "",
        f"Raw emulator rate: **{results['raw']['runs_per_second']} runs/s** "
        f"({results['raw']['calls']}).",
        "",
        "| scenario | runs | p50 | p95 | p99 | max (ms) | early wait p50 / p99 (ms) | lost | dup "
        "| writes/run | SQS req/run | emulator calls/run | $/M runs (on-demand) "
        "| naive p50 / p99 (ms) | read units/run | SQS billed/run | records/receive "
        "| due mismatches |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for name, s in results["scenarios"].items():
        if "lateness_ms" not in s:
            continue
        lat, acc, req = s["lateness_ms"], s["accounting"], s["requests"]
        naive = s["baseline_naive"]["lateness_ms"]
        wait = s.get("early_wait_ms") or {"p50": None, "p99": None}
        lines.append(
            f"| {name} | {acc['executed']}/{acc['expected']} | {lat['p50']} | {lat['p95']} | "
            f"{lat['p99']} | {lat['max']} | {wait['p50']} / {wait['p99']} | "
            f"{acc['lost']} | {acc['duplicates']} | "
            f"{req['dynamodb_write_units_per_run']} | {req['sqs_requests_per_run']} | "
            f"{s.get('emulator_calls_per_run')} | "
            f"{req['dollars_per_million_runs']['total_on_demand']} | "
            f"{naive['p50']} / {naive['p99']} | "
            f"{req.get('dynamodb_read_units_per_run')} | "
            f"{req.get('sqs_billed_requests_per_run')} | {s.get('records_per_receive')} | "
            f"{acc.get('due_mismatches')} |"
        )
    for name in ("burst", "burst_batch", "burst_staged"):
        burst = results["scenarios"].get(name)
        if burst:
            lines += [
                "",
                f"{name}: all {burst['jobs']} started {burst['time_to_start_all_seconds']} s "
                f"after the due second; drain {burst['drain_runs_per_second']} runs/s = "
                f"{burst['drain_ratio_to_raw']:.0%} of the raw rate measured beside it "
                f"({burst['raw_runs_per_second_before']} runs/s before, "
                f"{burst['raw_runs_per_second_after']} after)"
                + (
                    f"; from the last due instant {burst['drain_runs_per_second_from_last_due']}"
                    f" runs/s = {burst['drain_ratio_from_last_due']:.0%}."
                    if burst.get("drain_ratio_from_last_due") is not None
                    else "."
                ),
            ]
    load = results["scenarios"].get("load")
    if load:
        sub, lat = load["submission_latency_ms"], load["lateness_ms"]
        lines += [
            "",
            f"Load: {load['clients']} HTTP clients for {load['seconds']} s through the gateway: "
            f"{load['accepted']} accepted ({load['accepted_per_second']}/s), "
            f"{load['connection_errors']} connection errors, statuses {load['statuses']}; "
            f"submission p50 {sub['p50']} ms / p99 {sub['p99']} ms; start lateness "
            f"p50 {lat['p50']} ms / p99 {lat['p99']} ms; lost {load['accounting']['lost']}, "
            f"duplicate {load['accounting']['duplicates']}.",
        ]
    steady = results["scenarios"].get("steady")
    if steady and "recurring_occurrences" in steady:
        occ = steady["recurring_occurrences"]
        lines += [
            "",
            "steady's recurring occurrences (expected by schedule up to end_at / in the window / "
            "executed): "
            + "; ".join(
                f"{kind} {o['expected']} / {o['expected_in_window']} / {o['executed']}"
                for kind, o in occ.items()
            )
            + ".",
        ]
    cron = results["scenarios"].get("cron_top_of_minute")
    if cron and cron.get("sweep_handover"):
        hand = cron["sweep_handover"]
        lines += [
            "",
            f"cron: the :00 was handed over by the sweep tick at {hand['tick_utc']} (phase "
            f"{hand['phase_seconds']} s after the minute), {hand['seconds_before_due']} s "
            "before it.",
        ]
    dvs = results["scenarios"].get("due_vs_stored")
    if dvs:
        lines += ["", "| stored S | due D | read requests / due job | items read / due job |"]
        lines.append("|---|---|---|---|")
        for r in dvs["rows"]:
            lines.append(
                f"| {r['stored']} | {r['due']} | {r['read_requests_per_due_job']} | "
                f"{r['items_read_per_due_job']} |"
            )
        lines.append(f"\nMax relative change: {dvs['max_relative_change']:.1%}.")
    return "\n".join(lines) + "\n"


def machine() -> dict[str, Any]:
    import boto3
    import moto

    cpu = "unknown"
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    return {
        "nproc": os.cpu_count(),
        "cpu": cpu,
        "python": platform.python_version(),
        "moto": moto.__version__,
        "boto3": boto3.__version__,
        "platform": platform.platform(),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--quick", action="store_true", help="small sizes, 2-4 minutes")
    parser.add_argument("--out", type=Path, default=None)
    parser.add_argument(
        "--pollers",
        type=int,
        default=LAMBDA_MAX_POLLERS,
        help="the local stack's most pollers per lambda queue (default %(default)s, as `duetime "
        "local --lambda-pollers`: five at once, then on Lambda's ramp; an idle queue has one)",
    )
    parser.add_argument(
        "--claim-lead-ms",
        type=int,
        default=1000,
        help="how long before its instant a worker may claim a run (default 1000; 0: on it)",
    )
    parser.add_argument(
        "--stage-seconds",
        type=int,
        default=STAGE_SECONDS,
        help=f"burst_staged: its jobs' stage_seconds (default {STAGE_SECONDS}; "
        f"0-{MAX_STAGE_SECONDS})",
    )
    parser.add_argument("--rate", type=int, default=0, help="steady jobs/s (100; quick 20)")
    parser.add_argument("--seconds", type=int, default=0, help="steady duration (30; quick 10)")
    parser.add_argument("--burst", type=int, default=0, help="burst size (2000; quick 200)")
    parser.add_argument(
        "--cron", type=int, default=0, help="cron jobs due at the same :00 (1000; quick 200)"
    )
    parser.add_argument(
        "--clients", type=int, default=0, help="load: concurrent HTTP clients (default 16)"
    )
    parser.add_argument(
        "--load-seconds", type=int, default=0, help="load: how long they post (40; quick 15)"
    )
    parser.add_argument(
        "--only",
        choices=SCENARIOS,
        action="append",
        help="run only this scenario (repeatable; the raw rate is always measured)",
    )
    args = parser.parse_args(argv)
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
    out = args.out or ROOT / "bench-results" / stamp
    sizes = {
        "rate": args.rate,
        "seconds": args.seconds,
        "burst": args.burst,
        "cron": args.cron,
        "clients": args.clients,
        "load_seconds": args.load_seconds,
    }
    if negative := [name for name, value in sizes.items() if value < 0]:
        parser.error(f"--{negative[0].replace('_', '-')} must be 0 (its default) or more")
    if args.pollers < 1:
        parser.error("--pollers must be at least 1")
    if not 0 <= args.claim_lead_ms <= 2000:
        parser.error("--claim-lead-ms must be from 0 to 2000")
    if not 0 <= args.stage_seconds <= MAX_STAGE_SECONDS:
        parser.error(f"--stage-seconds must be from 0 to {MAX_STAGE_SECONDS}")
    scenarios = args.only or SCENARIOS
    Bench(
        out, args.quick, args.pollers, sizes, scenarios, args.claim_lead_ms, args.stage_seconds
    ).run()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
