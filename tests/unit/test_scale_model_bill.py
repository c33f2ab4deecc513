"""The scale model's whole bill per run (scripts/scale_model.py): hand-computed small cases."""

from __future__ import annotations

import json
import math
from dataclasses import replace

import pytest

from scripts import scale_model as sm

# A month of 10 runs/s: 26.28 million runs, inside API Gateway's first price tier.
SMALL_MONTH = 10 * 730 * 3600


def inputs(rate: float = 10, **kwargs: object) -> sm.Inputs:
    """The model's inputs, with a fixed early wait of 0.5 s (see test_scale_model.inputs)."""
    fields: dict[str, object] = {"early_wait_seconds": 0.5, **kwargs}
    return replace(sm.Inputs(rate=rate, burst=0), **fields)  # type: ignore[arg-type]


def bill(model: sm.Inputs, path: str, runs: float = SMALL_MONTH) -> sm.PathBill:
    return sm.path_bill(model, path, runs)


# --- the API: single and batch submissions ----------------------------------------------------


def test_a_batch_of_100_costs_the_api_a_hundredth_of_single_submissions() -> None:
    # A batch request that takes the function as long as a single one: every API cost ÷ 100.
    model = inputs(api_ms_single=40, api_ms_batch=40)
    single, batch = bill(model, "one_off_single"), bill(model, "one_off_batch")
    assert single.parts["api_gateway"] == pytest.approx(1.00)  # $1.00 per million requests
    assert batch.parts["api_gateway"] == pytest.approx(0.01)
    # The API function: $0.20 per million requests + 40 ms × 0.5 GB × $0.0000133334 per run.
    assert single.parts["lambda_api"] == pytest.approx(0.20 + 0.040 * 0.5 * 13.3334, rel=1e-4)
    assert batch.parts["lambda_api"] == pytest.approx(single.parts["lambda_api"] / 100, rel=1e-3)
    # The default batch takes 400 ms: 4 ms of the function per job.
    default = bill(inputs(), "one_off_batch").parts["lambda_api"]
    assert default == pytest.approx(0.20 / 100 + 0.004 * 0.5 * 13.3334, rel=1e-4)


def test_http_api_requests_beyond_300_million_cost_less() -> None:
    assert sm.http_api_price(100e6) == pytest.approx(1.00e-6)
    assert sm.http_api_price(400e6) == pytest.approx((300 * 1.00 + 100 * 0.90) / 400 * 1e-6)


def test_the_api_costs_a_recurring_occurrence_its_jobs_creation_shared_out() -> None:
    model = inputs(occurrences_per_recurring_job=1_000)
    assert bill(model, "recurring").parts["api_gateway"] == pytest.approx(1.00 / 1_000)


# --- EventBridge Scheduler --------------------------------------------------------------------


def test_eventbridge_scheduler_free_tier() -> None:
    assert sm.scheduler_per_million(10e6) == 0.0  # within the 14 million free
    assert sm.scheduler_per_million(14e6) == 0.0
    assert sm.scheduler_per_million(28e6) == pytest.approx(0.50)  # half of them paid
    assert sm.scheduler_per_million(26.28e9) == pytest.approx((26.28e9 - 14e6) / 26.28e9)
    assert bill(inputs(), "recurring", runs=28e6).eventbridge_scheduler == pytest.approx(0.50)


# --- Lambda: arm64, the worker's time per run -------------------------------------------------


def test_arm64_is_four_fifths_of_x86() -> None:
    arm = sm.plan(inputs(rate=1_000), scan=False).cost
    x86 = sm.plan(inputs(rate=1_000, lambda_architecture="x86_64"), scan=False).cost
    invocations = arm.runs_per_month / 10
    duration = invocations * 0.73 * 0.5
    assert arm.lambda_workers == pytest.approx(
        duration * 0.0000133334 + invocations * 0.2e-6, rel=1e-4
    )
    assert x86.lambda_workers == pytest.approx(
        duration * 0.0000166667 + invocations * 0.2e-6, rel=1e-4
    )
    ratio = sm.PRICE_LAMBDA_GB_SECOND / sm.PRICE_LAMBDA_GB_SECOND_X86
    assert ratio == pytest.approx(0.8, rel=1e-4)


