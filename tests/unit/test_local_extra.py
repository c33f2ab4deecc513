"""moto and DuckDB are the `local` extra (pyproject.toml): the runtime (the Lambda asset, the
Fargate image's `pip install .`) goes without them, and the commands that need them say so."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from duetime.cli.main import main

ROOT = Path(__file__).resolve().parents[2]
LOCAL_EXTRA = ("moto", "duckdb", "flask")
HINT = "needs the local extra: pip install 'duetime[local]'"

# Every module of the package imported in a process where the extra's modules cannot be.
IMPORT_EVERYTHING = f"""
import importlib, pkgutil, sys
for name in {LOCAL_EXTRA!r}:
    sys.modules[name] = None  # `import name` fails, as without the extra
import duetime
for module in pkgutil.walk_packages(duetime.__path__, "duetime."):
    importlib.import_module(module.name)
loaded = sorted(n for n, m in sys.modules.items() if m is not None and n.split(".")[0] in
                {LOCAL_EXTRA!r})
assert not loaded, loaded
"""


def test_every_module_imports_without_the_local_extra() -> None:
    completed = subprocess.run(
        [sys.executable, "-c", IMPORT_EVERYTHING],
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT / "shared")},
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )

    assert completed.returncode == 0, completed.stderr


@pytest.mark.parametrize(
    ("argv", "missing", "command"),
    [
        (["local"], "moto", "duetime local"),
        (["history", "query", "--local", "SELECT 1"], "duckdb", "duetime history query"),
    ],
)
def test_a_command_that_needs_the_local_extra_says_how_to_install_it(
    argv: list[str],
    missing: str,
    command: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.setitem(sys.modules, missing, None)  # find_spec answers None: not installed

    code = main([*argv, "--state-dir", str(tmp_path)])

    err = capsys.readouterr().err
    assert code == 2
    assert command in err
    assert HINT in err
    assert missing in err
    assert "Traceback" not in err
    assert not (tmp_path / "functions.log").exists()  # stopped before starting anything
