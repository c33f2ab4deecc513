"""`duetime local` and `duetime worker` options checked before anything starts: a bad value is
a usage error naming the flag, not a traceback."""

from __future__ import annotations

from pathlib import Path

import pytest

from duetime.cli.main import main


@pytest.mark.parametrize(
    ("value", "message"),
    [("2001", "must be from 0 to 2000"), ("-1", "must be from 0 to 2000"), ("1s", "'1s'")],
)
def test_a_claim_lead_out_of_range_is_a_usage_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], value: str, message: str
) -> None:
    with pytest.raises(SystemExit) as stopped:
        main(["local", "--claim-lead-ms", value, "--state-dir", str(tmp_path)])

    assert stopped.value.code == 2
    err = capsys.readouterr().err
    assert "--claim-lead-ms" in err
    assert message in err


@pytest.mark.parametrize("value", ["0", "21", "ten"])
def test_a_worker_wait_beyond_sqs_long_polls_is_a_usage_error(
    capsys: pytest.CaptureFixture[str], value: str
) -> None:
    with pytest.raises(SystemExit) as stopped:
        main(["worker", "--runtime", "fargate", "--wait-seconds", value])

    assert stopped.value.code == 2
    assert "--wait-seconds" in capsys.readouterr().err


@pytest.mark.parametrize("pattern", ["orders-*", "{tenant}%"])
def test_a_tenant_target_pattern_without_the_tenant_is_a_usage_error(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    pattern: str,
) -> None:
    for flag, env in (([], pattern), (["--tenant-target-names", pattern], "")):
        monkeypatch.setenv("DUETIME_TENANT_TARGET_NAMES", env)
        with pytest.raises(SystemExit) as stopped:
            main(["local", *flag, "--state-dir", str(tmp_path)])

        assert stopped.value.code == 2
        err = capsys.readouterr().err
        assert "--tenant-target-names" in err
        assert "holds {tenant} once" in err
