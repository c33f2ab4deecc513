"""The AWS scale model's arithmetic (scripts/scale_model.py): a pure model, no AWS."""

from __future__ import annotations

import json
import math
from dataclasses import replace

import pytest

from scripts import scale_model as sm


def inputs(rate: float = 1_000, burst: int = 0, **kwargs: object) -> sm.Inputs:
    return replace(sm.Inputs(rate=rate, burst=burst), **kwargs)  # type: ignore[arg-type]


def check(plan: sm.Plan, prefix: str) -> sm.Check:
    return next(c for c in plan.checks if c.name.startswith(prefix))


def test_shards_scale_with_the_burst() -> None:
    small = sm.shards_needed(inputs(rate=0, burst=48_000))  # 800 writes/s: one partition
    double = sm.shards_needed(inputs(rate=0, burst=96_000))
    large = sm.shards_needed(inputs(rate=0, burst=600_000))
    assert small == 1
    assert double == 2
    assert large == math.ceil(600_000 / 60 / 800)  # 10,000 writes/s at 80 % of 1,000
    # A burst written faster needs more shards.
    faster = sm.shards_needed(inputs(rate=0, burst=600_000, burst_write_seconds=30))
    assert faster == math.ceil(600_000 / 30 / 800) > large


def test_sustained_timers_count_towards_the_bucket() -> None:
    assert sm.timer_writes_per_second(inputs(rate=10_000, burst=600_000)) == 20_000
    assert sm.timer_writes_per_second(inputs(rate=10_000, burst=0, timer_share=0.5)) == 5_000


def test_requests_per_run_default_to_cost_md() -> None:
    one_off = inputs()
    assert one_off.writes_per_run == 4
    assert one_off.reads_per_run == 3
    recurring = inputs(recurring_share=1.0, occurrences_per_sweep=4)
    assert recurring.writes_per_run == 2.25  # claim + outcome + a quarter timer write


@pytest.mark.parametrize("factor", [2, 5, 10])
def test_on_demand_cost_scales_linearly_with_rate(factor: int) -> None:
    base = sm.plan(inputs(rate=1_000), scan=False).cost
    scaled = sm.plan(inputs(rate=1_000 * factor), scan=False).cost
    assert scaled.dynamodb_on_demand == pytest.approx(factor * base.dynamodb_on_demand, rel=1e-3)
    assert scaled.sqs == pytest.approx(factor * base.sqs, rel=1e-3)
    assert scaled.per_million_on_demand == pytest.approx(base.per_million_on_demand, rel=1e-3)


def test_dynamodb_cost_per_million_matches_cost_md() -> None:
    cost = sm.plan(inputs(rate=1_000), scan=False).cost
    per_million_dynamodb = cost.dynamodb_on_demand / cost.runs_per_month * 1e6
    assert per_million_dynamodb == pytest.approx(4 * 0.625 + 3 * 0.125)  # $2.875
    assert cost.sqs / cost.runs_per_month * 1e6 == pytest.approx(0.3 * 0.40)


def test_provisioned_is_cheaper_than_on_demand_at_a_steady_rate() -> None:
    cost = sm.plan(inputs(rate=1_000), scan=False).cost
    assert cost.dynamodb_provisioned_sustained < cost.dynamodb_on_demand


def test_littles_law_concurrency_and_in_flight() -> None:
    model = inputs(rate=1_000, run_seconds=1.0, run_overhead_ms=0, early_wait_seconds=0)
    assert sm.invocation_seconds(model) == 10.0  # a batch of 10 one-second runs
    assert sm.concurrency_for(model, 1_000) == 1_000  # 100 batches/s × 10 s
    workers = sm.workers_plan(model, queues=1, account_concurrency=10_000)
    assert workers.in_flight_peak == 10_000


