"""What the scale model's bill used to leave out (an outside audit, 2026-11-30): DynamoDB storage
beyond the run record and point-in-time recovery, the workers' batch fill, the webhook secrets'
decrypts, free tiers, and the labels of its totals (scripts/scale_model.py)."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest

from duetime.services.webhook_secrets import DEFAULT_CACHE_SECONDS
from infra.profiles import PROFILES
from scripts import scale_model as sm

# A month of 10 runs/s: 26.28 million runs.
SMALL_MONTH = 10 * 730 * 3600
GB_MONTH = 2**30 * 730 / 24  # byte-days in a GB-month (the model's 730-hour month)


def inputs(rate: float = 10, **kwargs: object) -> sm.Inputs:
    """The model's inputs, with a fixed early wait of 0.5 s (see test_scale_model.inputs)."""
    fields: dict[str, object] = {"early_wait_seconds": 0.5, **kwargs}
    return replace(sm.Inputs(rate=rate, burst=0), **fields)  # type: ignore[arg-type]


def bill(model: sm.Inputs, path: str, runs: float = SMALL_MONTH) -> sm.PathBill:
    return sm.path_bill(model, path, runs)


def per_million(byte_days: float, price: float) -> float:
    return byte_days / GB_MONTH * price * 1e6


# --- 1. DynamoDB storage: every item a run keeps, DynamoDB's overhead, point-in-time recovery --


def test_a_one_off_pays_for_its_run_record_job_item_and_timer_with_overhead_and_pitr() -> None:
    # Run record 400 B for 30 days, job item 724 B for 30 days after its run, timer 150 B for
    # 7 days after its due time: each + 100 B; storage $0.25, PITR $0.20 per GB-month.
    byte_days = (400 + 100) * 30 + (724 + 100) * 30 + (150 + 100) * 7
    for path in ("one_off_single", "one_off_batch"):
        b = bill(inputs(), path)
        assert b.parts["dynamodb_storage"] == pytest.approx(per_million(byte_days, 0.25), rel=1e-4)
        assert b.parts["dynamodb_pitr"] == pytest.approx(per_million(byte_days, 0.20), rel=1e-4)
        assert b.dynamodb_storage_by_item["job"] == pytest.approx(
            per_million((724 + 100) * 30, 0.45), rel=1e-4
        )
        assert b.on_demand == pytest.approx(sum(b.parts.values()), abs=1e-3)
    # Without PITR (not as deployed): the storage alone.
    off = bill(inputs(point_in_time_recovery=False), "one_off_batch")
    assert off.parts["dynamodb_pitr"] == 0.0
    # Submitted 10 days ahead: the job item and its timer are stored 10 days more.
    ahead = bill(inputs(one_off_lead_days=10), "one_off_batch")
    extra = (724 + 100) * 10 + (150 + 100) * 10
    assert ahead.parts["dynamodb_storage"] - bill(inputs(), "one_off_batch").parts[
        "dynamodb_storage"
    ] == pytest.approx(per_million(extra, 0.25), rel=1e-3)


def test_a_recurring_jobs_item_is_shared_by_its_occurrences() -> None:
    # A daily job: its item a day per occurrence, plus the hot window after it ends over its
    # 1,440 occurrences; its timer written a day ahead and kept 7 days after, one per
    # occurrence. Every minute: a minute per occurrence, a timer per ten (planned ahead).
    model = inputs()
    daily = bill(model, "recurring").dynamodb_storage_by_item
    assert daily["run"] == pytest.approx(per_million((400 + 100) * 30, 0.45), rel=1e-4)
    assert daily["job"] == pytest.approx(per_million(824 * (1 + 30 / 1440), 0.45), rel=1e-4)
    assert daily["timer"] == pytest.approx(per_million(250 * (1 + 7), 0.45), rel=1e-4)
    # (GB-months per run, unrounded: these parts are a few millionths of a dollar.)
    frequent = sm.dynamodb_storage_by_item(model, "recurring_frequent")
    minute = 1 / 1440
    assert frequent["job"] == pytest.approx(824 * (minute + 30 / 1440) / GB_MONTH, rel=1e-9)
    assert frequent["timer"] == pytest.approx(250 * (10 * minute + 7) / 10 / GB_MONTH, rel=1e-9)


