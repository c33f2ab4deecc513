"""scripts/emulator_bench.py measures the local stack's moto (signed, and unsigned as the stack
calls it) beside plain moto, in one run."""

from __future__ import annotations

import json

import pytest

from tests.scripts import load_script

emulator_bench = load_script("emulator_bench.py", "emulator_bench")


def test_it_prints_each_servers_figures(capsys: pytest.CaptureFixture[str]) -> None:
    assert emulator_bench.main(["--calls", "40", "--threads", "2", "--json"]) == 0

    figures = json.loads(capsys.readouterr().out)
    assert figures.keys() == {"local", "local_unsigned", "plain_moto"}
    for server in figures.values():
        assert server["calls"] == 40
        assert server["calls_per_second"] > 0
        assert server["server_cpu_ms_per_call"] > 0
        assert server["get_records_25_ms"] > 0
        # 20 items written by the mix, 20 by the warm-up: a stream record each
        assert (server["get_records_25_records"], server["get_records_400_records"]) == (25, 40)


def test_bad_sizes_are_refused_with_a_message(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_:
        emulator_bench.main(["--calls", "1"])
    assert exit_.value.code == 2
    assert "--calls must be at least 2" in capsys.readouterr().err
