"""The pure parts of scripts/bench.py: percentiles, $ conversion, lost/duplicate accounting,
the naive baseline's lateness model and the request counter."""

from __future__ import annotations

from typing import Any

import pytest

from tests.scripts import load_script

bench = load_script("bench.py", "duetime_bench")


def test_given_an_ordered_list_then_percentile_is_the_nearest_rank() -> None:
    values = list(range(1, 101))  # 1..100
    assert bench.percentile(values, 0.50) == 50
    assert bench.percentile(values, 0.95) == 95
    assert bench.percentile(values, 0.99) == 99
    assert bench.percentile(values, 1.0) == 100
    assert bench.percentile([7], 0.99) == 7
    assert bench.percentile([], 0.5) is None


def test_given_unsorted_values_then_summary_sorts_and_reports_every_figure() -> None:
    summary = bench.summarize([30, 10, 20, 40])
    assert summary == {"count": 4, "p50": 20, "p95": 40, "p99": 40, "max": 40, "mean": 25.0}
    assert bench.summarize([])["p50"] is None


def test_given_4_writes_2_reads_and_0_3_sqs_per_run_then_dollars_match_docs_cost() -> None:
    dollars = bench.dollars_per_million(4, 2, 0.3)
    # docs/cost.md: 4 × $0.625 + 2 × $0.125 = $2.75 on demand, 0.3 × $0.40 = $0.12
    assert dollars["dynamodb_on_demand"] == pytest.approx(2.75)
    assert dollars["sqs"] == pytest.approx(0.12)
    assert dollars["total_on_demand"] == pytest.approx(2.87)


def test_given_a_steady_rate_then_provisioned_cost_is_capacity_at_70_percent_use() -> None:
    # 1 write per run at 1 run/s: 1 WCU used at 70 % (as scripts/scale_model.py's
    # provisioned_utilisation), 1/0.7 WCU for an hour ($0.00065 each) serves 3,600 runs
    dollars = bench.dollars_per_million(1, 0, 0, runs_per_second=1)
    assert dollars["dynamodb_provisioned"] == pytest.approx(0.00065 / 0.7 / 3600 * 1e6, rel=1e-3)


def test_given_billed_sqs_requests_then_they_are_priced_beside_the_runs_own() -> None:
    dollars = bench.dollars_per_million(3, 1, 0.3, sqs_billed_per_run=4.5)
    assert dollars["sqs"] == pytest.approx(0.12)
    assert dollars["total_on_demand"] == pytest.approx(3 * 0.625 + 0.125 + 0.12)
    assert dollars["sqs_billed"] == pytest.approx(1.8)
    assert dollars["total_on_demand_billed_sqs"] == pytest.approx(3 * 0.625 + 0.125 + 1.8)


def test_given_every_expected_run_once_then_nothing_is_lost_or_duplicated() -> None:
    expected = [("a", 1), ("b", 2), ("c", 3)]
    result = bench.account(expected, [("c", 3), ("a", 1), ("b", 2)])
    assert result == {"expected": 3, "executed": 3, "lost": 0, "duplicates": 0, "unexpected": 0}


def test_given_a_missing_and_a_repeated_run_then_both_are_counted() -> None:
    expected = [("a", 1), ("b", 2), ("c", 3)]
    result = bench.account(expected, [("a", 1), ("a", 1), ("b", 2), ("x", 9)])
    assert result["lost"] == 1  # c
    assert result["duplicates"] == 1  # a twice
    assert result["unexpected"] == 1  # x was never expected
    assert result["executed"] == 4


def test_the_naive_baseline_pays_its_due_time_index_writes() -> None:
    # job put + its index entry, run record, job done + its index entry removed: 5 units
    assert bench.NAIVE_PER_RUN["dynamodb_writes"] == 5.0
    dollars = bench.dollars_per_million(
        bench.NAIVE_PER_RUN["dynamodb_writes"],
        bench.NAIVE_PER_RUN["dynamodb_reads"],
        bench.NAIVE_PER_RUN["sqs_requests"],
    )
    assert dollars["total_on_demand"] == pytest.approx(3.25, abs=0.01)