def test_the_item_sizes_and_lifetimes_are_the_domains() -> None:
    """The default job item is Job.size_bytes of a webhook job with a small payload, the
    timers' lifetime the engine's timer TTL, the hot window the runs' TTL."""
    from duetime.domain.ids import new_job_id
    from duetime.domain.jobs import Job, JobStatus, parse_job_spec
    from duetime.settings import Settings

    spec = parse_job_spec(
        {
            "schedule": {"at": "2026-12-01T00:00:00Z"},
            "target": {"type": "http", "url": "https://hooks.example.com/duetime/jobs"},
            "payload": {"order_id": "ord_8f3a2c91", "action": "remind"},
        }
    )
    job = Job(
        tenant="tenant-00042",
        id=new_job_id(1_764_460_800_000, bytes(10)),
        spec=spec,
        status=JobStatus.SCHEDULED,
        created_ms=1_764_460_800_000,
        updated_ms=1_764_460_800_000,
    )
    model = sm.Inputs(rate=10, burst=0)
    assert model.job_item_bytes == job.size_bytes
    fields = Settings.__dataclass_fields__
    assert model.timer_ttl_days == fields["timer_ttl_seconds"].default / 86_400
    assert model.hot_window_days == fields["run_ttl_seconds"].default / 86_400
    assert model.item_overhead_bytes == 100
    assert model.point_in_time_recovery


# --- 2. The workers' batch fill --------------------------------------------------------------


def test_records_per_invocation_prices_the_workers_and_the_sqs_requests() -> None:
    full, half = inputs(), inputs(worker_batch_fill=5)
    assert full.records_per_invocation == 10
    assert half.records_per_invocation == 5
    # An invocation: 0.5 s early wait + 0.2 s run + 30 ms, whatever the records (CPU not counted).
    b = bill(half, "one_off_batch")
    assert b.parts["lambda_workers"] == pytest.approx(0.2 / 5 + 0.73 / 5 * 0.5 * 13.3334, rel=1e-4)
    # The send, then a receive and a delete per invocation of 5.
    assert b.parts["sqs"] == pytest.approx((0.1 + 2 / 5) * 0.40, rel=1e-6)
    assert bill(full, "one_off_batch").parts["sqs"] == pytest.approx(0.3 * 0.40, rel=1e-6)
    # Twice the invocations at once for the same rate.
    assert sm.concurrency_for(half, 1_000) == 2 * sm.concurrency_for(full, 1_000)
    # The Fargate workers' SQS requests do not depend on Lambda's fill.
    assert b.fargate_sqs == pytest.approx(bill(full, "one_off_batch").fargate_sqs, rel=1e-6)
    # A fill above the batch size is the batch size.
    assert inputs(worker_batch_fill=20).records_per_invocation == 10


def test_the_batch_fills_the_audit_measured_at_the_deployed_worker() -> None:
    """768 MB, 9.54 ms CPU a run: the workers + SQS the audit computed (batch_fill.py)."""
    deployed = sm.inputs_from_profile(PROFILES["default"], 10_000, 0)
    expected = {10: 0.74, 7: 0.94, 5: 1.22, 1.4: 3.69}
    for fill, dollars in expected.items():
        b = bill(replace(deployed, worker_batch_fill=fill), "one_off_batch", runs=26.28e9)
        workers_and_sqs = b.parts["lambda_workers"] + b.parts["sqs"]
        assert workers_and_sqs == pytest.approx(dollars, abs=0.006), fill