def test_queues_split_by_concurrency_and_in_flight() -> None:
    model = inputs(rate=10_000, burst=600_000)
    workers = sm.plan(model, scan=False).workers
    assert workers.concurrency_peak > sm.ESM_MAX_CONCURRENCY
    assert workers.queues_needed == math.ceil(workers.concurrency_peak / sm.ESM_MAX_CONCURRENCY)
    # Long runs: in-flight messages, not concurrency, decide the number of queues.
    long = sm.workers_plan(
        inputs(rate=1_000, run_seconds=300, worker_batch_size=1),
        queues=1,
        account_concurrency=10**6,
    )
    assert long.in_flight_peak > sm.SQS_MAX_IN_FLIGHT
    assert long.queues_needed >= math.ceil(long.in_flight_peak / sm.SQS_MAX_IN_FLIGHT)


def test_sweep_fan_out() -> None:
    sweep = sm.sweep_estimate(inputs(rate=0, burst=1_000_000), shards=20)
    assert sweep.timers == 1_000_000
    assert sweep.pages_per_partition == 100  # 50,000 timers per partition, 500 a page
    assert sweep.queries == 2_000
    assert sweep.send_batches >= 100_000
    faster = sm.sweep_estimate(inputs(rate=0, burst=1_000_000, send_parallelism=50), shards=20)
    assert faster.seconds < sweep.seconds / 10


def test_the_plan_flags_a_limit_that_breaks() -> None:
    plan = sm.plan(inputs(rate=10_000, burst=600_000))
    broken = {c.name for c in plan.broken()}
    assert any(name.startswith("timer partition writes") for name in broken)
    assert any(name.startswith("worker concurrency vs account") for name in broken)
    assert check(plan, "SQS in-flight").ok
    assert plan.shards_needed == 25
    # The first to break is the one that fails at the lowest load.
    first = plan.broken()[0]
    assert plan.breaking_scale[first.name] == min(plan.breaking_scale.values())


def test_a_small_load_breaks_nothing() -> None:
    plan = sm.plan(inputs(rate=20, burst=600))
    assert plan.broken() == []


def test_more_shards_fix_the_timer_partitions() -> None:
    model = inputs(rate=10_000, burst=600_000)
    assert not check(sm.plan(model, scan=False), "timer partition writes").ok
    fixed = sm.plan(replace(model, timer_shards=25), scan=False)
    assert check(fixed, "timer partition writes").ok


def test_capacity_below_the_rate_never_drains() -> None:
    workers = sm.workers_plan(inputs(rate=10_000, burst=0), queues=1, account_concurrency=1_000)
    assert math.isinf(workers.drain_seconds)
    enough = sm.workers_plan(inputs(rate=10_000, burst=0), queues=3, account_concurrency=4_000)
    assert not math.isinf(enough.drain_seconds)


def test_faster_ramp_drains_the_burst_sooner() -> None:
    model = inputs(rate=1_000, burst=300_000)
    slow = sm.workers_plan(model, queues=3, account_concurrency=10_000)
    fast = sm.workers_plan(
        replace(model, esm_ramp_per_minute=1_250), queues=3, account_concurrency=10_000
    )
    assert fast.drain_seconds < slow.drain_seconds
    assert fast.max_extra_lateness_seconds <= slow.max_extra_lateness_seconds


def test_warmup_minutes() -> None:
    assert sm.warmup_minutes(4_000, 4_000) == 0
    assert sm.warmup_minutes(8_000, 4_000) == 30
    assert sm.warmup_minutes(20_000, 4_000) == 90


def test_cli_prints_a_plan_and_json(capsys: pytest.CaptureFixture[str]) -> None:
    assert sm.main(["--rate", "10000", "--burst", "600000"]) == 0
    text = capsys.readouterr().out
    assert "timer shards per minute bucket: 25" in text
    assert "Breaks first:" in text
    assert sm.main(["--rate", "10000", "--burst", "600000", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["shards_needed"] == 25
    assert data["broken_first"]
    assert data["workers_as_configured"]["drain_seconds"] is None  # never drains: null


def test_per_table_quota_breaks_above_40k_request_units() -> None:
    at_quota = sm.plan(inputs(rate=20_000), scan=False)  # runs: 2 writes × 20,000/s
    assert check(at_quota, "runs table WRU/s vs per-table quota").ok
    above = sm.plan(inputs(rate=25_000), scan=False)
    assert not check(above, "runs table WRU/s vs per-table quota").ok
