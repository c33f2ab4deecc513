"""`duetime local` and `duetime worker` options checked before anything starts: a bad value is
a usage error naming the flag, not a traceback."""

from __future__ import annotations

import signal
from pathlib import Path
from types import FrameType

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


def test_local_puts_back_the_signal_handlers_it_found(tmp_path: Path) -> None:
    # `duetime local` installed its SIGINT/SIGTERM handlers for good: called in process (a
    # test, an embedding program) it left them behind when it returned, and a later Ctrl-C
    # set an event nobody waited on (until 2026-11-30; noticed by the twenty-fourth session).
    not_a_dir = tmp_path / "notadir"
    not_a_dir.write_text("x")

    def mine(signum: int, frame: FrameType | None) -> None:
        pass

    before = {number: signal.signal(number, mine) for number in (signal.SIGINT, signal.SIGTERM)}
    try:
        assert main(["local", "--state-dir", str(not_a_dir)]) == 2  # after it installed them
        assert signal.getsignal(signal.SIGINT) is mine
        assert signal.getsignal(signal.SIGTERM) is mine
    finally:
        for number, handler in before.items():
            signal.signal(number, handler)
