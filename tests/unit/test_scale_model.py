"""The AWS scale model's arithmetic (scripts/scale_model.py): a pure model, no AWS."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest

from duetime.services.sweep import SWEEP_HOLD_MS
from infra.profiles import PROFILES
from scripts import scale_model as sm


def inputs(rate: float = 1_000, burst: int = 0, **kwargs: object) -> sm.Inputs:
    """The model's inputs, with a fixed early wait of 0.5 s (a round figure the expectations
    below work from; the default is the held sends' 0.15 s)."""
    fields: dict[str, object] = {"early_wait_seconds": 0.5, **kwargs}
    return replace(sm.Inputs(rate=rate, burst=burst), **fields)  # type: ignore[arg-type]


def check(plan: sm.Plan, prefix: str) -> sm.Check:
    return next(c for c in plan.checks if c.name.startswith(prefix))


def run_json(capsys: pytest.CaptureFixture[str], *argv: str) -> dict[str, object]:
    assert sm.main([*argv, "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert isinstance(data, dict)
    return data


@pytest.fixture
def no_measurement(tmp_path: Path) -> list[str]:
    """CLI arguments that leave both measurements out: the throughputs are assumed."""
    return ["--sweep-measurement", "none", "--sweep-measurement-recurring", "none"]


def write_measurement(
    path: Path, per_shard: float, *, timers: int = 1_200_000, recurring: int = 0
) -> Path:
    """A scripts/sweep_scale.py result: `recurring` of its `timers` were recurring (the
    sustained half of a 600,000 + 600,000 minute with --recurring-share 1.0)."""
    path.write_text(
        json.dumps(
            {
                "timers": timers,
                "shards": 25,
                "handed_over": timers,
                "lost": 0,
                "duplicates": 0,
                "seconds_to_hand_over": 12.3,
                "max_shard_seconds": 12.2,
                "per_shard_timers_per_second": per_shard,
                "chain_timers": recurring,
                "time": {"cpu_seconds": 30.0, "wait_seconds_by_call": {"Query": 24.6}},
                "inputs": {
                    "query_ms": 10,
                    "batch_get_ms": 15,
                    "recurring_share": 1.0 if recurring else 0.0,
                    "sustained_timers": recurring or timers // 2,
                },
                "machine": {"cpu": "test"},
            }
        )
    )
    return path


def measurements(tmp_path: Path, one_off: float = 7_243.1, mixed: float = 1_307.2) -> list[str]:
    """CLI arguments for both measurements: all one-off at `one_off` timers/s per shard, and
    half recurring (600,000 of 1,200,000) at `mixed`."""
    first = write_measurement(tmp_path / "sweep_scale.json", one_off)
    second = write_measurement(tmp_path / "recurring.json", mixed, recurring=600_000)
    return [
        *("--sweep-measurement", str(first)),
        *("--sweep-measurement-recurring", str(second)),
    ]


# --- load, shards, horizon --------------------------------------------------------------------


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


def test_each_shard_has_its_own_horizon_item() -> None:
    """Every timer write reads the horizon of its own shard: an item takes writes / shards."""
    model = inputs(rate=10_000, burst=600_000)  # 20,000 timer writes/s at the peak
    for shards in (8, 32):
        plan = sm.plan(replace(model, timer_shards=shards), scan=False)
        horizon = check(plan, "horizon item reads/s")
        assert horizon.demand == pytest.approx(20_000 / shards)
        assert horizon.limit == sm.PARTITION_RCU
    assert not check(sm.plan(replace(model, timer_shards=4), scan=False), "horizon").ok
    assert sm.shards_for_horizon(model) == math.ceil(20_000 / (3_000 * 0.8))


def test_requests_per_run_follow_the_code() -> None:
    one_off = inputs()
    assert one_off.writes_per_run == 4  # job, timer, claim, outcome (docs/cost.md)
    # The worker's read of the job (a job without dependents: not their item), and the horizon
    # read after the timer write: the sweep reads no job for a one-off timer (its queue is in it).
    assert one_off.reads_per_run == 2
    recurring = inputs(recurring_share=1.0, occurrences_per_sweep=4)
    assert recurring.writes_per_run == 2.25  # claim + outcome + a quarter timer write
    # The worker's read, plus a quarter of the sweep's job read and of its horizon read
    # (one per hand-over group of 160, all recurring).
    assert recurring.reads_per_run == pytest.approx(1 + (1 + 1 / 160) / 4)


def test_a_sweep_reads_its_horizon_once_per_group_of_chains() -> None:
    assert sm.horizon_reads_per_chain_timer(0, 1_000) == pytest.approx(1 / 160)
    assert sm.horizon_reads_per_chain_timer(1_000, 1_000) == pytest.approx(1 / 80)
    assert sm.horizon_reads_per_chain_timer(10_000, 1) == 1  # a lone chain in its group
    assert sm.horizon_reads_per_chain_timer(1_000, 0) == 0


def test_job_partitions_divide_the_hot_tenant_load() -> None:
    model = inputs(rate=10_000, burst=600_000, hot_tenant_share=0.1)
    one = sm.plan(model, scan=False)
    eight = sm.plan(replace(model, job_partitions=8), scan=False)
    # Writes: 10 % of the peak submissions (20,000/s), over the tenant's partitions.
    assert check(one, "hot tenant jobs-partition writes").demand == pytest.approx(2_000)
    assert check(eight, "hot tenant jobs-partition writes").demand == pytest.approx(250)
    assert not check(one, "hot tenant jobs-partition writes").ok
    assert check(eight, "hot tenant jobs-partition writes").ok
    reads_one = check(one, "hot tenant jobs-partition reads").demand
    assert check(eight, "hot tenant jobs-partition reads").demand == pytest.approx(reads_one / 8)


# --- the per-shard sweeps ---------------------------------------------------------------------


def test_sweep_fan_out() -> None:
    model = inputs(rate=0, burst=1_000_000, sweep_timers_per_second=2_000, table_quota=10**9)
    sweep = sm.sweep_estimate(model, shards=20)
    assert sweep.timers == sweep.one_off_timers == 1_000_000
    assert sweep.recurring_timers == 0
    assert sweep.timers_per_shard == 50_000
    assert sweep.pages_per_partition == 100  # 50,000 timers per partition, 500 a page
    assert sweep.queries == 2_000
    assert sweep.batch_gets == 0  # one-off timers carry their queue: no job read
    assert sweep.send_batches == 100_000
    # The minute is handed over when the slowest shard is done: coordinator + 50,000 / 2,000,
    # plus the sweep's holds of its sends (at most SWEEP_HOLD_SECONDS in all).
    assert sweep.shard_seconds == pytest.approx(25.0 + sm.SWEEP_HOLD_SECONDS)
    assert sweep.seconds == pytest.approx(0.1 + 25.0 + sm.SWEEP_HOLD_SECONDS)
    # Twice the shards, half the time (the holds are the same).
    assert sm.sweep_estimate(model, shards=40).shard_seconds == pytest.approx(
        12.5 + sm.SWEEP_HOLD_SECONDS
    )
    assert sweep.shards_for_deadline == math.ceil(1_000_000 / (44.9 * 2_000))


def test_one_off_timers_make_no_sweep_job_reads() -> None:
    """A one-off's timer carries its queue: sweeping only one-off timers reads no job, so the
    jobs table sees only the workers' reads (one per run: the job; a job without dependents is not
    marked, so its dependents' item is not read) and
    the sweep has no read bound."""
    model = inputs(rate=10_000, burst=600_000, sweep_timers_per_second=10_000)
    load = sm.sweep_load(model, *sm.minute_timers(model), shards=32)
    assert load.job_reads == 0
    assert load.chain_writes == 0
    sweep = sm.sweep_estimate(model, shards=32)
    assert sweep.read_bound_seconds == 0
    assert sweep.batch_gets == 0
    assert sweep.seconds == pytest.approx(0.1 + 37_500 / 10_000 + sm.SWEEP_HOLD_SECONDS)
    # Before the burst falls due the workers read for 10,000 runs a second, while it does for
    # 20,000: one item each.
    assert sm.WORKER_JOB_READS == 1
    assert sweep.jobs_rru_while_sweeping == pytest.approx(20_000)
    assert sm.table_load(model, burst=True).jobs_rru == pytest.approx(20_000)


def test_recurring_timers_make_sweep_job_reads() -> None:
    """A recurring timer's sweep reads its job (to plan the chain) and writes its next timer:
    the shards read jobs at shards × their recurring rate while they hand those over."""
    model = inputs(
        rate=10_000,
        burst=600_000,
        recurring_share=0.5,
        sweep_timers_per_second=10_000,
        sweep_recurring_timers_per_second=500,
    )
    one_off, recurring = sm.minute_timers(model)
    assert (one_off, recurring) == (300_000 + 600_000, 300_000)
    load = sm.sweep_load(model, one_off, recurring, shards=32)
    # 9,375 recurring timers per shard at 500/s: 18.75 s of reading 32 × 500 jobs a second.
    assert load.job_reads == pytest.approx(300_000 / 18.75)
    assert load.chain_writes == pytest.approx(16_000)
    sweep = sm.sweep_estimate(model, shards=32)
    assert sweep.batch_gets == 32 * math.ceil(9_375 / 100)
    expected = 28_125 / 10_000 + 9_375 / 500 + sm.SWEEP_HOLD_SECONDS
    assert sweep.shard_seconds == pytest.approx(expected, abs=0.01)
    # Only the recurring timers' jobs bound the sweep: 300,000 ÷ (40,000 − the workers' 10,000).
    assert sweep.read_bound_seconds == pytest.approx(10.0)
    # While the burst falls due: the workers' 20,000 plus the next minute's sweep's 16,000.
    assert sweep.jobs_rru_while_sweeping == pytest.approx(20_000 + 16_000)
    # The API's one-off timers (5,000/s sustained + 10,000/s of the burst) and the chains'.
    assert sweep.timers_wru_while_sweeping == pytest.approx(15_000 + 16_000)
    # Averaged over the minute: the workers' reads and one per recurring timer (5,000/s).
    assert sm.table_load(model, burst=True).jobs_rru == pytest.approx(20_000 + 5_000)
    plan = sm.plan(replace(model, timer_shards=32), scan=False)
    assert check(plan, "jobs table RRU/s vs per-table quota").demand == pytest.approx(36_000)


def test_the_jobs_table_quota_bounds_a_recurring_sweep() -> None:
    """Above the table's read quota the recurring timers' job reads are throttled: the sweep
    takes at least recurring timers ÷ (quota − the workers' reads)."""
    model = inputs(
        rate=10_000,
        burst=0,
        recurring_share=1.0,
        table_quota=20_000,
        sweep_recurring_timers_per_second=10_000,
    )
    sweep = sm.sweep_estimate(model, shards=32)
    assert sweep.recurring_timers == 600_000
    expected = 18_750 / 10_000 + sm.SWEEP_HOLD_SECONDS
    assert sweep.shard_seconds == pytest.approx(expected, abs=0.01)  # rounded
    assert sweep.read_bound_seconds == pytest.approx(600_000 / (20_000 - 10_000))
    assert sweep.seconds == pytest.approx(0.1 + 60.0)
    plan = sm.plan(replace(model, timer_shards=32), scan=False)
    sweep_check = check(plan, "sweep of the burst minute")
    assert not sweep_check.ok
    assert "the jobs table's read quota bounds it" in sweep_check.fix
    quota = check(plan, "jobs table RRU/s vs per-table quota")
    # The shards would read the 600,000 jobs in 1.9 s: spread over the 5 s a retry absorbs,
    # plus the workers' 10,000.
    assert quota.demand == pytest.approx(10_000 + 600_000 / 5)


def test_the_sweeps_query_pages_load_the_timers_table() -> None:
    """A Query page of 500 timers (150 bytes each) costs 19 read units: at 32 shards × 10,000
    timers/s, 1.2 M timers take 3.75 s, spread over the 5 s a retry absorbs."""
    model = inputs(rate=10_000, burst=600_000, sweep_timers_per_second=10_000)
    assert sm.query_units_per_timer(model) == pytest.approx(19 / 500)
    sweep = sm.sweep_estimate(model, shards=32)
    # Sweeping the burst minute (the API's 10,000 horizon reads) or an ordinary minute while
    # the burst's timers are written (20,000): the larger.
    burst_minute = 10_000 + 1_200_000 * 19 / 500 / 5
    ordinary = 20_000 + 600_000 * 19 / 500 / 5
    assert sweep.timers_rru_while_sweeping == pytest.approx(max(burst_minute, ordinary))


def test_assumed_sweep_throughput_comes_from_the_latencies() -> None:
    model = inputs()
    # One-off, per page of 500: Query 10 ms, 4 groups (160, 160, 160, 20) of sends 16 at once
    # (10 ms each; no job read), the watermark 6 ms.
    assert sm.assumed_sweep_throughput(model) == pytest.approx(500 / 0.056)
    assert sm.per_shard_throughput(model) == sm.assumed_sweep_throughput(model)
    assert sm.per_shard_throughput(replace(model, sweep_timers_per_second=900)) == 900
    # Recurring, per group of 160: 2 BatchGetItem of jobs (15 ms), 7 BatchWriteItem of next
    # timers (10 ms), the horizon read (15 ms), the sends (10 ms): 125 ms; the group of 20:
    # 15 + 10 + 15 + 10 ms.
    assert sm.assumed_recurring_sweep_throughput(model) == pytest.approx(
        500 / (0.010 + 3 * 0.125 + 0.050 + 0.006)
    )
    assert sm.per_shard_recurring_throughput(model) == sm.assumed_recurring_sweep_throughput(model)


def test_the_sweep_uses_the_measured_throughput_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = write_measurement(tmp_path / "sweep_scale.json", per_shard=500)
    data = run_json(
        capsys,
        *("--rate", "10000", "--burst", "600000", "--profile", "large"),
        *("--sweep-measurement", str(path)),
        *("--sweep-measurement-recurring", "none"),
    )
    assert data["sweep_throughput_source"] == f"measured: {path}"
    assert data["sweep_throughput_sources"] == {
        "one_off": f"measured: {path}",
        "recurring": "assumed",
    }
    sweep = data["sweep"]
    assert isinstance(sweep, dict)
    assert sweep["per_shard_timers_per_second"] == 500
    assert sweep["throughput_source"] == f"measured: {path}"
    expected = 1_200_000 / 32 / 500 + sm.SWEEP_HOLD_SECONDS  # 75 s, and the holds
    assert sweep["shard_seconds"] == pytest.approx(expected)
    assert sweep["seconds"] == pytest.approx(0.1 + 75 + sm.SWEEP_HOLD_SECONDS)
    measurement = data["sweep_measurement"]
    assert isinstance(measurement, dict)
    assert measurement["machine"] == {"cpu": "test"}
    limits = {entry["name"]: entry for entry in data["limits"]}  # type: ignore[attr-defined]
    sweep_limit = limits["sweep of the burst minute (s)"]
    assert sweep_limit["holds"] is False
    # 1.2 M / ((45 − 0.1 − 3 s of holds) × 500)
    assert "more shards: timer_shards ≥ 58" in sweep_limit["fix"]


def test_without_a_measurement_the_throughput_is_marked_assumed(
    capsys: pytest.CaptureFixture[str], no_measurement: list[str]
) -> None:
    data = run_json(capsys, "--rate", "1000", *no_measurement)
    assert data["sweep_throughput_source"] == "assumed"
    assert data["sweep_throughput_sources"] == {"one_off": "assumed", "recurring": "assumed"}
    assert data["sweep_measurement"] is None
    assert data["sweep_measurement_recurring"] is None
    sweep = data["sweep"]
    assert isinstance(sweep, dict)
    assert sweep["throughput_source"] == "assumed"
    assert sweep["recurring_throughput_source"] == "assumed"
    assert sweep["per_shard_timers_per_second"] == pytest.approx(500 / 0.056, abs=0.1)
    assert sm.main(["--rate", "1000", *no_measurement]) == 0
    assert "**assumed**" in capsys.readouterr().out


def test_both_measurements_give_both_throughputs(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The recurring run swept 600,000 one-off and 600,000 recurring timers at 1,307.2/s per
    shard over all: less the one-off timers' time at the one-off rate, the rest is the
    recurring timers'."""
    args = measurements(tmp_path, one_off=7_243.1, mixed=1_307.2)
    data = run_json(
        capsys, *("--rate", "10000", "--burst", "600000", "--recurring-share", "0.5"), *args
    )
    recurring_rate = 600_000 / (1_200_000 / 1_307.2 - 600_000 / 7_243.1)
    sweep = data["sweep"]
    assert isinstance(sweep, dict)
    assert sweep["per_shard_timers_per_second"] == pytest.approx(7_243.1)
    assert sweep["per_shard_recurring_timers_per_second"] == pytest.approx(recurring_rate, abs=0.1)
    sources = data["sweep_throughput_sources"]
    assert isinstance(sources, dict)
    assert sources["one_off"] == f"measured: {tmp_path / 'sweep_scale.json'}"
    assert sources["recurring"].startswith(f"measured: {tmp_path / 'recurring.json'}")
    recurring = data["sweep_measurement_recurring"]
    assert isinstance(recurring, dict)
    assert (recurring["one_off_timers"], recurring["recurring_timers"]) == (600_000, 600_000)
    # 8 shards: 112,500 one-off and 37,500 recurring timers each, at their own rates.
    assert sweep["shard_seconds"] == pytest.approx(
        112_500 / 7_243.1 + 37_500 / recurring_rate + sm.SWEEP_HOLD_SECONDS, abs=0.01
    )


def test_a_recurring_measurement_alone_is_read_with_the_assumed_one_off_rate(
    tmp_path: Path,
) -> None:
    model = inputs()
    path = write_measurement(tmp_path / "recurring.json", 1_000, recurring=600_000)
    measured = sm.load_sweep_measurement(path)
    assumed_one_off = sm.assumed_sweep_throughput(model)
    result = sm.with_measurement(model, None, measured)
    assert result.sweep_timers_per_second is None
    assert sm.throughput_source(result) == "assumed"
    expected = 600_000 / (1_200 - 600_000 / assumed_one_off)
    assert result.sweep_recurring_timers_per_second == pytest.approx(expected, abs=0.1)
    assert "assumed rate" in sm.recurring_throughput_source(result)


def test_a_recurring_measurement_without_recurring_timers_is_a_cli_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    one_off = write_measurement(tmp_path / "one_off.json", 7_000)
    with pytest.raises(SystemExit) as exited:
        sm.main(
            [
                *("--rate", "1000", "--sweep-measurement", str(one_off)),
                *("--sweep-measurement-recurring", str(one_off)),
            ]
        )
    assert exited.value.code == 2
    assert "no recurring timers" in capsys.readouterr().err


def test_a_measurement_without_the_figure_is_a_cli_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "broken.json"
    path.write_text(json.dumps({"seconds_to_hand_over": 3}))
    with pytest.raises(SystemExit) as exited:
        sm.main(["--rate", "1000", "--sweep-measurement", str(path)])
    assert exited.value.code == 2
    assert "per_shard_timers_per_second" in capsys.readouterr().err


def test_a_measurement_may_come_through_a_pipe(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # `--sweep-measurement <(jq … sweep_scale.json)`: a pipe is no file, but it is read (found
    # by review: it was refused as "no such file").
    written = write_measurement(tmp_path / "sweep_scale.json", per_shard=500)
    read_end, write_end = os.pipe()
    os.write(write_end, written.read_bytes())
    os.close(write_end)
    pipe = f"/dev/fd/{read_end}"
    try:
        argv = ["--rate", "1000", "--sweep-measurement", pipe, "--sweep-measurement-recurring"]
        data = run_json(capsys, *argv, "none")
    finally:
        os.close(read_end)
    assert data["sweep_throughput_sources"]["one_off"] == f"measured: {pipe}"


@pytest.mark.parametrize("option", ["--sweep-measurement", "--sweep-measurement-recurring"])
def test_a_measurement_file_named_and_missing_is_a_cli_error(
    tmp_path: Path, option: str, capsys: pytest.CaptureFixture[str]
) -> None:
    # Found by an audit: a mistyped path was taken as "no measurement", and the model priced
    # the sweep on the assumed throughput, saying so in one word.
    with pytest.raises(SystemExit) as exited:
        sm.main(["--rate", "1000", option, str(tmp_path / "sweep_scael.json")])
    assert exited.value.code == 2
    assert f"{option}: {tmp_path / 'sweep_scael.json'}: no such file" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--rate", "0"], "argument --rate: must be above 0, got 0"),
        (["--rate", "nan"], "argument --rate: expected a finite number, got 'nan'"),
        (["--rate", "lots"], "argument --rate: expected a number, got 'lots'"),
        (["--burst", "-1"], "argument --burst: must be at least 0, got -1"),
        (["--recurring-share", "1.5"], "argument --recurring-share: must be at most 1, got 1.5"),
        (["--timer-shards", "0"], "argument --timer-shards: must be at least 1, got 0"),
        (["--worker-queues", "2.5"], "argument --worker-queues: expected an integer, got '2.5'"),
        (["--worker-memory-mb", "64"], "argument --worker-memory-mb: must be at least 128, got 64"),
        (["--run-seconds", "-1"], "argument --run-seconds: must be at least 0, got -1"),
        (["--occurrences-per-sweep", "0"], "argument --occurrences-per-sweep: must be at least 1"),
        (["--fargate-task-concurrency", "0"], "argument --fargate-task-concurrency: must be at"),
        (["--fargate-max-tasks", "-2"], "argument --fargate-max-tasks: must be at least 1, got -2"),
        (["--fargate-vcpu", "0"], "argument --fargate-vcpu: must be above 0, got 0"),
    ],
)
def test_an_input_out_of_its_range_is_a_cli_error_naming_it(
    argv: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """Each once ended in a traceback (a division by zero), an endless loop or a plan for a
    negative rate."""
    with pytest.raises(SystemExit) as exited:
        sm.main(["--rate", "100", *argv])
    assert exited.value.code == 2
    assert message in capsys.readouterr().err


# --- workers ----------------------------------------------------------------------------------


def test_a_batch_runs_its_records_concurrently() -> None:
    """One thread per record (duetime/entrypoints/worker.py): an invocation lasts the early
    wait + one run + its overhead, whatever the batch size."""
    model = inputs(run_seconds=0.2, run_overhead_ms=30, early_wait_seconds=0.5)
    assert sm.invocation_seconds(model) == pytest.approx(0.73)
    assert sm.invocation_seconds(replace(model, worker_batch_size=1)) == pytest.approx(0.73)
    assert sm.invocation_seconds(replace(model, run_seconds=2.0)) == pytest.approx(2.53)


def test_littles_law_concurrency_and_in_flight() -> None:
    model = inputs(rate=1_000, run_seconds=1.0, run_overhead_ms=0, early_wait_seconds=0)
    assert sm.invocation_seconds(model) == 1.0  # a batch of 10 one-second runs, side by side
    assert sm.concurrency_for(model, 1_000) == 100  # 100 batches/s × 1 s
    workers = sm.workers_plan(model, queues=1, account_concurrency=10_000)
    assert workers.in_flight_peak == 1_000


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


def test_provisioned_mode_ramp_and_cap() -> None:
    standard = inputs(rate=1_000, burst=600_000)  # peak 11,000 runs/s
    provisioned = replace(standard, worker_min_pollers=50, worker_max_pollers=100)
    assert sm.mapping_cap(standard) == 1_000
    assert sm.mapping_cap(provisioned) == 1_000  # 100 pollers × 10 concurrent invokes
    assert provisioned.ramp_per_minute == 1_000
    assert standard.ramp_per_minute == 300
    # A poller polls at most 10 times a second (10 messages each): 10 runs/s per unit.
    assert sm.runs_per_unit(provisioned) == pytest.approx(10)
    assert sm.runs_per_unit(standard) == pytest.approx(10 / 0.73)
    fast = sm.workers_plan(provisioned, queues=1, account_concurrency=10_000)
    slow = sm.workers_plan(standard, queues=1, account_concurrency=10_000)
    # Provisioned starts at 10 per minimum poller (above the sustained 73) and adds 1,000 a
    # minute up to the cap: (1,000 − 500) / (1,000 / 60 s) = 30 s.
    assert fast.start_capacity == 500
    assert fast.ramp_seconds == pytest.approx(30.0)
    assert slow.start_capacity == sm.concurrency_for(standard, 1_000)
    # Standard: from the sustained 73 to the 803 the peak needs, at +300 a minute.
    assert slow.ramp_seconds == pytest.approx((803 - 73) / 5, abs=0.1)
    assert fast.drain_seconds < slow.drain_seconds
    assert fast.pollers_peak == 110  # 11,000 runs/s at 100 per poller
    # The cap: 100 pollers cannot carry 11,000 runs/s; 200 can.
    plan = sm.plan(provisioned, scan=False)
    mapping = check(plan, "worker concurrency per event source mapping")
    assert (mapping.demand, mapping.limit, mapping.ok) == (1_100, 1_000, False)
    assert "maximum ≥ 110" in mapping.fix
    roomy = sm.plan(replace(provisioned, worker_max_pollers=200), scan=False)
    assert check(roomy, "worker concurrency per event source mapping").ok


def test_provisioned_mode_starts_at_the_sustained_capacity() -> None:
    model = inputs(rate=10_000, burst=600_000, worker_min_pollers=50, worker_max_pollers=800)
    workers = sm.workers_plan(model, queues=1, account_concurrency=10_000)
    assert workers.start_capacity == 1_000  # 10,000 runs/s at 10 per unit, above 50 × 10
    assert workers.pollers_sustained == 100
    assert workers.pollers_peak == 200


def test_capacity_below_the_rate_never_drains() -> None:
    workers = sm.workers_plan(inputs(rate=20_000, burst=0), queues=1, account_concurrency=1_000)
    assert math.isinf(workers.drain_seconds)  # 1,000 × 10 / 0.73 s ≈ 13,700 runs/s
    enough = sm.workers_plan(inputs(rate=20_000, burst=0), queues=2, account_concurrency=4_000)
    assert not math.isinf(enough.drain_seconds)


def test_faster_ramp_drains_the_burst_sooner() -> None:
    model = inputs(rate=1_000, burst=600_000)
    slow = sm.workers_plan(model, queues=1, account_concurrency=10_000)
    fast = sm.workers_plan(
        replace(model, esm_ramp_per_minute=1_250), queues=1, account_concurrency=10_000
    )
    assert fast.drain_seconds < slow.drain_seconds
    assert fast.max_extra_lateness_seconds <= slow.max_extra_lateness_seconds


# --- cost -------------------------------------------------------------------------------------


@pytest.mark.parametrize("factor", [2, 5, 10])
def test_on_demand_cost_scales_linearly_with_rate(factor: int) -> None:
    base = sm.plan(inputs(rate=1_000), scan=False).cost
    scaled = sm.plan(inputs(rate=1_000 * factor), scan=False).cost
    assert scaled.dynamodb_on_demand == pytest.approx(factor * base.dynamodb_on_demand, rel=1e-3)
    assert scaled.sqs == pytest.approx(factor * base.sqs, rel=1e-3)
    assert scaled.per_million_on_demand == pytest.approx(base.per_million_on_demand, rel=1e-3)


def test_dynamodb_cost_per_million_follows_the_requests_per_run() -> None:
    cost = sm.plan(inputs(rate=1_000), scan=False).cost
    per_million_dynamodb = cost.dynamodb_on_demand / cost.runs_per_month * 1e6
    assert per_million_dynamodb == pytest.approx(4 * 0.625 + 2 * 0.125)  # $2.75
    assert cost.sqs / cost.runs_per_month * 1e6 == pytest.approx(0.3 * 0.40)


def test_lambda_is_priced_at_arm64_rates() -> None:
    model = inputs(rate=1_000)
    cost = sm.plan(model, scan=False).cost
    invocations = cost.runs_per_month / 10
    expected = invocations * 0.73 * 0.5 * 0.0000133334 + invocations * 0.20e-6
    assert cost.lambda_workers == pytest.approx(expected, rel=1e-4)


def test_provisioned_pollers_are_paid_for() -> None:
    standard = sm.plan(inputs(rate=10_000), scan=False).cost
    assert standard.event_pollers == 0
    model = inputs(
        rate=10_000, worker_min_pollers=50, worker_max_pollers=800, other_pollers_minimum=12
    )
    cost = sm.plan(model, scan=False).cost
    # 100 pollers carry the sustained rate (above the minimum 50), plus 12 on the other
    # mappings, all month at $0.00925 per EPU-hour.
    assert cost.event_pollers == pytest.approx((100 + 12) * 730 * 0.00925, rel=1e-3)
    assert cost.total_on_demand == pytest.approx(
        cost.dynamodb_on_demand
        + cost.sqs
        + cost.lambda_workers
        + cost.lambda_sweeps
        + cost.event_pollers
    )


def test_provisioned_is_cheaper_than_on_demand_at_a_steady_rate() -> None:
    cost = sm.plan(inputs(rate=1_000), scan=False).cost
    assert cost.dynamodb_provisioned_sustained < cost.dynamodb_on_demand


# --- checks and breaking points ---------------------------------------------------------------


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


def test_the_single_sweepers_send_check_is_gone() -> None:
    plan = sm.plan(inputs(rate=10_000, burst=600_000), scan=False)
    assert not any("send" in c.fix and "parallel" in c.fix for c in plan.checks)


def test_warm_throughput_raises_the_first_traffic_limit() -> None:
    model = inputs(rate=10_000)
    cold = check(sm.plan(model, scan=False), "new on-demand runs table: WRU/s")
    assert (cold.demand, cold.limit, cold.ok) == (20_000, 4_000, False)
    warm = sm.plan(replace(model, warm_writes={"runs": 40_000}), scan=False)
    assert check(warm, "new on-demand runs table: WRU/s").limit == 40_000
    assert check(warm, "new on-demand runs table: WRU/s").ok


def test_warmup_minutes() -> None:
    assert sm.warmup_minutes(4_000, 4_000) == 0
    assert sm.warmup_minutes(8_000, 4_000) == 30
    assert sm.warmup_minutes(20_000, 4_000) == 90


def test_per_table_quota_breaks_above_40k_request_units() -> None:
    at_quota = sm.plan(inputs(rate=20_000), scan=False)  # runs: 2 writes × 20,000/s
    assert check(at_quota, "runs table WRU/s vs per-table quota").ok
    above = sm.plan(inputs(rate=25_000), scan=False)
    assert not check(above, "runs table WRU/s vs per-table quota").ok
    raised = sm.plan(inputs(rate=25_000, table_quota=60_000), scan=False)
    assert check(raised, "runs table WRU/s vs per-table quota").ok


def test_the_large_profile_holds_every_limit_at_its_load(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """10,000 runs/s + 600,000 in a minute, all one-off, at the measured throughputs: the
    sweeps read no job, so the jobs table's 40,000 RRU/s carry the workers' reads."""
    data = run_json(
        capsys,
        *("--rate", "10000", "--burst", "600000", "--profile", "large"),
        *measurements(tmp_path),
    )
    limits = data["limits"]
    assert isinstance(limits, list)
    assert [entry["name"] for entry in limits if not entry["holds"]] == []
    assert data["broken_first"] is None


def test_half_recurring_load_reads_the_jobs_table_while_sweeping(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """With half the sustained runs recurring the large profile's sweeps read 300,000 jobs and
    write 300,000 next timers at 32 × the recurring rate: above the jobs table's quota while
    the burst falls due, and above the timers table's warm writes."""
    data = run_json(
        capsys,
        *("--rate", "10000", "--burst", "600000", "--profile", "large"),
        *("--recurring-share", "0.5", *measurements(tmp_path)),
    )
    limits = {entry["name"]: entry for entry in data["limits"]}  # type: ignore[attr-defined]
    assert limits["sweep of the burst minute (s)"]["holds"]
    assert not limits["jobs table RRU/s vs per-table quota"]["holds"]
    assert not limits["new on-demand timers table: WRU/s at first traffic"]["holds"]


# --- the command line -------------------------------------------------------------------------


def test_profile_large_loads_infra_profiles(no_measurement: list[str]) -> None:
    large = PROFILES["large"]
    model, as_json, measured = sm.parse_args(
        ["--rate", "10000", "--profile", "large", *no_measurement]
    )
    assert (as_json, measured) == (False, (None, None))
    assert model.profile == "large"
    assert model.timer_shards == large.timer_shards
    assert model.job_partitions == large.job_partitions
    assert model.account_concurrency == large.lambda_concurrency_quota
    assert model.table_quota == large.table_quota_request_units
    assert model.sweeper_reserved_concurrency == large.sweeper_reserved_concurrency
    assert model.sweeper_memory_mb == large.sweeper_memory_mib
    assert large.worker_pollers is not None
    normal = large.worker_pollers["normal"]
    assert (model.worker_min_pollers, model.worker_max_pollers) == (normal.minimum, normal.maximum)
    assert model.provisioned
    assert model.other_pollers_minimum == sum(
        p.minimum for k, p in large.worker_pollers.items() if k != "normal"
    )
    for table, warm in large.warm_throughput.items():
        assert model.warm_reads[table] == warm.reads
        assert model.warm_writes[table] == warm.writes


def test_the_default_profile_is_the_default(no_measurement: list[str]) -> None:
    model, _, _ = sm.parse_args(["--rate", "100", *no_measurement])
    default = PROFILES["default"]
    assert model.profile == "default"
    assert model.timer_shards == default.timer_shards
    assert model.provisioned is (default.worker_pollers is not None)


def test_cli_options_override_the_profile(no_measurement: list[str]) -> None:
    model, _, _ = sm.parse_args(
        [
            *("--rate", "10000", "--profile", "large", *no_measurement),
            *("--timer-shards", "40", "--job-partitions", "2", "--table-quota", "80000"),
            *("--account-concurrency", "3000", "--worker-pollers", "none"),
        ]
    )
    assert (model.timer_shards, model.job_partitions, model.table_quota) == (40, 2, 80_000)
    assert model.account_concurrency == 3_000
    assert not model.provisioned
    pollers, _, _ = sm.parse_args(["--rate", "1", "--worker-pollers", "10,300", *no_measurement])
    assert (pollers.worker_min_pollers, pollers.worker_max_pollers) == (10, 300)


def test_an_unknown_profile_is_a_cli_error(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        sm.parse_args(["--rate", "1", "--profile", "huge"])
    assert exited.value.code == 2
    assert "invalid choice: 'huge'" in capsys.readouterr().err


def test_json_lists_every_limit(
    capsys: pytest.CaptureFixture[str], no_measurement: list[str]
) -> None:
    data = run_json(capsys, "--rate", "10000", "--burst", "600000", *no_measurement)
    checks = data["checks"]
    limits = data["limits"]
    assert isinstance(checks, list)
    assert isinstance(limits, list)
    assert [entry["name"] for entry in limits] == [c["name"] for c in checks]
    for entry in limits:
        assert set(entry) >= {"name", "holds", "demand", "limit", "ratio", "fix", "breaks_at_rate"}
        assert isinstance(entry["holds"], bool)
    assert any(not entry["holds"] for entry in limits)
    assert data["profile"] == "default"
    # The keys that were there before stay.
    for key in ("inputs", "shards_needed", "sustained", "peak", "sweep", "workers", "cost"):
        assert key in data
    assert data["broken_first"]


def test_cli_prints_a_plan_and_json(
    capsys: pytest.CaptureFixture[str], no_measurement: list[str]
) -> None:
    assert sm.main(["--rate", "10000", "--burst", "600000", *no_measurement]) == 0
    text = capsys.readouterr().out
    assert "timer shards needed: 25" in text
    assert "Breaks first:" in text
    data = run_json(capsys, "--rate", "20000", "--burst", "0", *no_measurement)
    assert data["shards_needed"] == 25
    assert data["broken_first"]
    assert data["workers_as_configured"]["drain_seconds"] is None  # type: ignore[index]


def test_runs_from_any_directory(tmp_path: Path, no_measurement: list[str]) -> None:
    """Run as a script outside the repository, it still finds infra/profiles.py."""
    script = Path(sm.__file__).resolve()
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    done = subprocess.run(
        [sys.executable, str(script), "--rate", "100", "--profile", "large", *no_measurement],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        check=False,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    assert "profile `large`" in done.stdout


def test_the_models_sweep_hold_is_the_sweepers() -> None:
    assert sm.SWEEP_HOLD_SECONDS * 1000 == SWEEP_HOLD_MS