def test_an_unknown_architecture_is_refused() -> None:
    with pytest.raises(ValueError, match="architecture"):
        sm.lambda_gb_second_price(inputs(lambda_architecture="mips"))


def test_the_worker_is_priced_from_a_measured_time_per_run() -> None:
    assumed = bill(inputs(), "one_off_single").parts["lambda_workers"]
    # 0.73 s per invocation of 10 records: 73 ms a run at 0.5 GB, + $0.20 per million ÷ 10.
    assert assumed == pytest.approx(0.02 + 0.073 * 0.5 * 13.3334, rel=1e-4)
    measured = bill(inputs(worker_seconds_per_run=0.025), "one_off_single")
    assert measured.parts["lambda_workers"] == pytest.approx(0.02 + 0.025 * 0.5 * 13.3334, rel=1e-4)
    cost = sm.plan(inputs(rate=1_000, worker_seconds_per_run=0.025), scan=False).cost
    expected = cost.runs_per_month * (0.025 * 0.5 * 0.0000133334 + 0.02e-6)
    assert cost.lambda_workers == pytest.approx(expected, rel=1e-4)


def test_an_invocation_pays_its_batchs_longest_early_wait() -> None:
    """Records run side by side: the invocation ends with its slowest record. Waits spread
    evenly over [0, 0.9 s) (unheld sends: duetime.domain.messages.delay_seconds): the longest
    of 10 is 9/11 s."""
    assert sm.longest_of_uniform_waits(0.9, 10) == pytest.approx(9 / 11)
    assert sm.longest_of_uniform_waits(1.0, 1) == pytest.approx(0.5)
    model = inputs(early_wait_seconds=sm.longest_of_uniform_waits(0.9, 10))
    assert sm.invocation_seconds(model) == pytest.approx(9 / 11 + 0.2 + 0.03)


def test_mappings_per_priority_at_10000_runs_per_second() -> None:
    # 2.8 s invocations of 10: 2,800 concurrent batches sustained, 5,600 at 20,000 runs/s.
    slow = inputs(rate=10_000, early_wait_seconds=2.57, run_seconds=0.2, run_overhead_ms=30)
    assert sm.invocation_seconds(slow) == pytest.approx(2.8)
    assert sm.mappings_per_priority(slow, 10_000) == 3
    assert sm.mappings_per_priority(slow, 20_000) == 6
    fast = inputs(rate=10_000)  # 0.73 s: 730 and 1,460 concurrent batches
    assert sm.mappings_per_priority(fast, 10_000) == 1
    assert sm.mappings_per_priority(fast, 20_000) == 2
    workers = sm.plan(inputs(rate=10_000, burst=600_000), scan=False).workers
    assert (workers.queues_needed_sustained, workers.queues_needed) == (1, 2)


# --- the rest of the bill ---------------------------------------------------------------------


def test_archiver_s3_puts_and_free_stream_reads() -> None:
    part = bill(inputs(), "one_off_single").parts["archive"]
    # Per 1,000 runs: one invocation ($0.20 per million), 2 s at 1 GB, one PUT ($0.005 per 1,000);
    # the stream's GetRecords by Lambda cost nothing.
    per_batch = 0.2e-6 + 2 * 1 * 0.0000133334 + 0.005e-3
    assert sm.PRICE_STREAM_READ_BY_LAMBDA == 0.0
    assert part == pytest.approx(per_batch / 1_000 * 1e6, rel=1e-3)


def test_cloudwatch_logs_and_custom_metrics() -> None:
    model = inputs(
        worker_log_bytes_per_run=0,
        # Lambda's own lines: 1 GB per million runs (10 a batch)
        lambda_platform_log_bytes_per_invocation=10 * 1024**3 / 1e6,
        api_log_bytes_per_request=0,
        custom_metrics=25,
    )
    part = bill(model, "one_off_single", runs=7.5e6).parts["cloudwatch"]
    # $0.50 per GB ingested + 25 metrics × $0.30 a month over 7.5 million runs ($1.00 a million).
    assert part == pytest.approx(0.50 + 1.00, rel=1e-6)