def test_the_bill_shows_the_figures_at_a_lower_fill(capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["--rate", "10000", "--sweep-measurement", "none"]
    argv += ["--sweep-measurement-recurring", "none"]
    assert sm.main(argv) == 0
    text = capsys.readouterr().out
    assert "priced at 10 records an invocation (full batches)" in text
    assert "At 5 records:" in text
    assert sm.main([*argv, "--records-per-invocation", "5", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["inputs"]["worker_batch_fill"] == 5
    assert data["bill"]["batch_fill"]["records_per_invocation"] == 5
    assert data["input_sources"]["records_per_invocation"] == "given"
    with pytest.raises(SystemExit):
        sm.main([*argv, "--records-per-invocation", "11"])
    assert "--records-per-invocation" in capsys.readouterr().err


# --- 3. Webhook secrets: per tenant and worker environment -----------------------------------


def test_webhook_secrets_cost_per_tenant_and_execution_environment() -> None:
    # 10,000 runs/s in 0.73 s invocations of 10: 730 environments, each decrypting each of 100
    # tenants' secrets once per 15 minutes (the worker's cache; once a minute until
    # 2026-11-30, 15 times this): a KMS Decrypt ($0.03 per 10,000) and a GetItem.
    model = inputs(rate=10_000, webhook_tenants=100)
    assert sm.concurrency_for(model, 10_000) == 730
    assert model.webhook_secret_cache_seconds == DEFAULT_CACHE_SECONDS == 900
    monthly = 730 * 100 * 730 * 4 * (0.03 / 10_000 + 0.125e-6)
    assert sm.webhook_secrets_per_month(model, 730) == pytest.approx(monthly, rel=1e-9)
    runs = 10_000 * 730 * 3600
    b = bill(model, "one_off_batch", runs=runs)
    assert b.parts["webhook_secrets"] == pytest.approx(monthly / runs * 1e6, abs=1e-6)
    assert b.parts["webhook_secrets"] == pytest.approx(0.025, abs=0.001)
    # Twice the tenants, twice the cost; none, nothing.
    double = bill(inputs(rate=10_000, webhook_tenants=200), "one_off_batch", runs=runs)
    assert double.parts["webhook_secrets"] == pytest.approx(
        2 * b.parts["webhook_secrets"], abs=2e-6
    )
    assert bill(inputs(webhook_tenants=0), "recurring").parts["webhook_secrets"] == 0.0
    # An environment handling 60 runs in its cache period delivers for at most 60 tenants.
    slow = inputs(rate=1, webhook_tenants=100, webhook_secret_cache_seconds=60)
    assert sm.webhook_secret_refreshes_per_month(slow, 1) == pytest.approx(60 * 730 * 60)


def test_fargate_workers_decrypt_once_per_task() -> None:
    model = inputs(rate=10_000, fargate_task_concurrency=8)
    runs = 10_000 * 730 * 3600
    b = bill(model, "one_off_batch", runs=runs)
    tasks = sm.fargate_workers(model).tasks_at_rate
    expected = sm.webhook_secrets_per_month(model, tasks) / runs * 1e6
    assert b.fargate_webhook_secrets == pytest.approx(expected, rel=1e-4)
    lambda_side = (
        b.parts["lambda_workers"]
        + b.parts["event_pollers"]
        + b.parts["sqs"]
        + b.parts["webhook_secrets"]
    )
    fargate_side = b.fargate_tasks + b.fargate_sqs + b.fargate_webhook_secrets
    assert b.on_demand_fargate == pytest.approx(b.on_demand - lambda_side + fargate_side, abs=1e-3)


# --- 9. Free tiers: the comparison holds at volume --------------------------------------------


def test_below_50_runs_per_second_the_bill_warns_that_the_comparison_does_not_hold(
    capsys: pytest.CaptureFixture[str],
) -> None:
    low = sm.whole_bill(inputs(rate=10), SMALL_MONTH)
    assert len(low.warnings) == 1
    assert "14 million free invocations" in low.warnings[0]
    assert "duetime's free tiers are not" in low.warnings[0]
    # Scheduler's free tier stays in its price; duetime's fixed monthly costs are reported.
    assert low.eventbridge_scheduler_per_million == pytest.approx(
        (SMALL_MONTH - 14e6) / SMALL_MONTH, rel=1e-3
    )
    assert low.fixed_monthly["custom_metrics"] == pytest.approx(29 * 0.30)
    assert sm.whole_bill(inputs(rate=50), 50 * 730 * 3600).warnings == []
    argv = ["--rate", "1", "--sweep-measurement", "none", "--sweep-measurement-recurring", "none"]
    assert sm.main(argv) == 0
    assert "**Warning:** At 1 runs/s" in capsys.readouterr().out


def test_the_custom_metrics_are_every_metric_name() -> None:
    from duetime.entrypoints.compactor import CompactionMetric
    from duetime.history.archive import ArchiveMetric
    from duetime.observability import Metric

    names = [
        n for kind in (Metric, ArchiveMetric, CompactionMetric) for n in vars(kind) if n.isupper()
    ]
    assert sm.Inputs(rate=10, burst=0).custom_metrics == len(names) == 29


# --- 10, 11. What the output's totals and provisioned figures are -----------------------------


def test_the_monthly_total_is_named_for_what_it_sums(capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["--rate", "10000", "--sweep-measurement", "none"]
    argv += ["--sweep-measurement-recurring", "none"]
    assert sm.main(argv) == 0
    text = capsys.readouterr().out
    assert "total on-demand" not in text
    assert "| DynamoDB requests + SQS + Lambda workers, sweeps and pollers, on demand" in text
    assert "a flat load" in text
    assert "burst capacity" in text


def test_json_adds_the_new_figures_and_keeps_the_old_keys(
    capsys: pytest.CaptureFixture[str],
) -> None:
    argv = ["--rate", "100", "--sweep-measurement", "none"]
    argv += ["--sweep-measurement-recurring", "none", "--json"]
    assert sm.main(argv) == 0
    data = json.loads(capsys.readouterr().out)
    assert {"total_on_demand", "per_million_on_demand"} <= data["cost"].keys()
    path = data["bill"]["paths"][1]
    old = {"dynamodb", "dynamodb_storage", "sqs", "api_gateway", "lambda_api", "lambda_workers"}
    old |= {"event_pollers", "lambda_sweeps", "archive", "history_storage", "cloudwatch", "xray"}
    assert old | {"dynamodb_pitr", "webhook_secrets"} == path["parts"].keys()
    assert set(path["dynamodb_storage_by_item"]) == {"run", "job", "timer"}
    assert {"batch_fill", "fixed_monthly", "webhook_secrets_per_month", "warnings"} <= (
        data["bill"].keys()
    )
