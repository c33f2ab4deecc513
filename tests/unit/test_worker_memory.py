"""The worker's memory rule and the scale model's measured worker footprint
(scripts/scale_model.py `worker_memory_rule`, `--measured`; docs/performance.md "Worker memory")."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from infra.profiles import PROFILES
from scripts import scale_model as sm


def footprint(path: Path, cpu_noop: float, cpu_webhook: float, rss: float, **more: float) -> Path:
    """A file shaped like scripts/worker_footprint.py --json (`more`: its other keys)."""
    path.write_text(
        json.dumps(
            more
            | {
                "machine": {"python": "3.11", "platform": "test-machine", "cpus": 2},
                "date": "2026-11-25",
                "batch_size": 10,
                "targets": {
                    "noop": {"cpu_seconds_per_run": cpu_noop},
                    "webhook": {"cpu_seconds_per_run": cpu_webhook},
                },
                "peak_rss_mb": rss,
            }
        )
    )
    return path


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> dict[str, Any]:
    assert sm.main(["--rate", "1000", *argv, "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert isinstance(data, dict)
    return data


def test_the_rule_gives_the_cpu_share_a_batch_needs_within_its_busy_time() -> None:
    # 74 ms of CPU per batch within 0.23 s: 0.32 vCPU = 571 MB, rounded up to 576.
    assert sm.worker_memory_rule(84.4, 0.074, 0.23) == 576
    # Twice the CPU: twice the share.
    assert sm.worker_memory_rule(84.4, 0.148, 0.23) == 1152


def test_the_rule_keeps_headroom_over_the_peak_rss() -> None:
    assert sm.worker_memory_rule(300, 0.001, 0.23) == 512  # 450 MB → 512
    assert sm.worker_memory_rule(50, 0.001, 0.23) == 128  # Lambda's minimum


def test_the_rule_never_asks_for_more_than_one_vcpu() -> None:
    # The threads share one interpreter: more than 1,769 MB buys no CPU for them.
    assert sm.worker_memory_rule(84.4, 10.0, 0.23) == 1792


def test_the_deployed_memory_is_the_rules_choice_from_the_shipped_measurement() -> None:
    model = sm.inputs_from_profile(PROFILES["default"], 1000, 0)
    assert model.worker_memory_mb == sm.WORKER_MEMORY_MB
    assert sm.chosen_worker_memory_mb(model) == sm.WORKER_MEMORY_MB


def test_a_measured_file_changes_the_priced_worker_time(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    light = run(capsys, "--measured", str(footprint(tmp_path / "a.json", 0.002, 0.003, 80)))
    heavy = run(capsys, "--measured", str(footprint(tmp_path / "b.json", 0.010, 0.020, 80)))

    # The larger target's CPU is taken; the batch's CPU runs at 768/1769 vCPU after the calls.
    assert light["inputs"]["worker_cpu_seconds_per_run"] == 0.003
    share = 768 / 1769
    # early wait 0.15 s (the default) + run 0.2 s + the calls' 0.03 s, then the CPU
    assert heavy["workers"]["invocation_seconds"] == pytest.approx(0.38 + 0.2 / share, abs=0.01)
    assert light["workers"]["invocation_seconds"] == pytest.approx(0.38 + 0.03 / share, abs=0.01)
    gb_s = (0.2 - 0.03) / share * 768 / 1024 / 10  # the difference, per run
    runs = heavy["cost"]["runs_per_month"]
    difference = heavy["cost"]["lambda_workers"] - light["cost"]["lambda_workers"]
    assert difference == pytest.approx(runs * gb_s * sm.PRICE_LAMBDA_GB_SECOND, rel=1e-3)
    assert "b.json" in heavy["input_sources"]["worker_cpu_seconds_per_run"]
    assert heavy["input_sources"]["worker_cpu_seconds_per_run"].startswith("measured 2026-11-25")
    assert heavy["input_sources"]["run_overhead_ms"].startswith("assumed")


def test_without_a_file_the_model_uses_the_shipped_measurement(
    capsys: pytest.CaptureFixture[str],
) -> None:
    data = run(capsys)
    assert data["inputs"]["worker_cpu_seconds_per_run"] == sm.MEASURED_WORKER_CPU_SECONDS_PER_RUN
    assert data["input_sources"]["worker_cpu_seconds_per_run"] == sm.MEASURED_WORKER_SOURCE
    assert data["worker_memory_rule_mb"] == 768
    assert data["inputs"]["worker_log_bytes_per_run"] == sm.MEASURED_WORKER_LOG_BYTES_PER_RUN
    assert data["input_sources"]["worker_log_bytes_per_run"] == sm.MEASURED_WORKER_LOG_SOURCE


def test_a_measured_files_log_bytes_price_the_workers_logs(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    quiet = run(capsys, "--measured", str(footprint(tmp_path / "a.json", 0.01, 0.01, 80)))
    chatty = footprint(tmp_path / "b.json", 0.01, 0.01, 80, log_bytes_per_run=1_057)
    loud = run(capsys, "--measured", str(chatty))

    # A file without the figure keeps the shipped one; with it, 1,000 B more per run is
    # 1,000 B × $0.50 per GB ingested more per run.
    assert quiet["inputs"]["worker_log_bytes_per_run"] == sm.MEASURED_WORKER_LOG_BYTES_PER_RUN
    assert loud["inputs"]["worker_log_bytes_per_run"] == 1_057
    assert "b.json" in loud["input_sources"]["worker_log_bytes_per_run"]
    paths = {p["path"]: p["parts"]["cloudwatch"] for p in loud["bill"]["paths"]}
    before = {p["path"]: p["parts"]["cloudwatch"] for p in quiet["bill"]["paths"]}
    extra = (1_057 - sm.MEASURED_WORKER_LOG_BYTES_PER_RUN) / 1024**3 * 0.50 * 1e6
    for path, dollars in paths.items():
        assert dollars - before[path] == pytest.approx(extra, rel=1e-3), path


def test_a_file_that_is_not_a_footprint_is_refused(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"targets": {}}))
    with pytest.raises(SystemExit):
        sm.main(["--rate", "1000", "--measured", str(bad)])
    assert "--measured" in capsys.readouterr().err
