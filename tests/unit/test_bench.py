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


def test_given_a_steady_rate_then_provisioned_cost_is_capacity_spread_over_the_runs() -> None:
    # 1 write per run at 1 run/s: 1 WCU for an hour ($0.00065) serves 3,600 runs
    dollars = bench.dollars_per_million(1, 0, 0, runs_per_second=1)
    assert dollars["dynamodb_provisioned"] == pytest.approx(0.00065 / 3600 * 1e6, rel=1e-3)


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