def test_given_ticks_every_minute_then_naive_lateness_is_the_wait_for_the_next_tick() -> None:
    phase = 1_000
    assert bench.naive_lateness([1_000, 1_001, 60_999, 61_000, 0], phase) == [
        0,
        59_999,
        1,
        0,
        1_000,
    ]


class _Events:
    def __init__(self) -> None:
        self.handlers: dict[str, Any] = {}

    def register(self, name: str, handler: Any) -> None:
        self.handlers[name] = handler


class _Meta:
    def __init__(self) -> None:
        self.events = _Events()


class _Client:
    def __init__(self) -> None:
        self.meta = _Meta()


def test_given_calls_then_the_request_log_counts_units_and_billed_sqs_requests() -> None:
    log = bench.RequestLog()
    client = _Client()
    log.attach(client)
    before = client.meta.events.handlers["before-parameter-build"]
    after = client.meta.events.handlers["after-call"]
    before("before-parameter-build.dynamodb.PutItem", {"Item": {}})
    before(
        "before-parameter-build.dynamodb.BatchWriteItem",
        {"RequestItems": {"t": [{"PutRequest": {}}, {"PutRequest": {}}]}},
    )
    before("before-parameter-build.sqs.SendMessageBatch", {})
    before("before-parameter-build.sqs.ReceiveMessage", {})
    after("after-call.sqs.ReceiveMessage", {"Messages": [{}]})
    before("before-parameter-build.sqs.ReceiveMessage", {})
    after("after-call.sqs.ReceiveMessage", {})
    stats = log.per_run(2)
    assert stats["dynamodb_write_units_per_run"] == 1.5  # 3 items over 2 runs
    assert stats["sqs_requests_per_run"] == 1.0  # send + one non-empty receive
    assert stats["empty_receives"] == 1
    assert stats["calls"]["sqs.ReceiveMessage"] == 2


def _item(size: int) -> dict[str, Any]:
    """A wire-format item of about `size` bytes: "pk" (2 bytes) and "v" (1 byte) names."""
    return {"pk": {"S": "k"}, "v": {"S": "x" * (size - 4)}}


def test_reads_are_priced_by_read_units_from_the_items_sizes_not_by_requests() -> None:
    log = bench.RequestLog()
    client = _Client()
    log.attach(client)
    before = client.meta.events.handlers["before-parameter-build"]
    after = client.meta.events.handlers["after-call"]

    def call(operation: str, params: dict[str, Any], parsed: dict[str, Any]) -> None:
        context: dict[str, Any] = {}
        before(f"before-parameter-build.dynamodb.{operation}", params, context=context)
        after(f"after-call.dynamodb.{operation}", parsed, context=context)

    # a strongly consistent GetItem of 5 KB: 2 units; eventually consistent, 1 KB: 0.5;
    # a strongly consistent GetItem of an item not there: 1
    call("GetItem", {"ConsistentRead": True}, {"Item": _item(5000)})
    call("GetItem", {}, {"Item": _item(1000)})
    call("GetItem", {"ConsistentRead": True}, {})
    # a BatchGetItem of 10 keys, strongly consistent, 9 found (600 B each) and 1 absent: 10
    call(
        "BatchGetItem",
        {"RequestItems": {"jobs": {"Keys": [{}] * 10, "ConsistentRead": True}}},
        {"Responses": {"jobs": [_item(600)] * 9}},
    )
    # a Query page of 30 timers of 150 B (4,500 B), strongly consistent: 2 units, not 30
    call("Query", {"ConsistentRead": True}, {"Items": [_item(150)] * 30, "Count": 30})

    stats = log.per_run(1)

    assert stats["dynamodb_read_requests_per_run"] == 5
    assert stats["dynamodb_read_items_per_run"] == 2 + 9 + 30
    assert stats["dynamodb_read_units_per_run"] == 2 + 0.5 + 1 + 10 + 2
    assert stats["dollars_per_million_runs"]["dynamodb_on_demand"] == pytest.approx(15.5 * 0.125)