def test_dynamodb_on_demand_and_provisioned_per_million() -> None:
    # A batch-created one-off: job, timer, claim, outcome; the worker's job item (no
    # dependents), and a share of the batch's horizon reads (one per shard of its timers).
    model = inputs()
    reads = 1 + model.timer_shards / 100
    assert sm.one_off_batch_reads(model) == pytest.approx(reads)
    one_off = bill(model, "one_off_batch")
    assert one_off.parts["dynamodb"] == pytest.approx(4 * 0.625 + reads * 0.125)
    provisioned = (4 * 0.00065 + reads * 0.00013) / 3600 / 0.7 * 1e6
    assert one_off.dynamodb_provisioned == pytest.approx(provisioned, rel=1e-3)
    assert one_off.provisioned == pytest.approx(
        one_off.on_demand - one_off.parts["dynamodb"] + provisioned, abs=2e-3
    )
    assert one_off.on_demand == pytest.approx(sum(one_off.parts.values()), abs=1e-3)
    # A recurring occurrence (one per sweep): claim, outcome and its next timer; its worker's
    # job read, the sweep's job read and a 160th of a horizon read.
    recurring = bill(inputs(), "recurring")
    assert recurring.parts["dynamodb"] == pytest.approx(3 * 0.625 + (2 + 1 / 160) * 0.125)
    # Every minute (planned ahead): the timer, the sweep's job and horizon reads per ten.
    frequent = bill(inputs(), "recurring_frequent")
    assert frequent.parts["dynamodb"] == pytest.approx(
        (2 + 1 / 10) * 0.625 + (1 + (1 + 1 / 160) / 10) * 0.125
    )


def test_storage_over_a_runs_life() -> None:
    # Without DynamoDB's per-item overhead and point-in-time recovery (the model's defaults
    # have both: test_scale_model_omissions.py).
    model = inputs(
        run_item_bytes=1024,
        hot_window_days=730 / 24,
        item_overhead_bytes=0,
        point_in_time_recovery=False,
    )
    # 1 KB for one month at $0.25 per GB-month: a million runs hold 2**-20 × 10**6 GB-months.
    expected = 0.25 * 1e6 / 2**20
    run = bill(model, "recurring").dynamodb_storage_by_item["run"]
    assert run == pytest.approx(expected, rel=1e-5)
    # Then 60 bytes a row in S3 for 365 days at $0.023 per GB-month.
    archived = 60 / 2**30 * 365 / (730 / 24) * 0.023 * 1e6
    assert bill(model, "recurring").parts["history_storage"] == pytest.approx(archived, rel=1e-4)


def test_targets_are_checked_as_written() -> None:
    result = sm.whole_bill(inputs(), SMALL_MONTH)
    as_written = [
        ("recurring", "on_demand", 1.00),
        ("recurring_frequent", "on_demand", 1.00),
        ("one_off_batch", "on_demand", 2.00),
        ("one_off_batch", "provisioned", 1.00),
    ]
    assert [(t.path, t.capacity, t.target) for t in result.targets] == as_written * 2
    assert [t.workers for t in result.targets] == ["lambda"] * 4 + ["fargate"] * 4
    by_path = {p.path: p for p in result.paths}
    for t in result.targets:
        suffix = "_fargate" if t.workers == "fargate" else ""
        assert t.per_million == getattr(by_path[t.path], t.capacity + suffix)
        assert t.met == (t.per_million <= t.target)