def test_every_sqs_request_is_reported_as_billed_and_batch_fill_per_receive() -> None:
    log = bench.RequestLog()
    client = _Client()
    log.attach(client)
    before = client.meta.events.handlers["before-parameter-build"]
    after = client.meta.events.handlers["after-call"]
    before("before-parameter-build.sqs.GetQueueAttributes", {})
    after("after-call.sqs.GetQueueAttributes", {"Attributes": {}})
    for messages in (10, 4, 0, 0):
        before("before-parameter-build.sqs.ReceiveMessage", {})
        after("after-call.sqs.ReceiveMessage", {"Messages": [{}] * messages} if messages else {})
    before("before-parameter-build.sqs.DeleteMessageBatch", {})

    stats = log.per_run(14)

    assert stats["sqs_requests_per_run"] == round(3 / 14, 3)  # 2 non-empty receives + delete
    assert stats["sqs_billed_requests_per_run"] == round(6 / 14, 3)  # + 2 empty + attributes
    assert stats["empty_receives"] == 2
    assert stats["non_empty_receives"] == 2
    assert stats["records_per_receive"] == 7.0
    assert stats["dollars_per_million_runs"]["sqs_billed"] == pytest.approx(6 / 14 * 0.40, 1e-3)


def test_the_summary_shows_each_burst_its_emulator_calls_and_the_claim_lead() -> None:
    def scenario(calls: float) -> dict[str, Any]:
        figures = {"p50": 1, "p95": 2, "p99": 3, "max": 4}
        return {
            "lateness_ms": figures,
            "early_wait_ms": figures,
            "accounting": {"executed": 2, "expected": 2, "lost": 0, "duplicates": 0},
            "requests": {
                "dynamodb_write_units_per_run": 3.0,
                "sqs_requests_per_run": 0.3,
                "dollars_per_million_runs": {"total_on_demand": 2.0},
            },
            "emulator_calls_per_run": calls,
            "baseline_naive": {"lateness_ms": figures},
            "jobs": 2,
            "time_to_start_all_seconds": 0.5,
            "drain_runs_per_second": 4.0,
            "drain_ratio_to_raw": 0.02,
            "drain_runs_per_second_from_last_due": 5.0,
            "drain_ratio_from_last_due": 0.025,
            "raw_runs_per_second_before": 190.0,
            "raw_runs_per_second_after": 210.0,
        }

    results = {
        "started": "now",
        "machine": {"nproc": 2, "cpu": "cpu", "python": "3.11", "moto": "5", "boto3": "1"},
        "pollers_per_lambda_queue": 20,
        "claim_lead_ms": 750,
        "stage_seconds": 4,
        "raw": {"runs_per_second": 200.0, "calls": "calls"},
        "scenarios": {
            "burst": scenario(5.42),
            "burst_batch": scenario(7.88),
            "burst_staged": scenario(6.5),
        },
    }

    text = bench.markdown(results)

    assert "Pollers per lambda queue: 20; claim lead: 750 ms; burst_staged's stage: 4 s." in text
    assert "| 0.3 | 5.42 | 2.0 |" in text
    assert "| 0.3 | 7.88 | 2.0 |" in text
    assert "burst: all 2 started 0.5 s" in text
    assert "2% of the raw rate measured beside it (190.0 runs/s before, 210.0 after)" in text
    assert "from the last due instant 5.0 runs/s = 2%." in text
    assert "burst_batch: all 2 started 0.5 s" in text
    assert "| 0.3 | 6.5 | 2.0 |" in text
    assert "burst_staged: all 2 started 0.5 s" in text


def test_burst_bodies_are_due_within_the_second_and_staged_when_asked() -> None:
    due = 1_795_000_000_000
    plain, staged = bench.burst_bodies(due, 3), bench.burst_bodies(due, 3, 4)
    assert all("stage_seconds" not in body for body in plain)
    assert [body["stage_seconds"] for body in staged] == [4, 4, 4]
    assert [b["schedule"] for b in staged] == [b["schedule"] for b in plain]
    assert [b["schedule"]["at"] for b in plain] == [
        "2026-11-18T11:06:40.000Z",
        "2026-11-18T11:06:40.997Z",
        "2026-11-18T11:06:40.994Z",
    ]


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--pollers", "0"], "--pollers must be at least 1"),
        (["--burst", "-5"], "--burst must be 0 (its default) or more"),
        (["--load-seconds", "-1"], "--load-seconds must be 0 (its default) or more"),
        (["--stage-seconds", "11"], "--stage-seconds must be from 0 to 10"),
    ],
)
def test_an_out_of_range_option_is_a_usage_error_before_any_stack_starts(
    argv: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exited:
        bench.main(argv)
    assert exited.value.code == 2
    assert message in capsys.readouterr().err


@pytest.mark.parametrize("argv", [["--jobs", "-1"], ["--jobs", "0"], ["--window-seconds", "0"]])
def test_the_chaos_run_refuses_no_jobs_or_no_window(
    argv: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    from scripts import chaos

    with pytest.raises(SystemExit) as exited:
        chaos.main(argv)
    assert exited.value.code == 2
    assert "--jobs and --window-seconds must be at least 1" in capsys.readouterr().err


# --- accounting: what is expected, and what settles ------------------------------------------


def _job(job_id: str, created_ms: int, schedule: dict[str, Any], next_due_ms: int) -> Any:
    from types import SimpleNamespace

    from duetime.domain.schedule import parse_schedule

    spec = SimpleNamespace(schedule=parse_schedule(schedule))
    return SimpleNamespace(id=job_id, created_ms=created_ms, spec=spec, next_due_ms=next_due_ms)


def test_given_recurring_runs_that_never_ran_then_the_schedule_expects_them_as_lost() -> None:
    # The audit's repro (audit24/cost/repro_bench_accounting.py) on the schedule-built
    # expected runs: a cron job whose only occurrence in the window never ran, a rate job whose
    # first occurrence never ran, a rate job none of whose occurrences ran.
    end = 999_999
    cron = _job("cron-1", 900_500, {"cron": "* * * * *"}, 960_000)
    rate_a = _job("rate-a", 960_000, {"rate_seconds": 10}, 970_000)
    rate_b = _job("rate-b", 980_000, {"rate_seconds": 10}, 990_000)
    executed = [("rate-a", 980_000), ("rate-a", 990_000)]

    expected, asked = bench.expected_runs([], [cron, rate_a, rate_b], end)

    assert sorted(expected) == [
        ("cron-1", 960_000),
        ("rate-a", 970_000),
        ("rate-a", 980_000),
        ("rate-a", 990_000),
        ("rate-b", 990_000),
    ]
    assert bench.account(expected, executed)["lost"] == 3
    assert bench.due_mismatches(asked) == []


def test_a_recurring_job_is_expected_up_to_its_end_at_not_after() -> None:
    schedule = {"rate_seconds": 10, "end_at": "1970-01-01T00:00:30.000Z"}
    job = _job("r", 0, schedule, 10_000)
    assert bench.recurring_occurrences("r", job.spec.schedule, 0, 10**9) == [
        ("r", 10_000),
        ("r", 20_000),
        ("r", 30_000),
    ]
    assert bench.recurring_occurrences("r", job.spec.schedule, 0, 25_000) == [
        ("r", 10_000),
        ("r", 20_000),
    ]


def test_given_a_due_the_scheduler_shifted_then_it_is_an_accounting_error() -> None:
    # The bench asked for 5_000; the scheduler planned (and ran) 6_000
    job = _job("a", 0, {"at": "1970-01-01T00:00:05.000Z"}, 6_000)
    expected, asked = bench.expected_runs([(job, 5_000)], [], 10**9)

    assert bench.due_mismatches(asked) == [
        {"job_id": "a", "requested_ms": 5_000, "scheduled_ms": 6_000}
    ]
    result = bench.account(expected, [("a", 6_000)])
    assert (result["lost"], result["unexpected"]) == (1, 1)


def test_the_scenario_counts_due_mismatches_in_its_accounting(tmp_path: Any) -> None:
    b = bench.Bench(tmp_path, quick=True)
    b.plot = lambda *_: None  # type: ignore[method-assign]
    wrong = bench.due_mismatches([("a", 5_000, 6_000), ("b", 7_000, 7_000)])

    result = b.scenario(
        "x", [("b", 7_000, 3, 7_003)], [("b", 7_000)], {}, [7_000], mismatches=wrong
    )

    assert result["accounting"]["due_mismatches"] == 1
    assert result["due_mismatch_samples"] == wrong
    assert result["accounting"]["lost"] == 0


def test_settle_adds_only_the_expected_jobs_late_runs(
    tmp_path: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given a run of "a" missing when the wait ended, then "a" starting late while an earlier
    # scenario's recurring job "other" runs one occurrence
    b = bench.Bench(tmp_path, quick=True)
    b.queued = lambda: 0  # type: ignore[method-assign]
    b.inspect = lambda job_id, ms: "?"  # type: ignore[method-assign]
    monkeypatch.setattr(bench, "QUIET_SECONDS", 0)
    monkeypatch.setattr(bench.time, "sleep", lambda _: None)
    wrap = b.recorder.wrap(lambda target, invocation: None)
    from types import SimpleNamespace

    for job_id, ms in (("a", 1_000), ("other", 2_000)):
        wrap(None, SimpleNamespace(job_id=job_id, scheduled_ms=ms))
    executions: list[tuple[str, int, int, int]] = [("b", 500, 1, 501)]

    report = b.settle([("a", 1_000), ("b", 500)], executions)

    # Then only "a" is added: "other" would have been an unexpected run of this scenario
    assert [e[0] for e in executions] == ["b", "a"]
    assert report["late_after_wait"] == 1
    assert report["still_missing"] == []
    assert bench.account([("a", 1_000), ("b", 500)], [(e[0], e[1]) for e in executions]) == {
        "expected": 2,
        "executed": 2,
        "lost": 0,
        "duplicates": 0,
        "unexpected": 0,
    }


def test_the_drain_is_reported_from_the_due_second_and_from_the_last_due_instant() -> None:
    # 2,000 runs due over [0, 999]; the last starts at 6,000: 6.0 s after the due second,
    # 5.001 s after the last due instant
    starts = [1_000 + i * 5_000 // 1_999 for i in range(2_000)]
    drain = bench.drain_figures(starts, 0, 999, raw=683.0)

    assert drain["time_to_start_all_seconds"] == 6.0
    assert drain["drain_runs_per_second"] == pytest.approx(333.3, abs=0.1)
    assert drain["drain_ratio_to_raw"] == pytest.approx(0.488, abs=0.001)  # the targets'
    assert drain["time_to_start_all_from_last_due_seconds"] == 5.001
    assert drain["drain_runs_per_second_from_last_due"] == pytest.approx(399.9, abs=0.1)
    assert drain["drain_ratio_from_last_due"] == pytest.approx(0.586, abs=0.001)
    assert drain["first_to_last_start_seconds"] == 5.0


def test_when_every_run_started_by_its_last_due_instant_then_that_ratio_is_none() -> None:
    drain = bench.drain_figures([100, 999], 0, 999, raw=100.0)
    assert drain["drain_ratio_from_last_due"] is None
    assert drain["drain_ratio_to_raw"] == pytest.approx(2 / 0.999 / 100, abs=0.001)


def test_the_handover_tick_is_the_first_whose_lookahead_reaches_the_due_minute() -> None:
    minute = 60_000
    due = 100 * minute  # a :00
    phase = 17_250  # the stack's ticks come 17.25 s after each minute
    ticks = [(98 + k) * minute + phase for k in range(4)]  # 98:17, 99:17, 100:17, 101:17

    hand = bench.handover_tick(ticks, due, lookahead_minutes=1)

    assert hand is not None
    assert hand["phase_seconds"] == 17.25
    assert hand["seconds_before_due"] == 42.75  # the tick of minute 99 hands minute 100 over
    assert bench.handover_tick(ticks, due, lookahead_minutes=2)["seconds_before_due"] == 102.75
    assert bench.handover_tick(ticks[2:], due, lookahead_minutes=1) is None


def test_the_tick_log_records_when_each_tick_came(monkeypatch: pytest.MonkeyPatch) -> None:
    log = bench.TickLog()
    monkeypatch.setattr(bench, "wall_ms", lambda: 123_456)
    tick = log.wrap(lambda: {"swept": 1})

    assert tick() == {"swept": 1}
    assert log.ticks == [123_456]