def test_json_keeps_its_keys_and_adds_the_bill(capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["--rate", "100", "--sweep-measurement", "none"]
    argv += ["--sweep-measurement-recurring", "none", "--json"]
    assert sm.main(argv) == 0
    data = json.loads(capsys.readouterr().out)
    assert {"cost", "workers", "limits", "checks", "broken_first"} <= data.keys()
    assert "per_million_on_demand" in data["cost"]
    assert [p["path"] for p in data["bill"]["paths"]] == list(sm.PATHS)
    assert len(data["bill"]["targets"]) == 8  # as written, then with Fargate workers
    assert data["bill"]["fargate"]["bound"] in ("slots", "cpu")
    assert data["workers"]["queues_needed_sustained"] == 1


def test_cli_options_set_the_measured_figures(capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["--rate", "100", "--sweep-measurement", "none"]
    argv += ["--sweep-measurement-recurring", "none", "--json"]
    argv += ["--worker-seconds-per-run", "0.02", "--lambda-architecture", "x86_64"]
    argv += ["--early-wait-seconds", "0.1", "--writes-one-off-batch", "3"]
    assert sm.main(argv) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["inputs"]["worker_seconds_per_run"] == 0.02
    assert data["inputs"]["lambda_architecture"] == "x86_64"
    assert data["inputs"]["early_wait_seconds"] == 0.1
    batch = data["bill"]["paths"][1]
    reads = 1 + data["inputs"]["timer_shards"] / 100
    assert batch["parts"]["dynamodb"] == pytest.approx(3 * 0.625 + reads * 0.125)


def test_the_default_early_wait_is_the_held_sends_release_window() -> None:
    """Every path the model prices has its sends held (duetime.services.release): a message
    becomes visible at most RELEASE_LEAD_MS before its instant, so that is the wait priced."""
    from duetime.domain.messages import RELEASE_LEAD_MS

    assert sm.Inputs(rate=10, burst=0).early_wait_seconds == RELEASE_LEAD_MS / 1000
    sources = sm.input_sources(sm.Inputs(rate=10, burst=0))
    assert sources["early_wait_seconds"].startswith("the held sends' release window")


# --- Fargate workers --------------------------------------------------------------------------

FARGATE_TASK_HOURLY = 0.5 * 0.03238 + 1.0 * 0.00356 + 0.005  # vCPU, GB, public IPv4


def test_a_fargate_task_serves_its_slots_runs_until_its_vcpu_is_full() -> None:
    # A run holds a slot for the early wait + the run + the calls (+ its CPU at the share).
    slots = sm.fargate_workers(inputs(fargate_task_concurrency=8))
    assert slots.slot_seconds == pytest.approx(0.5 + 0.2 + 0.03)
    assert slots.runs_per_task_second == pytest.approx(8 / 0.73, abs=0.01)
    assert slots.bound == "slots"
    assert slots.task_dollars_per_run == pytest.approx(
        FARGATE_TASK_HOURLY / 3600 / (8 / 0.73 * 0.7), rel=1e-3
    )
    assert slots.tasks_at_rate == math.ceil(10 / (8 / 0.73 * 0.7))
    # 10 ms of CPU a run on half a vCPU: 50 runs a second at most, however many slots.
    cpu = sm.fargate_workers(
        inputs(fargate_task_concurrency=64, worker_cpu_seconds_per_run=0.01, rate=1_000)
    )
    assert cpu.slot_seconds == pytest.approx(0.73 + 0.02)
    assert cpu.bound == "cpu"
    assert cpu.runs_per_task_second == pytest.approx(50)
    assert cpu.tasks_at_rate == math.ceil(1_000 / 35)
    no_ip = sm.fargate_workers(inputs(fargate_task_concurrency=8, fargate_public_ip=False))
    assert no_ip.task_dollars_per_run == pytest.approx(
        slots.task_dollars_per_run * (FARGATE_TASK_HOURLY - 0.005) / FARGATE_TASK_HOURLY
    )


def test_the_fargate_service_settles_on_the_backlog_step_that_holds_and_keeps_up() -> None:
    # 64 slots, 0.75 s a run, 50 runs/s a task (its vCPU). At 1,000 runs/s 750 are in flight:
    # 16 tasks hold them (12 would, the steps double) but serve 800/s, so the backlog grows
    # to the next step, 32 tasks (16 vCPU), within Fargate's launch burst.
    cpu = {"fargate_task_concurrency": 64, "worker_cpu_seconds_per_run": 0.01}
    busy = sm.fargate_workers(inputs(rate=1_000, **cpu))
    assert (busy.tasks_scaled, busy.vcpu_scaled, busy.launch_seconds) == (32, 16.0, 0.0)
    assert busy.max_tasks == 10
    assert busy.runs_per_second_at_max_tasks == pytest.approx(500)  # the default maximum
    # At 10,000 runs/s: 256 tasks, 156 of them after the launch burst of 100, 20 a second.
    big = sm.fargate_workers(inputs(rate=10_000, fargate_max_tasks=300, **cpu))
    assert (big.tasks_scaled, big.launch_seconds) == (256, 7.8)
    assert big.runs_per_second_at_max_tasks == pytest.approx(15_000)
    # 8 slots and 0.73 s a run: 7.3 runs in flight at 10 runs/s, and one task serves 10.96.
    assert sm.fargate_workers(inputs(fargate_task_concurrency=8)).tasks_scaled == 1
    assert sm.fargate_workers(inputs(rate=11, fargate_task_concurrency=8)).tasks_scaled == 2


def test_the_fargate_workers_sqs_requests_follow_their_slots_and_rate() -> None:
    # A receive asks for the free slots (10 at most): 8 slots at 70 % leave 2.4 free.
    assert sm.fargate_workers(inputs(fargate_task_concurrency=8)).receives_per_run == (
        pytest.approx(1 / 2.4, abs=1e-4)
    )
    assert sm.fargate_workers(inputs(fargate_task_concurrency=64)).receives_per_run == 0.1
    # Deletes: ceil(n / 10) requests for the n runs finishing within a hold.
    assert sm.poisson_mean_ceil(0.0, 10) == 0.0
    assert sm.poisson_mean_ceil(0.5, 10) == pytest.approx(1 - math.exp(-0.5), rel=1e-6)
    assert sm.poisson_mean_ceil(1_000, 10) == pytest.approx(100.5, abs=0.1)
    slow = sm.fargate_workers(inputs(fargate_task_concurrency=1, early_wait_seconds=5.0))
    assert slow.deletes_per_run > 0.9  # one run a hold: a request each
    busy = sm.fargate_workers(inputs(fargate_task_concurrency=64, early_wait_seconds=0.0))
    assert busy.deletes_per_run < 0.12


def test_a_paths_bill_with_fargate_workers_swaps_the_workers_and_their_sqs() -> None:
    model = inputs(fargate_task_concurrency=8)
    fargate = sm.fargate_workers(model)
    b = bill(model, "one_off_batch")
    assert b.fargate_tasks == pytest.approx(fargate.task_dollars_per_run * 1e6, rel=1e-4)
    sqs = 0.3 - 0.2 + fargate.receives_per_run + fargate.deletes_per_run
    assert b.fargate_sqs == pytest.approx(sqs * 0.40, rel=1e-3)
    lambda_side = b.parts["lambda_workers"] + b.parts["event_pollers"] + b.parts["sqs"]
    # The webhook secrets' decrypts: per Lambda execution environment, per Fargate task.
    lambda_side += b.parts["webhook_secrets"]
    assert b.on_demand_fargate == pytest.approx(
        b.on_demand - lambda_side + b.fargate_tasks + b.fargate_sqs + b.fargate_webhook_secrets,
        abs=1e-3,
    )
    assert b.provisioned_fargate - b.on_demand_fargate == pytest.approx(
        b.provisioned - b.on_demand, abs=1e-3
    )


def test_a_staged_second_costs_the_lambda_worker_a_tenth_of_its_memory_second() -> None:
    model = inputs(fargate_task_concurrency=8, worker_memory_mb=768)
    staged = sm.staged_second_per_million(model)
    assert staged["lambda"] == pytest.approx(0.75 * 0.0000133334 / 10 * 1e6, rel=1e-3)
    # On Fargate, bound by its slots: a second more of 8 slots' hold, at the utilisation.
    later = 8 / 1.73 * 0.7
    now = 8 / 0.73 * 0.7
    expected = FARGATE_TASK_HOURLY / 3600 * (1 / later - 1 / now) * 1e6
    assert staged["fargate"] == pytest.approx(expected, rel=1e-3)


def test_the_fargate_defaults_are_the_deployed_ones() -> None:
    import inspect

    from duetime.services.queue_worker import QueueWorker
    from infra.props import SchedulerProps

    model = sm.Inputs(rate=10, burst=0)
    props = SchedulerProps.__dataclass_fields__
    assert model.fargate_task_concurrency == props["fargate_task_concurrency"].default
    assert model.fargate_vcpu == props["fargate_cpu"].default / 1024
    assert model.fargate_memory_gb == props["fargate_memory_mib"].default / 1024
    assert model.fargate_max_tasks == props["fargate_max_tasks"].default
    hold = inspect.signature(QueueWorker).parameters["delete_hold_seconds"].default
    assert hold == sm.FARGATE_DELETE_HOLD_SECONDS
